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
