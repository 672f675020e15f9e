"""plan.json: the wall time ``specbench plan`` estimates for each configuration of a run, written
by the matrix beside its lock, so the report's artifact appendix can say how long reproducing a
claim takes without importing the planner (the report reads artifacts only)."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from bench.core import NonNegativeFloat, StrictModel

PLAN_FILE: Final = "plan.json"


class PlanEstimate(StrictModel):
    name: str
    start_s: NonNegativeFloat = Field(description="the server start, on the profile's clock")
    measure_s: NonNegativeFloat = Field(description="every level's warmup and iterations")
    accuracy_s: NonNegativeFloat = Field(
        default=0.0,
        exclude_if=lambda v: not v,
        description="the accuracy task's answers after the levels (left out while none)",
    )


class PlanRecord(StrictModel):
    """``specbench plan``'s estimate of the experiment as run (an ESTIMATE for the seed's
    hardware from the emulator profiles, never a measurement)."""

    version: Literal[1] = 1
    experiment: str = Field(description="the experiment file the run was started from")
    basis: str = Field(description="what the estimate is of, as plan says it")
    estimates: list[PlanEstimate] = Field(default_factory=list)
