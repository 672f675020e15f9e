"""The hardware record carried by every payload: the lmx ``hardware.json`` shape plus our
extended block. ``bench.machine`` captures it; this module only defines it, so payloads and
reports can read it without NVML."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.core import NonNegativeFloat, NonNegativeInt, StrictModel

HwClass = Literal["DISCRETE_GPU", "UNIFIED", "CPU_ONLY"]


class GpuEntry(StrictModel):
    """One GPU as lmx lists it (``gpus[]``)."""

    name: str
    vramGb: float = Field(ge=0)


class GpuExtended(StrictModel):
    """Per-GPU facts beyond the lmx shape; every field optional because not every source has it."""

    index: NonNegativeInt
    uuidSha256: str | None = None
    pciBusId: str | None = None
    pcieGenCurrent: int | None = None
    pcieGenMax: int | None = None
    pcieWidthCurrent: int | None = None
    pcieWidthMax: int | None = None
    powerLimitW: NonNegativeFloat | None = None
    powerLimitDefaultW: NonNegativeFloat | None = None
    smClockMaxMhz: int | None = None
    memClockMaxMhz: int | None = None
    vbios: str | None = None
    computeCapability: str | None = None
    memoryBusWidthBits: int | None = None
    datasheetBandwidthGBs: NonNegativeFloat | None = None
    # Added by issue 8 (all optional, so older records still validate).
    nvmlName: str | None = None
    memoryTotalBytes: int | None = Field(default=None, ge=0)
    powerLimitEnforcedW: NonNegativeFloat | None = None
    derivedBandwidthGBs: NonNegativeFloat | None = Field(
        default=None, description="max memory clock x 2 (double data rate) x bus width / 8"
    )
    nvlinkActiveLinks: int | None = None


class HardwareExtended(StrictModel):
    """specbench's extended block: driver, CUDA, topology. ``source`` says where it came from."""

    source: Literal["nvml", "nvidia-smi", "fixture", "none"] = "none"
    driverVersion: str | None = None
    cudaDriverVersion: str | None = None
    nvmlVersion: str | None = None
    gpus: list[GpuExtended] = Field(default_factory=list)
    p2p: dict[str, str] = Field(default_factory=dict)
    nvlink: dict[str, int] = Field(default_factory=dict)
    topology: str | None = None
    capturedAt: str | None = None
    # Added by issue 8 (all optional).
    topologyPairs: dict[str, str] = Field(
        default_factory=dict,
        description="'i-j' -> NVML common-ancestor level (SYSTEM, HOSTBRIDGE..)",
    )
    cpuCores: int | None = None
    kernel: str | None = None
    arch: str | None = None
    cpuFlags: list[str] | None = Field(
        default=None,
        description="the CPU's ISA flags that decide a CPU engine's kernels (avx2, avx512f, "
        "avx512_bf16, amx_*), read from /proc/cpuinfo at capture",
    )
    notes: list[str] = Field(default_factory=list)


class Hardware(StrictModel):
    """lmx fields: hwClass, gpuName, gpuCount, vramGb, gpus[], cpu, ramGb, os; then ``extended``."""

    hwClass: HwClass
    gpuName: str
    gpuCount: int = Field(ge=0)
    vramGb: float = Field(ge=0)
    gpus: list[GpuEntry] = Field(default_factory=list)
    cpu: str
    ramGb: float = Field(ge=0)
    os: str
    extended: HardwareExtended | None = None
