"""A stand-in for the ``pynvml`` module with two RTX 3090s, for exercising the NVML code paths
without a GPU. Values are the dual-3090 datasheet facts; unsupported calls raise like NVML."""

from __future__ import annotations

import types
from typing import Any


class NVMLError(Exception):
    pass


class NVMLErrorNotSupported(NVMLError):
    pass


def make(count: int = 2, energy_step_mj: int = 35_000) -> types.ModuleType:
    """A fake pynvml; each power/energy read advances a clock so the energy counter moves."""
    m = types.ModuleType("pynvml")
    state: dict[str, Any] = {"init": 0, "reads": 0}
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    consts = {
        "NVML_CLOCK_SM": 1,
        "NVML_CLOCK_MEM": 2,
        "NVML_TEMPERATURE_GPU": 0,
        "NVML_FEATURE_ENABLED": 1,
        "NVML_NVLINK_MAX_LINKS": 18,
        "NVML_P2P_CAPS_INDEX_READ": 0,
        "NVML_P2P_CAPS_INDEX_WRITE": 1,
        "NVML_P2P_CAPS_INDEX_NVLINK": 2,
        "NVML_P2P_CAPS_INDEX_ATOMICS": 3,
    }
    for k, v in consts.items():
        setattr(m, k, v)

    def unsupported(*_: Any) -> Any:
        raise NVMLErrorNotSupported("Not Supported")

    def init() -> None:
        state["init"] += 1

    def shutdown() -> None:
        state["init"] -= 1

    def energy(h: int) -> int:
        state["reads"] += 1
        return 1_000_000 + state["reads"] * energy_step_mj

    fns = {
        "nvmlInit": init,
        "nvmlShutdown": shutdown,
        "nvmlSystemGetDriverVersion": lambda: "580.95.05",
        "nvmlSystemGetCudaDriverVersion_v2": lambda: 13000,
        "nvmlSystemGetNVMLVersion": lambda: "13.580.95.05",
        "nvmlDeviceGetCount": lambda: count,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: "NVIDIA GeForce RTX 3090",
        "nvmlDeviceGetUUID": lambda h: f"GPU-{h:08d}-aaaa-bbbb-cccc-dddddddddddd",
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(
            total=25769803776, used=1 << 30, free=24 << 30
        ),
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=f"00000000:0{h + 1}:00.0"),
        "nvmlDeviceGetCudaComputeCapability": lambda h: (8, 6),
        "nvmlDeviceGetNvLinkState": unsupported,
        "nvmlDeviceGetVbiosVersion": lambda h: "94.02.42.00.A9",
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: 4,
        "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: 4,
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: 16 if h == 0 else 8,
        "nvmlDeviceGetMaxPcieLinkWidth": lambda h: 16,
        "nvmlDeviceGetPowerManagementLimit": lambda h: 350_000,
        "nvmlDeviceGetPowerManagementDefaultLimit": lambda h: 350_000,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 350_000,
        "nvmlDeviceGetMaxClockInfo": lambda h, c: 2100 if c == 1 else 9751,
        "nvmlDeviceGetMemoryBusWidth": lambda h: 384,
        "nvmlDeviceGetP2PStatus": lambda a, b, k: 2,  # GPU_NOT_SUPPORTED: no NVLink bridge
        "nvmlDeviceGetTopologyCommonAncestor": lambda a, b: 30,
        "nvmlDeviceGetPowerUsage": lambda h: 300_000,
        "nvmlDeviceGetTotalEnergyConsumption": energy,
        "nvmlDeviceGetClockInfo": lambda h, c: 1695 if c == 1 else 9501,
        "nvmlDeviceGetTemperature": lambda h, s: 70,
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(gpu=99, memory=80),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x4,
    }
    for k, v in fns.items():
        setattr(m, k, v)
    m.state = state  # type: ignore[attr-defined]
    return m
