"""Capture the machine a benchmark ran on: ``hardware.json`` (lmx shape + extended block).

Capture is two steps so it can be replayed: ``record_dump()`` asks NVML (or, failing that,
``nvidia-smi``) and keeps the raw answers in an :class:`NvmlDump`; ``build_hardware(dump)`` turns a
dump into :class:`~bench.hardware_schema.Hardware`. Unit tests feed recorded dumps
(tests/fixtures/hardware/) through the second step, so the code that runs on a real GPU is the
code the tests check. GPU UUIDs are hashed at recording time: a dump never holds the raw UUID.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from bench.core import InputError, StrictModel, read_json_model
from bench.core._vocab import utc_now
from bench.schema import GpuEntry, GpuExtended, Hardware, HardwareExtended

DUMP_SCHEMA: Final = "specbench.nvml-dump/1"

# Vendor datasheet peak memory bandwidth, GB/s (10^9 bytes/s), keyed by the lmx-style name.
DATASHEET_BANDWIDTH_GBS: Final[dict[str, float]] = {
    "RTX 3090": 936.0,  # GA102, 384-bit GDDR6X at 19.5 Gbps
    "RTX 3090 Ti": 1008.0,  # 384-bit GDDR6X at 21 Gbps
    "RTX 4090": 1008.0,  # 384-bit GDDR6X at 21 Gbps
    "H200": 4800.0,  # 141 GB HBM3e, SXM and NVL
    "H200 NVL": 4800.0,
    "H100 80GB HBM3": 3350.0,  # H100 SXM5
}

ANSI_RE: Final = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi topo -m underlines its header

Runner = Callable[[Sequence[str]], str | None]


class HostDump(StrictModel):
    """The host side of a capture (CPU, memory, OS), read from /proc and platform."""

    cpu: str
    cpuCores: int | None = None
    ramBytes: int | None = None
    os: str
    kernel: str | None = None
    arch: str | None = None


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
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def capture_host() -> HostDump:
    """CPU model, core count, RAM and OS (Linux /proc first, platform as fallback)."""
    cpu = ""
    for line in _read("/proc/cpuinfo").splitlines():
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
    )


# ---------------------------------------------------------------- NVML


def hash_uuid(uuid: str) -> str:
    """GPU UUIDs identify a physical card: keep only their SHA-256."""
    return hashlib.sha256(uuid.strip().encode()).hexdigest()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(raw: int) -> str:
    """NVML encodes CUDA 13.0 as 13000."""
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def record_nvml() -> NvmlDump:
    """Ask NVML everything ``build_hardware`` needs. Raises the NVML error if NVML is unusable
    (no driver, no GPU); single unsupported calls are recorded in ``errors`` and left None."""
    # optional: NVML exists only on a GPU host; without it capture records why
    import pynvml

    pynvml.nvmlInit()
    try:
        errors: dict[str, str] = {}

        def ask(name: str, fn: Callable[..., Any], *args: Any, errs: dict[str, str]) -> Any:
            try:
                return fn(*args)
            except pynvml.NVMLError as err:
                errs[name] = str(err)
                return None

        driver = ask("driverVersion", pynvml.nvmlSystemGetDriverVersion, errs=errors)
        cuda = ask("cudaDriverVersion", pynvml.nvmlSystemGetCudaDriverVersion_v2, errs=errors)
        nvml_v = ask("nvmlVersion", pynvml.nvmlSystemGetNVMLVersion, errs=errors)
        count = int(pynvml.nvmlDeviceGetCount())
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        gpus: list[GpuDump] = []
        for i, h in enumerate(handles):
            e: dict[str, str] = {}
            uuid = ask("uuid", pynvml.nvmlDeviceGetUUID, h, errs=e)
            mem = ask("memoryInfo", pynvml.nvmlDeviceGetMemoryInfo, h, errs=e)
            pci = ask("pciInfo", pynvml.nvmlDeviceGetPciInfo, h, errs=e)
            cc = ask("computeCapability", pynvml.nvmlDeviceGetCudaComputeCapability, h, errs=e)
            active: int | None = None
            for link in range(int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18))):
                try:
                    state = pynvml.nvmlDeviceGetNvLinkState(h, link)
                except pynvml.NVMLError as err:
                    if link == 0:
                        e["nvlinkState"] = str(err)
                    break
                active = (active or 0) + (1 if state == pynvml.NVML_FEATURE_ENABLED else 0)
            vbios = ask("vbios", pynvml.nvmlDeviceGetVbiosVersion, h, errs=e)
            gpus.append(
                GpuDump(
                    index=i,
                    name=_text(pynvml.nvmlDeviceGetName(h)),
                    uuidSha256=hash_uuid(_text(uuid)) if uuid is not None else None,
                    memoryTotalBytes=int(mem.total) if mem is not None else None,
                    pciBusId=_text(pci.busId) if pci is not None else None,
                    pcieGenCurrent=ask(
                        "pcieGenCurrent", pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h, errs=e
                    ),
                    pcieGenMax=ask(
                        "pcieGenMax", pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h, errs=e
                    ),
                    pcieWidthCurrent=ask(
                        "pcieWidthCurrent", pynvml.nvmlDeviceGetCurrPcieLinkWidth, h, errs=e
                    ),
                    pcieWidthMax=ask(
                        "pcieWidthMax", pynvml.nvmlDeviceGetMaxPcieLinkWidth, h, errs=e
                    ),
                    powerLimitMw=ask(
                        "powerLimit", pynvml.nvmlDeviceGetPowerManagementLimit, h, errs=e
                    ),
                    powerLimitDefaultMw=ask(
                        "powerLimitDefault",
                        pynvml.nvmlDeviceGetPowerManagementDefaultLimit,
                        h,
                        errs=e,
                    ),
                    powerLimitEnforcedMw=ask(
                        "powerLimitEnforced", pynvml.nvmlDeviceGetEnforcedPowerLimit, h, errs=e
                    ),
                    smClockMaxMhz=ask(
                        "smClockMax",
                        pynvml.nvmlDeviceGetMaxClockInfo,
                        h,
                        pynvml.NVML_CLOCK_SM,
                        errs=e,
                    ),
                    memClockMaxMhz=ask(
                        "memClockMax",
                        pynvml.nvmlDeviceGetMaxClockInfo,
                        h,
                        pynvml.NVML_CLOCK_MEM,
                        errs=e,
                    ),
                    vbios=_text(vbios) if vbios is not None else None,
                    computeCapability=f"{cc[0]}.{cc[1]}" if cc is not None else None,
                    memoryBusWidthBits=ask(
                        "memoryBusWidth", pynvml.nvmlDeviceGetMemoryBusWidth, h, errs=e
                    ),
                    nvlinkActiveLinks=active,
                    errors=e,
                )
            )
        p2p: dict[str, str] = {}
        pairs: dict[str, str] = {}
        p2p_kinds = {
            "read": pynvml.NVML_P2P_CAPS_INDEX_READ,
            "write": pynvml.NVML_P2P_CAPS_INDEX_WRITE,
            "nvlink": pynvml.NVML_P2P_CAPS_INDEX_NVLINK,
            "atomics": pynvml.NVML_P2P_CAPS_INDEX_ATOMICS,
        }
        for i in range(count):
            for j in range(i + 1, count):
                key = f"{i}-{j}"
                for kind, idx in p2p_kinds.items():
                    st = ask(f"p2p.{key}.{kind}", pynvml.nvmlDeviceGetP2PStatus, handles[i],
                             handles[j], idx, errs=errors)  # fmt: skip
                    if st is not None:
                        p2p[f"{key}.{kind}"] = P2P_STATUS.get(int(st), f"STATUS_{int(st)}")
                lvl = ask(f"topology.{key}", pynvml.nvmlDeviceGetTopologyCommonAncestor,
                          handles[i], handles[j], errs=errors)  # fmt: skip
                if lvl is not None:
                    pairs[key] = TOPOLOGY_LEVEL.get(int(lvl), f"LEVEL_{int(lvl)}")
        return NvmlDump(
            source="nvml",
            capturedAt=utc_now(),
            driverVersion=_text(driver) if driver is not None else None,
            cudaDriverVersion=_cuda_version(int(cuda)) if cuda is not None else None,
            nvmlVersion=_text(nvml_v) if nvml_v is not None else None,
            gpus=gpus,
            p2p=p2p,
            topologyPairs=pairs,
            host=capture_host(),
            errors=errors,
        )
    finally:
        pynvml.nvmlShutdown()


# NVML enum values (nvmlGpuP2PStatus_t, nvmlGpuTopologyLevel_t), spelled as nvidia-smi does.
P2P_STATUS: Final[dict[int, str]] = {
    0: "OK",
    1: "CHIPSET_NOT_SUPPORTED",
    2: "GPU_NOT_SUPPORTED",
    3: "IOH_TOPOLOGY_NOT_SUPPORTED",
    4: "DISABLED_BY_REGKEY",
    5: "NOT_SUPPORTED",
    6: "UNKNOWN",
}
TOPOLOGY_LEVEL: Final[dict[int, str]] = {
    0: "INTERNAL",
    10: "SINGLE",
    20: "MULTIPLE",
    30: "HOSTBRIDGE",
    40: "NODE",
    50: "SYSTEM",
}


# ---------------------------------------------------------------- nvidia-smi fallback

SMI_FIELDS: Final = (
    "index,name,uuid,memory.total,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max,power.limit,power.default_limit,"
    "enforced.power.limit,clocks.max.sm,clocks.max.memory,vbios_version,compute_cap,driver_version"
)


def run_command(argv: Sequence[str]) -> str | None:
    """Run a short informational command; its stdout, or None if it is missing or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _smi_value(raw: str) -> str | None:
    v = raw.strip()
    return None if not v or v.startswith("[") or v in ("N/A", "Not Supported") else v


def _smi_int(raw: str, scale: float = 1.0) -> int | None:
    v = _smi_value(raw)
    try:
        return round(float(v) * scale) if v is not None else None
    except ValueError:
        return None


def parse_nvidia_smi(csv_text: str, header_text: str | None, topo_text: str | None) -> NvmlDump:
    """Build a dump from ``nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits``
    (memory in MiB, power in W), the plain ``nvidia-smi`` banner (CUDA version) and ``topo -m``."""
    gpus: list[GpuDump] = []
    driver: str | None = None
    for line in csv_text.strip().splitlines():
        f = [c.strip() for c in line.split(",")]
        if len(f) < 17:
            raise ValueError(f"nvidia-smi answered {len(f)} fields, expected 17: {line!r}")
        driver = driver or _smi_value(f[16])
        uuid = _smi_value(f[2])
        gpus.append(
            GpuDump(
                index=int(f[0]),
                name=_smi_value(f[1]),
                uuidSha256=hash_uuid(uuid) if uuid else None,
                memoryTotalBytes=_smi_int(f[3], 1024 * 1024),
                pciBusId=_smi_value(f[4]),
                pcieGenCurrent=_smi_int(f[5]),
                pcieGenMax=_smi_int(f[6]),
                pcieWidthCurrent=_smi_int(f[7]),
                pcieWidthMax=_smi_int(f[8]),
                powerLimitMw=_smi_int(f[9], 1000),
                powerLimitDefaultMw=_smi_int(f[10], 1000),
                powerLimitEnforcedMw=_smi_int(f[11], 1000),
                smClockMaxMhz=_smi_int(f[12]),
                memClockMaxMhz=_smi_int(f[13]),
                vbios=_smi_value(f[14]),
                computeCapability=_smi_value(f[15]),
            )
        )
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header_text or "")
    return NvmlDump(
        source="nvidia-smi",
        capturedAt=utc_now(),
        driverVersion=driver,
        cudaDriverVersion=cuda.group(1) if cuda else None,
        gpus=gpus,
        topology=ANSI_RE.sub("", topo_text).strip() if topo_text else None,
        host=capture_host(),
    )


def record_nvidia_smi(run: Runner | None = None) -> NvmlDump | None:
    """The fallback when NVML cannot be loaded; None when nvidia-smi is absent or fails."""
    run = run or run_command
    csv_text = run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"])
    if not csv_text or not csv_text.strip():
        return None
    return parse_nvidia_smi(csv_text, run(["nvidia-smi"]), run(["nvidia-smi", "topo", "-m"]))


# ---------------------------------------------------------------- dump -> Hardware


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


def read_dump(path: Path) -> NvmlDump:
    """Load a recorded dump (fixture or ``specbench hardware --dump``); InputError if malformed."""
    return read_json_model(path, NvmlDump)
