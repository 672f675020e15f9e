"""bf16 safetensors written and read with numpy alone (no torch on the host).

The format: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw little-endian bytes of every tensor back to back.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

_ALIGN = 8


def to_bf16_bits(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    """float32 -> bfloat16 bit patterns, rounded to nearest, ties to even (finite input)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return ((bits + rounding) >> np.uint32(16)).astype(np.uint16)


def from_bf16_bits(bits: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    """bfloat16 bit patterns -> float32 (exact)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def write_bf16_safetensors(path: Path, tensors: dict[str, npt.NDArray[np.float32]]) -> None:
    """Write ``tensors`` as bf16, sorted by name, so equal input gives equal bytes."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        array = tensors[name]
        blob = to_bf16_bits(array).astype("<u2").tobytes()
        header[name] = {
            "dtype": "BF16",
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * (-len(text) % _ALIGN)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_bf16_safetensors(path: Path) -> dict[str, npt.NDArray[np.float32]]:
    """Read a file written by :func:`write_bf16_safetensors` (bf16 only) back to float32."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    data = raw[8 + size :]
    out: dict[str, npt.NDArray[np.float32]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "BF16":
            raise ValueError(f"{path}: {name} is {info['dtype']}, not BF16")
        begin, end = info["data_offsets"]
        bits = np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint16)
        out[name] = from_bf16_bits(bits).reshape(info["shape"])
    return out
