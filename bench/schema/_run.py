"""The run's own files beside the payloads: ``experiment.lock.json`` (what was asked),
``status.json`` (what happened to each configuration) and ``weights.json`` (byte counts read
from the checkpoints). Each model carries its version; the matrix writes with it and the report
reads with it, so no reader guesses key names."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from bench.core import NonNegativeInt, PositiveInt, StrictModel, TimeScale
from bench.schema._experiment import Experiment
from bench.schema._pins import Pin

LOCK_SCHEMA: Final = "specbench.lock/1"
STATUS_SCHEMA: Final = "specbench.status/1"
WEIGHTS_SCHEMA: Final = "specbench.weights/1"

LOCK_FILE = "experiment.lock.json"
STATUS_FILE = "status.json"
WEIGHTS_FILE = "weights.json"


class RunOverrides(StrictModel):
    """Command-line values that replaced the experiment's for this run."""

    warmup: NonNegativeInt | None = None
    iterations: PositiveInt | None = None
    time_scale: TimeScale | None = Field(
        default=None, description="emulator speed-up: every emulated rate is multiplied by 1/x"
    )


class RunLock(StrictModel):
    """The experiment exactly as run, with the run's identity and overrides."""

    schema_: Literal["specbench.lock/1"] = Field(default=LOCK_SCHEMA, alias="schema")
    run_id: str
    created_at: str
    simulated: bool
    launcher: Literal["docker", "process"]
    local_engine: bool = Field(
        default=False,
        exclude_if=lambda v: not v,
        description="the process launcher started the engines installed on this host, no image",
    )
    overrides: RunOverrides = Field(default_factory=RunOverrides)
    prompt_seed: int = Field(
        ge=0, description="the prompt-nonce seed every configuration of this run used"
    )
    unresolved_pins: list[str] = Field(
        default_factory=list, description="pins the run went without (--allow-unpinned)"
    )
    pins: list[Pin] = Field(
        default_factory=list,
        description="every image and model pin as applied, with where it came from (the "
        "experiment file, its pins lock, or unpinned); empty in runs that predate the lock",
    )
    pins_lock: str | None = Field(default=None, description="the pins lock the run read")
    experiment: Experiment


ConfigurationState = Literal["done", "skipped", "failed", "interrupted"]


class ConfigurationStatus(StrictModel):
    status: ConfigurationState
    valid: bool | None = None
    expected_invalid: bool = False
    payloads: list[str] = Field(default_factory=list, description="file names under payloads/")
    reasons: list[str] = Field(default_factory=list)


class RunStatus(StrictModel):
    """Per configuration: done, skipped (resumed), failed or interrupted, and why."""

    schema_: Literal["specbench.status/1"] = Field(default=STATUS_SCHEMA, alias="schema")
    run_id: str
    simulated: bool
    notes: list[str] = Field(default_factory=list)
    written_at: str
    configurations: dict[str, ConfigurationStatus]


class CheckpointBytes(StrictModel):
    """Byte counts read from a checkpoint's safetensors headers (no tensor data is loaded)."""

    path: str
    files: int
    fileBytes: int = Field(description="all weight files (*.safetensors) in bytes")
    decodeWeightBytes: int = Field(
        description="tensors a target decode step reads: all but the embedding table (only C "
        "rows are read), the vision encoder and the MTP head"
    )
    mtpHeadBytes: int = Field(description="tensors under mtp.* (0 when the checkpoint has none)")
    embeddingBytes: int
    visionBytes: int


class ModelBytes(CheckpointBytes):
    hf_id: str


class WeightsFile(StrictModel):
    """Each downloaded model's byte counts; the roofline prefers them to the estimates."""

    schema_: Literal["specbench.weights/1"] = Field(default=WEIGHTS_SCHEMA, alias="schema")
    created_at: str
    models: dict[str, ModelBytes]
