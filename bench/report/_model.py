"""The report's own view of a result set: one shape for a fresh artifacts folder and for the
seed's published figures, so every rule and template works on both.

A ``Figure`` may be fully measured (raw per-iteration samples), summarised (mean, stddev, n),
published as a bare mean, or unknown with only a bound implied by a published statement.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bench.core import StrictModel
from bench.schema import (
    AccuracyRecord,
    LaunchRecord,
    LogprobProbe,
    PlanRecord,
    ServerLogEvidence,
    SpeculationMode,
    SyntheticAcceptance,
)

SourceKind = Literal["artifacts", "reference"]


class Figure(StrictModel):
    """One figure of one run. ``mean`` is None when it is not known."""

    mean: float | None = None
    stddev: float | None = None
    n: int | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None
    samples: tuple[float, ...] = ()
    lower_bound: float | None = Field(default=None, description="strict bound implied by data")
    upper_bound: float | None = None
    spread_assumed: bool = Field(default=False, description="stddev is a stated bound, not data")

    @property
    def known(self) -> bool:
        return self.mean is not None


class Reason(StrictModel):
    code: str
    message: str
    severity: Literal["invalid", "warning"] = "invalid"
    evidence: tuple[str, ...] = ()


class TelemetryView(StrictModel):
    """A payload's GPU telemetry (bench.schema TelemetrySummary) as the report shows it."""

    source: str
    windows: int
    measured_s: float
    power_w: float | None = None
    gpu_power_w: tuple[float | None, ...] = ()
    energy_per_token_j: float | None = None
    sm_clock_min_mhz: int | None = None
    temperature_max_c: int | None = None
    throttle_reasons: tuple[str, ...] = ()


class Table(StrictModel):
    """A small key/value or column table (hardware, provenance)."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


class RequestOutput(StrictModel):
    """One measured request's greedy output, for the lossless check."""

    prompt_sha256: str
    output_sha256: str | None
    text: str
    token_chars: tuple[int, ...] = Field(
        default=(), description="characters of each content chunk, in stream order"
    )


class CategoryView(StrictModel):
    """One prompt category of a run (a prompt-set workload): its own windows' figures."""

    category: str
    prompts: int = 0
    decode: Figure = Figure()
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    #: the counters' draft tokens over the category's windows (0: nothing was proposed, so
    #: there is no rate; None: not read)
    draft_tokens: int | None = None
    request_rate: float | None = Field(
        default=None, description="acceptance from the engine's per-request counts"
    )
    request_source: str | None = None
    request_agrees: bool | None = Field(
        default=None, description="per-request counts agree with the counters (None: unchecked)"
    )
    request_check: str = ""


class RunView(StrictModel):
    """One configuration at one concurrency level (one payload, or one published row)."""

    key: str = Field(description="payload file stem or reference id")
    config: str
    engine: str
    method: str
    spec_tokens: int | None = None
    draft_model: str | None = None
    concurrency: int = 1
    valid: bool = True
    simulated: bool = False
    toy_model: bool = False
    attempt: str | None = Field(default=None, description="label of a superseded attempt")
    decode: Figure = Figure()
    ttft: Figure = Figure()
    aggregate: Figure = Figure()
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    accepted_per_position: tuple[int, ...] = Field(
        default=(), description="accepted draft tokens at each position (vLLM's counters)"
    )
    acceptance_source: str | None = None
    acceptance_raw: dict[str, Any] = Field(default_factory=dict)
    reasons: tuple[Reason, ...] = ()
    log_file: str | None = None
    log_evidence: tuple[str, ...] = ()
    payload_file: str | None = None
    served_model: str | None = None
    engine_version: str | None = None
    command: tuple[str, ...] = ()
    iterations: int | None = None
    warmup: int | None = None
    telemetry: TelemetryView | None = None
    telemetry_note: str | None = Field(default=None, description="why there is no telemetry")
    outputs: tuple[RequestOutput, ...] = Field(
        default=(), description="measured requests with a recorded prompt hash and output text"
    )
    server_log: ServerLogEvidence | None = Field(
        default=None, description="what the server log showed (load checks, graphs, acceptance)"
    )
    launch: LaunchRecord | None = Field(
        default=None, description="how the server was started, recorded when it ran"
    )
    probes: tuple[LogprobProbe, ...] = Field(
        default=(), description="greedy requests re-sent with logprobs after the timed ones"
    )
    probes_note: str | None = Field(default=None, description="what went wrong with the probes")
    categories: tuple[CategoryView, ...] = Field(
        default=(), description="per prompt category (a prompt-set workload); empty: synthetic"
    )
    prompt_set: str | None = Field(default=None, description="the prompt set's name@sha256[:12]")
    enable_thinking: bool | None = None
    # issue 48 (bench.report._extras fills them in from the payload)
    tensor_parallel: int | None = Field(default=None, description="GPUs the server ran on")
    speculation: SpeculationMode | None = Field(
        default=None, description="how the engine verified and sized its drafts"
    )
    synthetic: SyntheticAcceptance | None = Field(
        default=None, description="a SYNTHETIC ACCEPTANCE control's forced acceptance"
    )
    accuracy: AccuracyRecord | None = Field(default=None, description="the accuracy task")
    request_accept_lengths: tuple[float, ...] = Field(
        default=(),
        description="each measured request's own acceptance length, from the engine's "
        "per-request counts (1 + accepted / verify steps); empty: none sent",
    )

    @property
    def lossless_method(self) -> bool:
        """Its greedy output is meant to be the target's (no lossy verifier, no control)."""
        return self.speculation is None or self.speculation.lossless

    @property
    def fixed_depth(self) -> bool:
        return self.speculation is None or self.speculation.fixed_depth


class ConfigInfo(StrictModel):
    """What the experiment lock says about one configuration (all optional: tolerant read)."""

    name: str
    engine: str | None = None
    method: str | None = None
    spec_tokens: int | None = None
    draft_model: str | None = None
    flags: tuple[str, ...] = ()
    deviations: tuple[dict[str, Any], ...] = ()
    concurrency: tuple[int, ...] = ()
    admission_cap: int | None = Field(
        default=None, description="max live requests the server admits"
    )
    admission_source: str | None = Field(
        default=None, description="where the cap comes from: the engine's log line or a flag"
    )
    rationale: str | None = None
    expect_invalid: str | None = Field(
        default=None, description="why the experiment expects this configuration to be invalid"
    )
    notes: tuple[str, ...] = ()
    depth_of: str | None = Field(default=None, description="the depth sweep this point is of")
    depth_references: tuple[tuple[int, str], ...] = Field(
        default=(), description="published depths (k, source) the sweep is compared with"
    )
    patch_sha256: str | None = Field(
        default=None, description="the configuration runs a locally patched image: its patch"
    )
    image: str | None = Field(default=None, description="the image (key: ref) the lock names")
    target: str | None = Field(default=None, description="the target it serves (hf_id)")


class PublishedDelta(StrictModel):
    """A difference the source states without both values: ``metric(a) - metric(b) = delta``."""

    metric: Literal["decode", "ttft"]
    a: str
    b: str
    delta: float


class ConcurrencyFact(StrictModel):
    """A published statement about a configuration's load behaviour (reference sets only)."""

    config: str
    peak_concurrency: int | None = None
    scales_through: int | None = None
    admission_cap: int | None = None
    cause: str | None = None


class FileEntry(StrictModel):
    path: str
    sha256: str | None = None
    listed_sha256: str | None = None
    verdict: str


class Unreadable(StrictModel):
    """A payload the report could not read: listed, and counted by every summary."""

    path: str = Field(description="under the artifacts folder: payloads/<name>.json")
    reason: str
    config: str | None = Field(default=None, description="from its file name, if it names one")
    concurrency: int | None = None
    method: str | None = Field(
        default=None, description="the configuration's method, as the run's lock states it"
    )


class NotMeasured(StrictModel):
    """A configuration of the run's lock that left no usable payload (report._not_measured)."""

    config: str
    engine: str | None = None
    method: str | None = None
    state: str = Field(description="status.json's: failed, interrupted, skipped; or 'not run'")
    reasons: tuple[str, ...] = ()


class CommandBlock(StrictModel):
    title: str
    argv: tuple[str, ...] = ()
    text: str | None = None


class RooflineRow(StrictModel):
    key: str
    config: str
    engine: str
    method: str
    concurrency: int
    measured: float | None = None
    tokens_per_step: float | None = None
    tokens_per_step_source: str = ""
    gb_per_step: float | None = None  # all ranks, 10^9 bytes
    ceiling: float | None = None
    fraction: float | None = None
    above: bool = False
    unknown: str | None = None


class ByteSource(StrictModel):
    what: str
    value: int | None
    source: str


class RooflineSection(StrictModel):
    bandwidth_gbs: float | None = None
    bandwidth_source: str = "unknown"
    cards: int | None = None
    context_tokens: float | None = None
    factor: float = 1.15  # bench.machine.ABOVE_CEILING_FACTOR (lmx's rule)
    inputs: tuple[ByteSource, ...] = ()
    rows: tuple[RooflineRow, ...] = ()
    missing: tuple[str, ...] = ()


class SuiteView(StrictModel):
    """The SGLang suite record (tests/contract/test_sglang_upstream_suite.py), read
    tolerantly: what ran and passed on the patched release, and what of it came upstream."""

    file: str
    upstream_version: str | None = None
    patch_sha256: str | None = None
    passed: int | None = None
    failed: int | None = None
    needs_gpu: int | None = None
    upstream_passed: int | None = None
    specbench_passed: int | None = None
    scanned_test_files: int | None = Field(
        default=None, description="test files of the published artifacts that were scanned"
    )
    selected_files: int | None = Field(
        default=None, description="of those, files that exercise the patched path"
    )
    sdist: str | None = Field(default=None, description="the release's sdist, if one exists")
    passed_tests: tuple[str, ...] = ()
    reproduce: str | None = None


class RunSet(StrictModel):
    """Everything the report needs, read from one source."""

    source_kind: SourceKind
    source: str
    title: str
    experiment: str | None = Field(default=None, description="the locked experiment's name")
    hf_id: str | None = None
    model_revision: str | None = None
    quantization: str | None = None
    hardware_lines: tuple[str, ...] = ()
    provenance_lines: tuple[str, ...] = ()
    source_sha: str | None = Field(default=None, description="the git SHA provenance names")
    source_dirty: bool | None = Field(
        default=None, description="the tree had changes beyond that SHA (None: unknown)"
    )
    source_via: str | None = Field(default=None, description="how the SHA is known, if not git")
    workload: dict[str, Any] = Field(default_factory=dict)
    measured_workload: dict[str, Any] = Field(
        default_factory=dict,
        description="what every payload measured, field by field (bench.schema workload_of): "
        "compare holds it equal across hosts",
    )
    configs: tuple[ConfigInfo, ...] = ()
    runs: tuple[RunView, ...] = ()
    published_deltas: tuple[PublishedDelta, ...] = ()
    concurrency_facts: tuple[ConcurrencyFact, ...] = ()
    files: tuple[FileEntry, ...] = ()
    commands: tuple[CommandBlock, ...] = ()
    commands_source: str = ""
    assumptions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    machine_tables: tuple[Table, ...] = ()
    roofline: RooflineSection | None = None
    upstream_suite: SuiteView | None = Field(
        default=None, description="upstream/sglang-suite.json, when the artifacts carry it"
    )
    emulator_time_scale: float | None = Field(
        default=None, description="the matrix's --time-scale override of the emulator, if any"
    )
    unreadable: tuple[Unreadable, ...] = Field(
        default=(),
        description="payloads that could not be read or used (contradicted by their own "
        "evidence or by SHA256SUMS): listed, never left unsaid, used for no figure",
    )
    unvouched: tuple[str, ...] = Field(
        default=(), description="files SHA256SUMS does not list, or its absence (report._trust)"
    )
    run_ids: tuple[str, ...] = Field(
        default=(), description="the run's id (its lock's, else those its payloads carry)"
    )
    unpinned: tuple[str, ...] = Field(
        default=(),
        description="pins a real run went without (--allow-unpinned): the report says so and "
        "publish refuses it",
    )
    plan: PlanRecord | None = Field(
        default=None, description="plan.json: plan's wall-time estimate of each configuration"
    )
    not_measured: tuple[NotMeasured, ...] = Field(
        default=(),
        description="configurations of the lock with no usable payload, and why (status.json)",
    )

    @property
    def simulated(self) -> bool:
        return any(r.simulated for r in self.runs)

    @property
    def toy_model(self) -> bool:
        return any(r.toy_model for r in self.runs)

    def config_info(self, name: str) -> ConfigInfo | None:
        return next((c for c in self.configs if c.name == name), None)
