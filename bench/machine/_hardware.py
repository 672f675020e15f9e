"""Capture the machine a benchmark ran on: ``hardware.json`` (lmx shape + extended block).

Capture is two steps so it can be replayed: ``record_dump()`` asks NVML (``_nvml``) or, failing
that, ``nvidia-smi`` (``_smi``) and keeps the raw answers in an ``NvmlDump`` (``_dump``);
``build_hardware(dump)`` (here) turns a dump into ``bench.schema.Hardware``. Unit tests feed
recorded dumps (tests/fixtures/hardware/) through the second step, so the code that runs on a
real GPU is the code the tests check.
"""

from __future__ import annotations

from typing import Final

from bench.core import InputError, utc_now
from bench.machine._dump import (
    HostDump,
    NvmlDump,
    capture_host,
)
from bench.machine._nvml import record_nvml
from bench.machine._smi import Runner, record_nvidia_smi
from bench.schema import GpuEntry, GpuExtended, Hardware, HardwareExtended

DATASHEET_BANDWIDTH_GBS: Final[dict[str, float]] = {
    "RTX 3090": 936.0,  # GA102, 384-bit GDDR6X at 19.5 Gbps
    "RTX 3090 Ti": 1008.0,  # 384-bit GDDR6X at 21 Gbps
    "RTX 4090": 1008.0,  # 384-bit GDDR6X at 21 Gbps
    "H200": 4800.0,  # 141 GB HBM3e, SXM and NVL
    "H200 NVL": 4800.0,
    "H100 80GB HBM3": 3350.0,  # H100 SXM5
}


def lmx_gpu_name(nvml_name: str) -> str:
    """'NVIDIA GeForce RTX 3090' -> 'RTX 3090' (the spelling of lmx's allowlist template)."""
    name = nvml_name.strip()
    for prefix in ("NVIDIA ", "GeForce "):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def _gb(n_bytes: int | None) -> float:
    """lmx's "GB" is the marketing GiB (a 3090 is "24"): bytes / 2^30."""
    return round(n_bytes / 2**30, 1) if n_bytes else 0.0


def _w(mw: int | None) -> float | None:
    return round(mw / 1000, 1) if mw is not None else None


def derived_bandwidth_gbs(mem_clock_mhz: int | None, bus_bits: int | None) -> float | None:
    """Peak bandwidth from NVML's max memory clock and bus width (two transfers a clock). It
    matches the datasheet for GDDR6X (3090: 9751 MHz x 2 x 384 / 8 = 936 GB/s) and HBM3e."""
    if not mem_clock_mhz or not bus_bits:
        return None
    return round(mem_clock_mhz * 1e6 * 2 * bus_bits / 8 / 1e9, 1)


def build_hardware(dump: NvmlDump) -> Hardware:
    """Turn a dump into the Hardware record. Pure: no NVML, no files."""
    host = dump.host
    notes: list[str] = []
    if dump.handWritten:
        notes.append(f"hand-written record, not captured on a device: {dump.note or ''}".strip())
    names = [lmx_gpu_name(g.name or "unknown GPU") for g in dump.gpus]
    if len(set(names)) > 1:
        notes.append("mixed GPU models: " + ", ".join(names))
    entries = [
        GpuEntry(name=n, vramGb=_gb(g.memoryTotalBytes))
        for n, g in zip(names, dump.gpus, strict=True)
    ]
    ext_gpus = [
        GpuExtended(
            index=g.index,
            nvmlName=g.name,
            uuidSha256=g.uuidSha256,
            pciBusId=g.pciBusId,
            pcieGenCurrent=g.pcieGenCurrent,
            pcieGenMax=g.pcieGenMax,
            pcieWidthCurrent=g.pcieWidthCurrent,
            pcieWidthMax=g.pcieWidthMax,
            powerLimitW=_w(g.powerLimitMw),
            powerLimitDefaultW=_w(g.powerLimitDefaultMw),
            powerLimitEnforcedW=_w(g.powerLimitEnforcedMw),
            smClockMaxMhz=g.smClockMaxMhz,
            memClockMaxMhz=g.memClockMaxMhz,
            vbios=g.vbios,
            computeCapability=g.computeCapability,
            memoryBusWidthBits=g.memoryBusWidthBits,
            memoryTotalBytes=g.memoryTotalBytes,
            datasheetBandwidthGBs=DATASHEET_BANDWIDTH_GBS.get(n),
            derivedBandwidthGBs=derived_bandwidth_gbs(g.memClockMaxMhz, g.memoryBusWidthBits),
            nvlinkActiveLinks=g.nvlinkActiveLinks,
        )
        for n, g in zip(names, dump.gpus, strict=True)
    ]
    nvlink = {
        str(g.index): g.nvlinkActiveLinks for g in dump.gpus if g.nvlinkActiveLinks is not None
    }
    topology = dump.topology
    if topology is None and dump.topologyPairs:
        topology = "; ".join(
            f"GPU{k.replace('-', '<->GPU')}: {v}" for k, v in dump.topologyPairs.items()
        )
    gpu = bool(dump.gpus)
    return Hardware(
        hwClass="DISCRETE_GPU" if gpu else "CPU_ONLY",
        gpuName=names[0] if gpu else "none",
        gpuCount=len(dump.gpus),
        vramGb=round(sum(e.vramGb for e in entries), 1),
        gpus=entries,
        cpu=host.cpu,
        ramGb=_gb(host.ramBytes),
        os=host.os,
        extended=HardwareExtended(
            source=dump.source,
            driverVersion=dump.driverVersion,
            cudaDriverVersion=dump.cudaDriverVersion,
            nvmlVersion=dump.nvmlVersion,
            gpus=ext_gpus,
            p2p=dump.p2p,
            nvlink=nvlink,
            topology=topology,
            topologyPairs=dump.topologyPairs,
            capturedAt=dump.capturedAt,
            cpuCores=host.cpuCores,
            kernel=host.kernel,
            arch=host.arch,
            cpuFlags=host.cpuFlags,
            notes=notes,
        ),
    )


def cpu_only(host: HostDump | None = None, reason: str | None = None) -> Hardware:
    """The record of a machine without an NVIDIA GPU (the demo runs on one)."""
    h = host or capture_host()
    hw = build_hardware(NvmlDump(source="fixture", capturedAt=utc_now(), host=h))
    ext = hw.extended
    assert ext is not None
    notes = [f"no NVIDIA GPU: {reason}"] if reason else ["no NVIDIA GPU"]
    return hw.model_copy(
        update={"extended": ext.model_copy(update={"source": "none", "notes": notes})}
    )


# ---------------------------------------------------------------- entry points


def record_dump(run: Runner | None = None) -> tuple[NvmlDump | None, str]:
    """NVML first, nvidia-smi second. Returns the dump (None if neither answered) and why."""
    why = ""
    try:
        return record_nvml(), ""
    except Exception as err:  # NVMLError_LibraryNotFound, DriverNotLoaded, ... all mean "no NVML"
        why = f"NVML: {err}"
    smi = record_nvidia_smi(run)
    if smi is not None and smi.gpus:
        return smi, why
    return None, why + ("; nvidia-smi: not found or no GPU listed" if why else "")


def capture_hardware(allow_no_gpu: bool = False, run: Runner | None = None) -> Hardware:
    """Capture this machine. Without an NVIDIA GPU: InputError (exit 2), or with
    ``allow_no_gpu`` a CPU_ONLY record."""
    dump, why = record_dump(run)
    if dump is not None and dump.gpus:
        return build_hardware(dump)
    if allow_no_gpu:
        return cpu_only(reason=why or None)
    raise InputError(
        "hardware",
        f"no NVIDIA GPU found ({why or 'NVML reported zero devices'}); "
        "pass --allow-no-gpu to record a CPU_ONLY machine (demo/emulator runs)",
    )
