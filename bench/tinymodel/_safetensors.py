"""safetensors written and read with numpy alone (no torch on the host).

The format: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw little-endian bytes of every tensor back to back.

float32 arrays are written as BF16 (the dtype of every tiny model's dense weights); int32 and
float16 arrays as I32 and F16 (a GPTQ checkpoint's ``qweight``/``qzeros``/``g_idx`` and
``scales``: bench/tinymodel/_gptq.py).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.core import read_bytes, read_safetensors_header, write_bytes

#: a generated tiny model's file is a few MB; read whole, as no real checkpoint is
MAX_TINY_BYTES = 1 << 30

_ALIGN = 8
#: numpy dtype of a written array -> (safetensors dtype, little-endian numpy dtype of its bytes)
_STORED: dict[np.dtype[Any], tuple[str, str]] = {
    np.dtype(np.int32): ("I32", "<i4"),
    np.dtype(np.float16): ("F16", "<f2"),
}


def to_bf16_bits(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    """float32 -> bfloat16 bit patterns, rounded to nearest, ties to even (finite input)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return ((bits + rounding) >> np.uint32(16)).astype(np.uint16)


def from_bf16_bits(bits: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    """bfloat16 bit patterns -> float32 (exact)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _encode(name: str, array: npt.NDArray[Any]) -> tuple[str, bytes]:
    if array.dtype == np.float32:
        return "BF16", to_bf16_bits(array).astype("<u2").tobytes()
    if array.dtype in _STORED:
        dtype, stored = _STORED[array.dtype]
        return dtype, np.ascontiguousarray(array).astype(stored).tobytes()
    raise ValueError(f"{name}: cannot write dtype {array.dtype}")


def write_safetensors(path: Path, tensors: Mapping[str, npt.NDArray[Any]]) -> None:
    """Write ``tensors`` sorted by name, so equal input gives equal bytes: float32 as BF16,
    int32 as I32, float16 as F16 (atomically: bench.core's writing layer)."""
    write_bytes(path, safetensors_bytes(tensors))


def safetensors_bytes(tensors: Mapping[str, npt.NDArray[Any]]) -> bytes:
    """The file :func:`write_safetensors` writes, as bytes."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        array = tensors[name]
        dtype, blob = _encode(name, array)
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * (-len(text) % _ALIGN)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_bf16_safetensors(path: Path, tensors: dict[str, npt.NDArray[np.float32]]) -> None:
    """Write ``tensors`` as bf16, sorted by name, so equal input gives equal bytes."""
    write_safetensors(path, tensors)


def read_safetensors(path: Path) -> dict[str, tuple[str, npt.NDArray[Any]]]:
    """Every tensor of ``path`` as (its safetensors dtype, its values): BF16 as float32 (exact),
    F16 as float16, I32 as int32."""
    header, start = read_safetensors_header(path)
    data = read_bytes(path, what="safetensors file", max_bytes=MAX_TINY_BYTES)[start:]
    out: dict[str, tuple[str, npt.NDArray[Any]]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = info["dtype"]
        if dtype == "BF16":
            bits = np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint16)
            values: npt.NDArray[Any] = from_bf16_bits(bits)
        elif dtype == "F16":
            values = np.frombuffer(data[begin:end], dtype="<f2").astype(np.float16)
        elif dtype == "I32":
            values = np.frombuffer(data[begin:end], dtype="<i4").astype(np.int32)
        else:
            raise ValueError(f"{path}: {name} is {dtype}, not BF16, F16 or I32")
        out[name] = (dtype, values.reshape(info["shape"]))
    return out


def read_bf16_safetensors(path: Path) -> dict[str, npt.NDArray[np.float32]]:
    """Read a file written by :func:`write_bf16_safetensors` (bf16 only) back to float32."""
    out: dict[str, npt.NDArray[np.float32]] = {}
    for name, (dtype, values) in read_safetensors(path).items():
        if dtype != "BF16":
            raise ValueError(f"{path}: {name} is {dtype}, not BF16")
        out[name] = values
    return out
