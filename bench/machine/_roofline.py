"""The bandwidth roofline of decoding: how fast a configuration could go if every decode step
only had to stream its bytes from GPU memory.

One decode step reads, on each of the ``cards`` tensor-parallel ranks, that rank's share of the
weights (plus any draft model's) and of the KV cache of every running stream. So

    steps/s  = bandwidth per card / bytes read per step per rank
    ceiling  = steps/s x tokens per step          (per stream; x concurrency for the aggregate)

which for an even split is the seed's ``bandwidth x cards / bytes read per token``. With
speculative decoding ``tokens_per_step`` is the mean acceptance length, so the same formula
gives an acceptance-adjusted ceiling. Communication, kernels and scheduling are ignored: the
ceiling is an upper bound, and a measured figure far above it (lmx rejects > 1.15x) means a
measurement error, not a fast engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from bench.core import InputError, StrictModel, read_safetensors_header
from bench.schema import CheckpointBytes, Hardware

ABOVE_CEILING_FACTOR: Final = 1.15
BandwidthSource = Literal["measured", "datasheet", "derived", "given"]


class Roofline(StrictModel):
    """A decode ceiling and everything that went into it."""

    bandwidthGBs: float = Field(gt=0, description="per card, 10^9 bytes/s")
    bandwidthSource: BandwidthSource
    cards: int = Field(ge=1)
    weightBytes: int = Field(ge=0, description="target weights read per step, all ranks")
    draftBytesPerStep: int = Field(ge=0)
    kvBytesPerToken: float = Field(ge=0, description="KV bytes per context token, all ranks")
    contextTokens: float = Field(ge=0)
    concurrency: int = Field(ge=1)
    tokensPerStep: float = Field(gt=0)
    bytesPerStepPerRank: float = Field(gt=0)
    stepsPerSecond: float
    ceilingTokS: float = Field(description="per stream")
    aggregateCeilingTokS: float


class Efficiency(StrictModel):
    measuredTokS: float
    ceilingTokS: float
    fraction: float
    aboveCeiling: bool = Field(description=f"measured > {ABOVE_CEILING_FACTOR} x ceiling")


def ceiling(
    bandwidth_gbs: float,
    cards: int,
    weight_bytes: int,
    *,
    kv_bytes_per_token: float = 0.0,
    context_tokens: float = 0.0,
    concurrency: int = 1,
    tokens_per_step: float = 1.0,
    draft_bytes_per_step: int = 0,
    bandwidth_source: BandwidthSource = "given",
) -> Roofline:
    """The decode ceiling of one configuration (see the module docstring for the model)."""
    if bandwidth_gbs <= 0 or cards < 1 or concurrency < 1 or tokens_per_step <= 0:
        raise ValueError("bandwidth, cards, concurrency and tokens_per_step must be positive")
    per_rank = (
        weight_bytes + draft_bytes_per_step + concurrency * kv_bytes_per_token * context_tokens
    ) / cards
    if per_rank <= 0:
        raise ValueError("a decode step must read some bytes (weights or KV)")
    steps = bandwidth_gbs * 1e9 / per_rank
    return Roofline(
        bandwidthGBs=bandwidth_gbs,
        bandwidthSource=bandwidth_source,
        cards=cards,
        weightBytes=weight_bytes,
        draftBytesPerStep=draft_bytes_per_step,
        kvBytesPerToken=kv_bytes_per_token,
        contextTokens=context_tokens,
        concurrency=concurrency,
        tokensPerStep=tokens_per_step,
        bytesPerStepPerRank=per_rank,
        stepsPerSecond=steps,
        ceilingTokS=steps * tokens_per_step,
        aggregateCeilingTokS=steps * tokens_per_step * concurrency,
    )


def efficiency(measured_tok_s: float, roof: Roofline, *, aggregate: bool = False) -> Efficiency:
    """Measured figure against the ceiling (per stream, or the aggregate with ``aggregate``)."""
    top = roof.aggregateCeilingTokS if aggregate else roof.ceilingTokS
    frac = measured_tok_s / top
    return Efficiency(
        measuredTokS=measured_tok_s,
        ceilingTokS=top,
        fraction=frac,
        aboveCeiling=frac > ABOVE_CEILING_FACTOR,
    )


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: float = 2) -> int:
    """K and V of one context token over the full-attention layers (linear-attention layers of
    hybrid models keep a fixed state instead: count them in ``weight_bytes`` or leave them out)."""
    return int(2 * layers * kv_heads * head_dim * dtype_bytes)


def mean_decode_context(prompt_tokens: int, max_tokens: int) -> float:
    """The average context a decode step attends to when every request emits ``max_tokens``."""
    return prompt_tokens + max_tokens / 2


def weight_bytes_from_files(paths: Iterable[Path]) -> int:
    """Bytes of the weight files (``*.safetensors``) found in the given files or directories."""
    total = 0
    for p in paths:
        files = sorted(p.rglob("*.safetensors")) if p.is_dir() else [p]
        total += sum(f.stat().st_size for f in files)
    return total


def card_bandwidth(
    hardware: Hardware, measured_gbs: float | None = None
) -> tuple[float, BandwidthSource] | None:
    """The per-card bandwidth to use: measured (``specbench probe bandwidth``) first, then the
    datasheet, then NVML's clock x bus width; the slowest card counts. None if nothing is known."""
    if measured_gbs is not None and measured_gbs > 0:
        return measured_gbs, "measured"
    ext = hardware.extended
    if ext is None or not ext.gpus:
        return None
    sheet = [g.datasheetBandwidthGBs for g in ext.gpus]
    if all(s is not None for s in sheet):
        return min(s for s in sheet if s is not None), "datasheet"
    derived = [g.derivedBandwidthGBs for g in ext.gpus]
    if all(d is not None for d in derived):
        return min(d for d in derived if d is not None), "derived"
    return None


def _tensor_class(name: str) -> str:
    if name.startswith("mtp.") or ".mtp." in name:
        return "mtp"
    if "visual." in name or name.startswith("vision"):
        return "vision"
    if "embed_tokens" in name:
        return "embedding"
    return "decode"


def decode_bytes_from_checkpoint(model_dir: Path) -> CheckpointBytes | None:
    """Sizes per tensor class from every ``*.safetensors`` header under ``model_dir``; None when
    there is no such file or a header does not parse (the estimate is used then)."""

    files = sorted(model_dir.rglob("*.safetensors")) if model_dir.is_dir() else []
    if not files:
        return None
    sizes = {"decode": 0, "mtp": 0, "vision": 0, "embedding": 0}
    try:
        for f in files:
            header, _ = read_safetensors_header(f)
            for name, meta in header.items():
                if name == "__metadata__":
                    continue
                start, end = meta["data_offsets"]
                sizes[_tensor_class(name)] += int(end) - int(start)
    except (InputError, ValueError, KeyError, TypeError):
        return None
    return CheckpointBytes(
        path=str(model_dir),
        files=len(files),
        fileBytes=weight_bytes_from_files(files),
        decodeWeightBytes=sizes["decode"],
        mtpHeadBytes=sizes["mtp"],
        embeddingBytes=sizes["embedding"],
        visionBytes=sizes["vision"],
    )
