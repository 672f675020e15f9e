"""What one hardware capture asked and was answered, kept raw so it can be replayed: the host
(CPU, memory, OS from /proc and platform) and each GPU as NVML or nvidia-smi reported it. GPU
UUIDs are hashed at recording time: a dump never holds the raw UUID."""

from __future__ import annotations

import hashlib
import os
import platform
import re
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from bench.core import InputError, StrictModel, read_json_model, read_text

DUMP_SCHEMA: Final = "specbench.nvml-dump/1"

TOPOLOGY_LEVEL: Final[dict[int, str]] = {
    0: "INTERNAL",
    10: "SINGLE",
    20: "MULTIPLE",
    30: "HOSTBRIDGE",
    40: "NODE",
    50: "SYSTEM",
}


class HostDump(StrictModel):
    """The host side of a capture (CPU, memory, OS), read from /proc and platform."""

    cpu: str
    cpuCores: int | None = None
    ramBytes: int | None = None
    os: str
    kernel: str | None = None
    arch: str | None = None
    cpuFlags: list[str] | None = None


class GpuDump(StrictModel):
    """Raw per-GPU answers; units as NVML gives them (bytes, mW, MHz). None = not answered."""

    index: int
    name: str | None = None
    uuidSha256: str | None = None
    memoryTotalBytes: int | None = None
    pciBusId: str | None = None
    pcieGenCurrent: int | None = None
    pcieGenMax: int | None = None
    pcieWidthCurrent: int | None = None
    pcieWidthMax: int | None = None
    powerLimitMw: int | None = None
    powerLimitDefaultMw: int | None = None
    powerLimitEnforcedMw: int | None = None
    smClockMaxMhz: int | None = None
    memClockMaxMhz: int | None = None
    vbios: str | None = None
    computeCapability: str | None = None
    memoryBusWidthBits: int | None = None
    nvlinkActiveLinks: int | None = None
    errors: dict[str, str] = Field(default_factory=dict, description="call -> NVML error")


class NvmlDump(StrictModel):
    """Everything one capture asked, as answered. ``build_hardware`` needs nothing else."""

    schemaVersion: Literal["specbench.nvml-dump/1"] = DUMP_SCHEMA
    source: Literal["nvml", "nvidia-smi", "fixture"]
    capturedAt: str
    handWritten: bool = Field(default=False, description="true for fixtures not from a device")
    note: str | None = None
    driverVersion: str | None = None
    cudaDriverVersion: str | None = None
    nvmlVersion: str | None = None
    gpus: list[GpuDump] = Field(default_factory=list)
    p2p: dict[str, str] = Field(default_factory=dict, description="'i-j.read' -> status")
    topologyPairs: dict[str, str] = Field(default_factory=dict)
    topology: str | None = None
    host: HostDump
    errors: dict[str, str] = Field(default_factory=dict)


# ---------------------------------------------------------------- host


def _read(path: str) -> str:
    try:
        return read_text(path, what="host file", lenient=True)
    except InputError:
        return ""


#: The /proc/cpuinfo flags that decide which kernels a CPU engine can run (vLLM's CPU build
#: picks AVX2, AVX-512 or AVX-512+BF16/AMX at run time: vllm/platforms/cpu.py:631 in 0.32.0).
ISA_FLAGS: Final = (
    "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni",
    "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
)  # fmt: skip


def cpu_isa_flags(cpuinfo: str) -> list[str] | None:
    """The ISA flags of ``ISA_FLAGS`` that the first ``flags`` line of /proc/cpuinfo lists, in
    that order; None when there is no such line (not Linux, or not x86)."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            return [f for f in ISA_FLAGS if f in have]
    return None


def capture_host() -> HostDump:
    """CPU model, core count, ISA flags, RAM and OS (Linux /proc first, platform as fallback)."""
    cpu = ""
    cpuinfo = _read("/proc/cpuinfo")
    for line in cpuinfo.splitlines():
        if line.lower().startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    ram: int | None = None
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", _read("/proc/meminfo"), re.MULTILINE)
    if m:
        ram = int(m.group(1)) * 1024
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', _read("/etc/os-release"), re.MULTILINE)
    return HostDump(
        cpu=cpu or platform.processor() or platform.machine() or "unknown",
        cpuCores=os.cpu_count(),
        ramBytes=ram,
        os=pretty.group(1) if pretty else platform.platform(),
        kernel=platform.release() or None,
        arch=platform.machine() or None,
        cpuFlags=cpu_isa_flags(cpuinfo),
    )


# ---------------------------------------------------------------- NVML


def hash_uuid(uuid: str) -> str:
    """GPU UUIDs identify a physical card: keep only their SHA-256."""
    return hashlib.sha256(uuid.strip().encode()).hexdigest()


def read_dump(path: Path) -> NvmlDump:
    """Load a recorded dump (fixture or ``specbench hardware --dump``); InputError if malformed."""
    return read_json_model(path, NvmlDump)
