"""GPU telemetry as recorded in payloads: NVML samples, per-window and per-configuration
summaries, and the clock-event (throttle) reason bits. The sampler that produces them lives in
bench.machine."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from bench.core import StrictModel

TELEMETRY_SCHEMA: Final = "specbench.telemetry/1"

# NVML clock-event reason bits (nvmlClocksEventReason*). Benign ones do not slow a busy GPU.
THROTTLE_BITS: Final[dict[int, str]] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
BENIGN_MASK: Final = 0x1 | 0x2 | 0x10 | 0x100
THROTTLE_MASK: Final = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def decode_reasons(mask: int, only: int = THROTTLE_MASK) -> list[str]:
    """Bit mask -> reason names (by default only the ones that slow a busy GPU)."""
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit & only]


class GpuSample(StrictModel):
    """One reading of one GPU. None = NVML did not answer that field."""

    t: float
    gpu: int
    powerW: float | None = None
    energyMj: int | None = Field(default=None, description="NVML cumulative energy counter, mJ")
    smClockMhz: int | None = None
    memClockMhz: int | None = None
    temperatureC: int | None = None
    memoryUsedBytes: int | None = None
    utilGpuPct: int | None = None
    utilMemPct: int | None = None
    throttleReasons: int | None = None


class GpuWindowStats(StrictModel):
    """One GPU over one window (or, in a summary, over all measured windows)."""

    gpu: int
    samples: int
    powerMeanW: float | None = None
    powerMaxW: float | None = None
    energyJ: float | None = None
    energySource: Literal["counter", "integrated", "none"] = "none"
    smClockMinMhz: int | None = None
    smClockMeanMhz: float | None = None
    smClockMaxMhz: int | None = None
    memClockMinMhz: int | None = None
    memClockMaxMhz: int | None = None
    temperatureMaxC: int | None = None
    memoryUsedMaxBytes: int | None = None
    utilGpuMeanPct: float | None = None
    throttleReasons: list[str] = Field(default_factory=list)
    throttledFraction: float = Field(default=0.0, ge=0, le=1)


class TelemetryWindow(StrictModel):
    """The samples of one measured window, summarised per GPU."""

    start: float
    end: float
    durationS: float = Field(ge=0)
    sampleCount: int = Field(ge=0)
    gpus: list[GpuWindowStats] = Field(default_factory=list)


class TelemetrySummary(StrictModel):
    """``evidence.telemetry`` of a payload: the measured windows of one configuration."""

    schemaVersion: Literal["specbench.telemetry/1"] = TELEMETRY_SCHEMA
    source: str = Field(description="'nvml', or 'replay' when built from a recording")
    intervalS: float = Field(gt=0)
    rateHz: float | None = Field(default=None, description="achieved sampling rate (all GPUs)")
    windowCount: int = Field(ge=0)
    measuredSeconds: float = Field(ge=0)
    gpus: list[GpuWindowStats] = Field(default_factory=list)
    totalPowerMeanW: float | None = None
    totalEnergyJ: float | None = None
    outputTokens: int | None = Field(default=None, ge=0)
    energyPerOutputTokenJ: float | None = None
    throttled: bool = False
    throttleReasons: list[str] = Field(default_factory=list)
    windows: list[TelemetryWindow] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class TelemetryRecording(StrictModel):
    """Raw samples plus named instants: what ``specbench telemetry-sample`` and the device run
    write, and what the unit tests replay."""

    schemaVersion: Literal["specbench.telemetry-recording/1"] = "specbench.telemetry-recording/1"
    source: str
    intervalS: float
    rateHz: float | None = None
    marks: dict[str, float] = Field(default_factory=dict)
    samples: list[GpuSample]
    note: str | None = None
