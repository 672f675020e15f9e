"""Record a dump through NVML (pynvml): every field the hardware record and the roofline use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from bench.core import utc_now
from bench.machine._dump import (
    TOPOLOGY_LEVEL,
    GpuDump,
    NvmlDump,
    capture_host,
    hash_uuid,
)


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
        ask = _asker(pynvml, errors)
        driver = ask("driverVersion", pynvml.nvmlSystemGetDriverVersion)
        cuda = ask("cudaDriverVersion", pynvml.nvmlSystemGetCudaDriverVersion_v2)
        nvml_v = ask("nvmlVersion", pynvml.nvmlSystemGetNVMLVersion)
        count = int(pynvml.nvmlDeviceGetCount())
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        gpus = [_gpu_dump(pynvml, i, h) for i, h in enumerate(handles)]
        p2p, pairs = _pairs(pynvml, handles, ask)
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


def _asker(nvml: Any, errs: dict[str, str]) -> Callable[..., Any]:
    """``ask(name, fn, *args)``: ``fn(*args)``, or None with NVML's error kept as
    ``errs[name]`` (a call this GPU or driver does not support is recorded, not fatal)."""

    def ask(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except nvml.NVMLError as err:
            errs[name] = str(err)
            return None

    return ask


def _gpu_dump(nvml: Any, i: int, h: Any) -> GpuDump:
    """GPU ``i``'s record; what it cannot answer is None, with NVML's error in its ``errors``."""
    e: dict[str, str] = {}
    ask = _asker(nvml, e)
    uuid = ask("uuid", nvml.nvmlDeviceGetUUID, h)
    mem = ask("memoryInfo", nvml.nvmlDeviceGetMemoryInfo, h)
    pci = ask("pciInfo", nvml.nvmlDeviceGetPciInfo, h)
    cc = ask("computeCapability", nvml.nvmlDeviceGetCudaComputeCapability, h)
    active = _nvlink_active_links(nvml, h, e)
    vbios = ask("vbios", nvml.nvmlDeviceGetVbiosVersion, h)
    return GpuDump(
        index=i,
        name=_text(nvml.nvmlDeviceGetName(h)),
        uuidSha256=hash_uuid(_text(uuid)) if uuid is not None else None,
        memoryTotalBytes=int(mem.total) if mem is not None else None,
        pciBusId=_text(pci.busId) if pci is not None else None,
        pcieGenCurrent=ask("pcieGenCurrent", nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
        pcieGenMax=ask("pcieGenMax", nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        pcieWidthCurrent=ask("pcieWidthCurrent", nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        pcieWidthMax=ask("pcieWidthMax", nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        powerLimitMw=ask("powerLimit", nvml.nvmlDeviceGetPowerManagementLimit, h),
        powerLimitDefaultMw=ask(
            "powerLimitDefault", nvml.nvmlDeviceGetPowerManagementDefaultLimit, h
        ),
        powerLimitEnforcedMw=ask("powerLimitEnforced", nvml.nvmlDeviceGetEnforcedPowerLimit, h),
        smClockMaxMhz=ask("smClockMax", nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM),
        memClockMaxMhz=ask("memClockMax", nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_MEM),
        vbios=_text(vbios) if vbios is not None else None,
        computeCapability=f"{cc[0]}.{cc[1]}" if cc is not None else None,
        memoryBusWidthBits=ask("memoryBusWidth", nvml.nvmlDeviceGetMemoryBusWidth, h),
        nvlinkActiveLinks=active,
        errors=e,
    )


def _nvlink_active_links(nvml: Any, h: Any, e: dict[str, str]) -> int | None:
    """Links reported enabled, asked link by link until NVML has no more; None (the error in
    ``e``) when it answers not even the first."""
    active: int | None = None
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(h, link)
        except nvml.NVMLError as err:
            if link == 0:
                e["nvlinkState"] = str(err)
            break
        active = (active or 0) + (1 if state == nvml.NVML_FEATURE_ENABLED else 0)
    return active


def _pairs(
    nvml: Any, handles: list[Any], ask: Callable[..., Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """Each pair of GPUs' peer-to-peer capabilities and topology level, as nvidia-smi names
    them, by ``"i-j"``."""
    p2p: dict[str, str] = {}
    pairs: dict[str, str] = {}
    p2p_kinds = {
        "read": nvml.NVML_P2P_CAPS_INDEX_READ,
        "write": nvml.NVML_P2P_CAPS_INDEX_WRITE,
        "nvlink": nvml.NVML_P2P_CAPS_INDEX_NVLINK,
        "atomics": nvml.NVML_P2P_CAPS_INDEX_ATOMICS,
    }
    count = len(handles)
    for i in range(count):
        for j in range(i + 1, count):
            key = f"{i}-{j}"
            for kind, idx in p2p_kinds.items():
                st = ask(f"p2p.{key}.{kind}", nvml.nvmlDeviceGetP2PStatus, handles[i],
                         handles[j], idx)  # fmt: skip
                if st is not None:
                    p2p[f"{key}.{kind}"] = P2P_STATUS.get(int(st), f"STATUS_{int(st)}")
            lvl = ask(f"topology.{key}", nvml.nvmlDeviceGetTopologyCommonAncestor,
                      handles[i], handles[j])  # fmt: skip
            if lvl is not None:
                pairs[key] = TOPOLOGY_LEVEL.get(int(lvl), f"LEVEL_{int(lvl)}")
    return p2p, pairs


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
