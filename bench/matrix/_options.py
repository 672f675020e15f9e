"""A matrix run's options and its outcome: what the caller asks, what each configuration did."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from bench.core import (
    EMULATOR_IMAGE,
    StrictModel,
    TimeoutSeconds,
    TimeScale,
)
from bench.engines import DEFAULT_MODEL_CACHE
from bench.machine import (
    SamplerStart,
)

# Starts one telemetry sampler for a configuration (or says why there is none).
TelemetryFactory = Callable[[], SamplerStart]
EMULATED_NO_TELEMETRY = "emulated run: no GPU does the work, so no GPU telemetry is recorded"


class MatrixOptions(StrictModel):
    out: Path
    only: list[str] = Field(default_factory=list)
    resume: bool = False
    launcher: Literal["docker", "process"] = "docker"
    emulate: bool = False
    #: the process launcher runs the engine's own server argv on this host (the engine is
    #: installed here, as on the device machine) instead of the emulator
    local_engine: bool = False
    time_scale: TimeScale | None = None
    warmup: int | None = Field(default=None, ge=0, description="override (labelled deviation)")
    iterations: int | None = Field(default=None, ge=1, description="override (labelled)")
    allow_unpinned: bool = False
    model_cache: str = DEFAULT_MODEL_CACHE
    emulator_image: str = EMULATOR_IMAGE
    ready_timeout_s: TimeoutSeconds | None = None
    run_id: str | None = None
    show_progress: bool = True
    prestart: bool = Field(
        default=False,
        description="emulated local processes only: start every configuration's emulator at "
        "once, so their start-ups overlap (the demo); measured one at a time as always",
    )

    @model_validator(mode="after")
    def _local_engine_is_a_process(self) -> MatrixOptions:
        if self.local_engine and (self.launcher != "process" or self.emulate):
            raise ValueError("local_engine needs the process launcher and no --emulate")
        return self

    @property
    def emulated(self) -> bool:
        # A local process is the emulator unless the engine itself is installed here.
        return self.emulate or (self.launcher == "process" and not self.local_engine)


@dataclass
class Outcome:
    name: str
    status: Literal["done", "skipped", "failed", "interrupted"]
    payloads: list[Path] = field(default_factory=list)
    valid: bool | None = None
    reasons: list[str] = field(default_factory=list)
    expected_invalid: bool = False


@dataclass
class MatrixResult:
    out: Path
    run_id: str
    outcomes: list[Outcome]

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]
