"""``specbench probe bandwidth``: measured device memory bandwidth, for the roofline.

A device-to-device copy through torch (where torch exists, e.g. inside an engine image): each
copy of N bytes reads N and writes N, so the figure counts 2N bytes per copy, which is what the
datasheet's peak bandwidth counts. Timed with CUDA events over repeated copies after a warm-up.
"""

from __future__ import annotations

import statistics
from typing import Any, Final, Literal

from pydantic import Field

from bench.core import InputError, StrictModel
from bench.machine._hardware import DATASHEET_BANDWIDTH_GBS, lmx_gpu_name

PROBE_SCHEMA: Final = "specbench.bandwidth-probe/1"


class DeviceBandwidth(StrictModel):
    index: int
    name: str
    bytesPerCopy: int = Field(gt=0)
    iterations: int = Field(ge=1)
    bandwidthGBs: float = Field(description="median over iterations, read + write counted")
    bandwidthMaxGBs: float
    samplesGBs: list[float]
    datasheetGBs: float | None = None
    fractionOfDatasheet: float | None = None


class BandwidthProbe(StrictModel):
    schemaVersion: Literal["specbench.bandwidth-probe/1"] = PROBE_SCHEMA
    method: str = "torch device-to-device copy, CUDA events, bytes read + written"
    torchVersion: str
    cudaVersion: str | None = None
    devices: list[DeviceBandwidth]


def probe_bandwidth(
    size_mib: int = 2048, iterations: int = 20, warmup: int = 3, device: int | None = None
) -> BandwidthProbe:
    """Measure every visible GPU (or one). InputError (exit 2) without torch or without CUDA."""
    if size_mib <= 0 or iterations <= 0 or warmup < 0:
        raise InputError("probe bandwidth", "size, iterations must be positive; warmup >= 0")
    try:
        # optional heavy dependency: the bandwidth probe runs only on a GPU host with torch
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise InputError(
            "probe bandwidth",
            "torch is not installed here; run the probe where torch exists (inside an engine "
            "image), or let the roofline use the card's datasheet bandwidth",
        ) from None
    if not torch.cuda.is_available():
        raise InputError("probe bandwidth", "torch sees no CUDA device on this machine")

    indices = [device] if device is not None else list(range(torch.cuda.device_count()))
    out: list[DeviceBandwidth] = []
    for idx in indices:
        name = str(torch.cuda.get_device_name(idx))
        gbs = _measure(torch, idx, size_mib * 1024 * 1024, iterations, warmup)
        sheet = DATASHEET_BANDWIDTH_GBS.get(lmx_gpu_name(name))
        med = statistics.median(gbs)
        out.append(
            DeviceBandwidth(
                index=idx,
                name=name,
                bytesPerCopy=size_mib * 1024 * 1024,
                iterations=iterations,
                bandwidthGBs=round(med, 1),
                bandwidthMaxGBs=round(max(gbs), 1),
                samplesGBs=[round(g, 1) for g in gbs],
                datasheetGBs=sheet,
                fractionOfDatasheet=round(med / sheet, 3) if sheet else None,
            )
        )
    return BandwidthProbe(
        torchVersion=str(torch.__version__), cudaVersion=torch.version.cuda, devices=out
    )


def _measure(torch: Any, idx: int, n_bytes: int, iterations: int, warmup: int) -> list[float]:
    dev = torch.device("cuda", idx)
    with torch.cuda.device(dev):
        src = torch.empty(n_bytes, dtype=torch.uint8, device=dev).fill_(1)
        dst = torch.empty_like(src)
        for _ in range(warmup):
            dst.copy_(src)
        torch.cuda.synchronize(dev)
        out: list[float] = []
        for _ in range(iterations):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            ms = float(start.elapsed_time(end))
            out.append(2 * n_bytes / (ms / 1000) / 1e9)
        del src, dst
        torch.cuda.empty_cache()
    return out
