"""Benchmark payloads: the lmx-compatible fields plus specbench's evidence block.

One payload describes one engine configuration at one concurrency level. The lmx names are kept
in camelCase so a payload can be handed to lmx tooling unchanged; everything lmx does not know
lives under ``evidence``. ``PAYLOAD_SCHEMA`` changes whenever a field changes meaning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import Field, field_validator, model_validator

from bench.core import (
    MAX_TOKENS,
    Concurrency,
    EngineName,
    IterationCount,
    MutableModel,
    NonNegativeFloat,
    NonNegativeInt,
    OutputTokens,
    PromptTokens,
    SpecMethod,
    StrictModel,
    Summary,
    WarmupCount,
    canonical_spec_method,
    read_json_model,
    write_text,
)
from bench.schema._hardware import Hardware
from bench.schema._speculation import AccuracyRecord, SpeculationMode, SyntheticAcceptance
from bench.schema._telemetry import TelemetrySummary

PAYLOAD_SCHEMA: Final = "specbench.payload/1"


def _absent(value: object) -> bool:
    """Fields added after payload/1 was first written are left out while unset, so a payload
    without them reads and writes back byte for byte as before."""
    return value is None or value == []


class SampleStats(StrictModel):
    """lmx's ``sampleStats`` block (over the per-iteration ``samples``)."""

    min: NonNegativeFloat
    p50: NonNegativeFloat
    mean: NonNegativeFloat
    max: NonNegativeFloat
    stddev: NonNegativeFloat


class EngineFlags(StrictModel):
    """lmx's ``engineFlags``. Spec counters are deltas over the measured iterations only."""

    specDecoding: bool
    specMethod: SpecMethod
    specModel: str | None = None
    specNumTokens: int | None = Field(default=None, ge=1)
    specDraftTokens: int | None = Field(default=None, ge=0)
    specAcceptedTokens: int | None = Field(default=None, ge=0)
    specAcceptanceRate: float | None = Field(default=None, ge=0, le=1)
    specMeanAcceptedLength: float | None = Field(default=None, ge=0)
    tensorParallel: int = Field(ge=1)
    concurrency: Concurrency
    temperature: float = Field(ge=0)
    prefixCaching: bool | None = None
    gpuMemUtil: float | None = Field(default=None, gt=0, le=1)
    commandSnippet: str | None = None

    @field_validator("specMethod", mode="before")
    @classmethod
    def _canon(cls, v: object) -> object:
        return canonical_spec_method(v)

    @model_validator(mode="after")
    def _consistent(self) -> EngineFlags:
        if self.specDecoding != (self.specMethod != "NONE"):
            raise ValueError("specDecoding must be true exactly when specMethod is not NONE")
        if self.specDecoding and self.specNumTokens is None:
            raise ValueError("specNumTokens is required when specDecoding is true")
        return self


class RequestSpecTokens(StrictModel):
    """One request's speculative counts as the engine reported them in its response.

    SGLang 0.5.19 (request ``return_spec_tokens_details: true``): the stream's ``sglext``
    chunk, ``sglext.spec_tokens_details`` (srt/entrypoints/openai/protocol.py:418-443
    ``SpecTokensDetails``; filled in srt/managers/tokenizer_manager.py:2796-2853:
    proposed = verify_ct x (speculative_num_draft_tokens - 1), accept_length =
    completion_tokens / verify_ct). vLLM 0.33.0 (server flag
    ``--per-request-spec-decode-metrics summary``): the usage chunk's
    ``metrics.speculative_decoding`` (entrypoints/generate/base/protocol.py:100-119)."""

    source: Literal["sglang sglext.spec_tokens_details", "vllm metrics.speculative_decoding"]
    verify_steps: NonNegativeInt = Field(description="spec_verify_ct / num_spec_steps")
    accepted_tokens: NonNegativeInt = Field(
        description="spec_num_correct_drafts / num_accepted_draft_tokens"
    )
    draft_tokens: NonNegativeInt = Field(description="spec_num_proposed_drafts / num_draft_tokens")
    acceptance_rate: NonNegativeFloat | None = Field(
        default=None, description="as the engine sent it (spec_accept_rate / draft_acceptance_rate)"
    )
    accept_length: NonNegativeFloat | None = Field(
        default=None, description="spec_accept_length / mean_acceptance_length, as sent"
    )
    histogram: list[NonNegativeInt] = Field(
        default_factory=list,
        description="verify steps that accepted exactly j draft tokens, j = 0..k",
    )


class RequestRecord(MutableModel):
    """One streamed request as the client saw it. ``sent_at`` is the client's monotonic clock
    (``time.perf_counter``) at send; every other time is seconds relative to it.
    ``chunk_times`` holds every SSE chunk's arrival (role-only and usage chunks included) and
    ``chunk_chars`` the content/reasoning characters it carried (0 = not a token chunk).
    Times after the send are >= 0 and the chunks' arrivals never go backwards."""

    request_id: str
    stream_index: NonNegativeInt = 0
    sent_at: float
    first_token_at: NonNegativeFloat | None = None
    last_token_at: NonNegativeFloat | None = None
    ended_at: NonNegativeFloat | None = None
    ttft_ms: NonNegativeFloat | None = None
    decode_tok_s: NonNegativeFloat | None = None
    e2e_ms: NonNegativeFloat | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    finish_reason: str | None = None
    chunk_times: list[NonNegativeFloat] = Field(default_factory=list)
    chunk_chars: list[NonNegativeInt] = Field(default_factory=list)
    output_sha256: str | None = None
    output_text: str | None = Field(
        default=None, description="the streamed content + reasoning text, for the lossless check"
    )
    prompt_sha256: str | None = Field(
        default=None, description="sha256 of this request's whole prompt, nonce included"
    )
    http_status: int | None = None
    error: str | None = None
    reasons: list[str] = Field(default_factory=list)
    category: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="the prompt set's category of this request's prompt",
    )
    spec_tokens: RequestSpecTokens | None = Field(
        default=None,
        exclude_if=_absent,
        description="the engine's own per-request speculative counts, when it sent them",
    )

    @field_validator("chunk_times")
    @classmethod
    def _arrivals_in_order(cls, v: list[float]) -> list[float]:
        for k in range(1, len(v)):
            if v[k] < v[k - 1]:
                raise ValueError(
                    f"chunk {k} arrived at {v[k]!r} s, before chunk {k - 1} ({v[k - 1]!r} s): "
                    "arrival times never go backwards"
                )
        return v

    @model_validator(mode="after")
    def _token_times_in_order(self) -> RequestRecord:
        first, last = self.first_token_at, self.last_token_at
        if first is not None and last is not None and last < first:
            raise ValueError(f"last_token_at ({last!r} s) is before first_token_at ({first!r} s)")
        return self

    @property
    def valid(self) -> bool:
        return self.error is None and not self.reasons


class MetricSnapshot(StrictModel):
    """Raw counter values scraped from the engine, keyed by the engine's own metric names."""

    at: float
    values: dict[str, float]


class AcceptanceDelta(StrictModel):
    """Speculative counters over one window, with one definition for both engines:
    acceptance_rate = accepted / draft_tokens; mean_acceptance_length = 1 + accepted / drafts."""

    drafts: int = Field(ge=0)
    draft_tokens: int = Field(ge=0)
    accepted_tokens: int = Field(ge=0)
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    accepted_per_position: list[int] = Field(default_factory=list)
    source: str = Field(description="where the counters came from, e.g. 'vllm /metrics'")
    before: MetricSnapshot | None = None
    after: MetricSnapshot | None = None


class IterationRecord(MutableModel):
    """One warmup or measured iteration: C concurrent requests started together."""

    index: NonNegativeInt
    warmup: bool
    window_start: float
    window_end: float
    requests: list[RequestRecord]
    per_stream_mean_tok_s: NonNegativeFloat | None = None
    aggregate_tok_s: NonNegativeFloat | None = Field(
        default=None, description="total completion tokens / (last token - first send)"
    )
    acceptance: AcceptanceDelta | None = None
    category: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="the prompt set's category this iteration's prompts are of",
    )
    server_ttft_ms: float | None = Field(
        default=None,
        description="the server's own mean TTFT over this window (its TTFT histogram's deltas)",
    )
    reasons: list[str] = Field(default_factory=list)
    discarded: list[str] = Field(
        default_factory=list,
        exclude_if=_absent,
        description="why each earlier attempt of this iteration was discarded (its streams "
        "arrived merged); when any, the recorded attempt's prompts are from outside the "
        "seeded sequence and pair with no other configuration's",
    )

    @property
    def valid(self) -> bool:
        return not self.reasons and all(r.valid for r in self.requests)


class Figures(StrictModel):
    """Summary statistics over the measured iterations, one entry per figure."""

    decode_tok_s: Summary | None = Field(
        description="per-stream decode tok/s, mean over streams per iteration"
    )
    ttft_ms: Summary | None
    e2e_ms: Summary | None
    aggregate_tok_s: Summary | None = Field(
        description="total output tokens / window, per iteration"
    )
    # None only when no measured iteration was valid (the payload's validity then says invalid).


class ValidityReason(StrictModel):
    """Why a run is invalid (or, with ``severity='warning'``, what a reader should know)."""

    code: str
    message: str
    severity: Literal["invalid", "warning"] = "invalid"
    evidence: list[str] = Field(default_factory=list)


class Validity(StrictModel):
    valid: bool
    reasons: list[ValidityReason] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Validity:
        invalid = any(r.severity == "invalid" for r in self.reasons)
        if self.valid == invalid:
            raise ValueError("valid must be false exactly when an 'invalid' reason is present")
        return self

    @classmethod
    def from_reasons(cls, reasons: list[ValidityReason]) -> Validity:
        """Invalid exactly when one reason is of severity 'invalid'."""
        return cls(valid=not any(r.severity == "invalid" for r in reasons), reasons=reasons)


class Workload(StrictModel):
    prompt_tokens: PromptTokens
    max_tokens: OutputTokens
    concurrency: Concurrency
    warmup: WarmupCount
    iterations: IterationCount
    temperature: NonNegativeFloat = 0.0
    ignore_eos: bool = True
    tokenizer: str | None = Field(default=None, description="tokenizer used to size prompts")
    prompt_seed: int | None = Field(
        default=None,
        description="seed of the prompt nonces: runs with the same seed and concurrency send the "
        "same prompts in the same order (None: fresh randomness)",
    )
    allow_prompt_mismatch: bool = Field(
        default=False,
        description="run with --allow-prompt-mismatch: a server prompt count other than "
        "prompt_tokens is a warning, not an invalid run",
    )
    prompt_set: PromptSetRecord | None = Field(
        default=None,
        exclude_if=_absent,
        description="the prompt set the prompts came from (None: the exact-length synthetic "
        "prompts; prompt_tokens is then their exact length, else the mean server count)",
    )
    sampling: SamplingRecord | None = Field(
        default=None,
        exclude_if=_absent,
        description="the sampling settings every measured request carried",
    )
    chat_template: ChatTemplateRecord | None = Field(
        default=None,
        exclude_if=_absent,
        description="the chat template the engine applied, as far as known",
    )


class SamplingRecord(StrictModel):
    """What every measured request asked for, verbatim from the request body."""

    temperature: NonNegativeFloat
    top_p: float | None = Field(default=None, description="None: not sent (engine default)")
    top_k: int | None = Field(default=None, description="None: not sent (engine default)")
    max_tokens: OutputTokens
    ignore_eos: bool


class ChatTemplateRecord(StrictModel):
    """The chat template of the requests: ``/v1/chat/completions`` applies the served model's
    template. Neither pinned engine reports the template over HTTP; what is known is recorded:
    the ``chat_template_kwargs`` sent, and the template's sha256 where the runner had the
    model's tokenizer files (``tokenizer_config.json`` chat_template or chat_template.jinja)."""

    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="the request's chat_template_kwargs ({}: none sent)"
    )
    enable_thinking: bool | None = Field(
        default=None, description="as sent in chat_template_kwargs; None: the template default"
    )
    sha256: str | None = Field(default=None, description="sha256 of the template text, if read")
    source: str = Field(description="where the template (or what is known of it) came from")


class PromptSetRecord(StrictModel):
    """A prompt set as the runner read it."""

    name: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    source: str = Field(description="the local file, or the dataset id@revision")
    prompts: dict[str, NonNegativeInt] = Field(description="prompts per category")


class CategoryRequestAcceptance(StrictModel):
    """The engine's per-request counts summed over one category window, and whether they
    agree with the /metrics counter deltas of the same window."""

    source: str
    requests: NonNegativeInt
    verify_steps: NonNegativeInt
    draft_tokens: NonNegativeInt
    accepted_tokens: NonNegativeInt
    acceptance_rate: NonNegativeFloat | None = None
    agrees_with_counters: bool | None = Field(
        default=None, description="None: no counter delta to compare with"
    )
    check: str = Field(default="", description="what was compared, and the figures")


class CategoryWindow(StrictModel):
    """One category of a prompt set, measured as its own windows (warmup, then iterations,
    each scraped before and after): its figures and its acceptance."""

    category: str
    prompts: NonNegativeInt
    iterations: list[NonNegativeInt] = Field(description="its measured iterations' indices")
    valid_iterations: NonNegativeInt
    decode_tok_s: Summary | None = None
    aggregate_tok_s: Summary | None = None
    ttft_ms: Summary | None = None
    prompt_tokens_mean: NonNegativeFloat | None = None
    acceptance: AcceptanceDelta | None = None
    request_acceptance: CategoryRequestAcceptance | None = None


class RunInfo(StrictModel):
    specbench_version: str
    started_at: str
    finished_at: str
    base_url: str
    served_model: str
    command: list[str] = Field(default_factory=list, description="argv that produced the payload")
    run_id: str | None = None
    config_name: str | None = None
    simulated: bool = False
    toy_model: bool = Field(
        default=False, description="a real engine on a generated tiny model: never publishable"
    )


class GraphEvidence(StrictModel):
    """CUDA graphs in the server's own log: captured at start, used in the measured windows."""

    needed: str | None = Field(
        description="the captured phase this configuration needs (e.g. 'target verify'); "
        "null: any capture line"
    )
    captured: list[str] = Field(default_factory=list, description="capture lines at start")
    disabled: list[str] = Field(default_factory=list, description="graphs-off lines")
    use_lines: int = Field(ge=0, description="graph-state lines logged in the measured windows")
    used: int = Field(ge=0, description="of those, steps that ran on a graph")
    eager: list[str] = Field(default_factory=list, description="examples of eager-step lines")
    use_unobservable: str | None = Field(
        default=None, description="why no graph-state line could be seen, when none was"
    )

    @property
    def active(self) -> bool:
        return bool(self.captured) and self.used > 0


class CpuKernel(StrictModel):
    """Which kernel build a CPU engine ran, as its server logged it at start (the engine tier's
    vLLM CPU image: ``specbench-vllm-cpu: kernel build _C_AVX2 (AVX2); cpu flags: ...``,
    printed by docker/vllm-cpu/vllm-serve-shim.py after vLLM's own dispatch loaded it)."""

    library: str = Field(
        description="the kernel library mapped into the server (_C, _C_AVX512, _C_AVX2)"
    )
    isa: str = Field(description="the instruction set that library was built for")
    cpu_flags: list[str] = Field(
        default_factory=list, description="the CPU's ISA flags as the server read them"
    )


class TensorParallelEvidence(StrictModel):
    """The tensor-parallel size the engine ran at, as its own start-up record says (vLLM's
    engine-config line, SGLang's ``server_args`` line); ``None`` when the log stated none."""

    size: int | None = Field(
        default=None, ge=1, description="the engine's own tensor_parallel_size"
    )
    configured: int = Field(ge=1, description="what the experiment asked for")
    line: str | None = Field(default=None, description="the log excerpt the size was read from")


class ServerLogEvidence(StrictModel):
    """Positive evidence from the server log, kept for every payload (not only bad news)."""

    load_checks: list[str] = Field(
        default_factory=list, description="codes of the load-log rules that were checked"
    )
    load_failures: int = Field(ge=0, description="load-log lines that matched an 'invalid' rule")
    graphs: GraphEvidence | None = None
    accept_lengths: list[float] = Field(
        default_factory=list,
        description="the engine's own acceptance length per log window inside the measured "
        "windows (SGLang decode lines, vLLM SpecDecoding lines)",
    )
    cpu_kernel: CpuKernel | None = Field(
        default=None, description="the kernel build a CPU engine ran (None on GPUs)"
    )
    tensor_parallel: TensorParallelEvidence | None = None
    resolved: dict[str, str] = Field(
        default_factory=dict,
        description="what the engine itself resolved at start, from its own log "
        "(attention_backend, decode_graphs, prefill_graphs); a setting no line stated is "
        "absent, never guessed",
    )


class AdmissionCap(StrictModel):
    """The live-request cap the server enforced, as found when it ran."""

    cap: int = Field(ge=1)
    source: str = Field(
        description="'engine log: <the line>' (the engine stated the cap it resolved) or "
        "'flag <name>' (the configuration's flag; the log stated none)"
    )


class EngineInstall(StrictModel):
    """The engine package a local-process launcher ran (no image): where Python found it, and
    each file that differs from the wheel's own RECORD (a patch applied on the host shows here
    by name; a file left out of the install, as the device carries do, is listed as missing)."""

    package: str
    version: str
    location: str = Field(description="the sys.path entry the package was found in")
    record_files: NonNegativeInt = Field(description="files the wheel's RECORD lists with a hash")
    modified: list[str] = Field(
        default_factory=list, description="files whose sha256 differs from the wheel's RECORD"
    )
    missing: list[str] = Field(default_factory=list, description="RECORD files not present")


class ModelFiles(StrictModel):
    """One model folder as the server read it: every file's sha256, hashed on the host that ran
    the server. Two payloads served the same weights when ``weights_sha256`` agrees."""

    role: Literal["target", "draft"]
    key: str = Field(description="key in the experiment's 'models'")
    hf_id: str
    path: str
    files: dict[str, str] = Field(description="file name -> sha256")
    weights_sha256: str = Field(
        description="sha256 of the sorted '<sha256>  <name>' lines of the weight files"
    )
    tensors_sha256: str | None = Field(
        default=None,
        description="sha256 over the sorted per-tensor digests (dtype, shape, bytes; not the "
        "names) of its safetensors files: equal for the same tensors in another layout",
    )
    tokenizer_sha256: str | None = Field(
        default=None, description="tokenizer.json's sha256 (None: the folder has none)"
    )


class ServedModels(StrictModel):
    """What the configuration's server loaded: its target and, with one, its draft."""

    target: ModelFiles
    draft: ModelFiles | None = None


class LaunchRecord(StrictModel):
    """How the matrix started this payload's server, recorded when it ran: the report shows
    these and never rebuilds them with the code of the day it renders."""

    launcher: Literal["docker", "process"]
    image: str | None = Field(default=None, description="the image the container ran")
    server_argv: list[str] = Field(
        description="the engine's server argv this configuration stands for (what ran in the "
        "container on real hardware; on the emulator, what the emulator stood in for)"
    )
    argv: list[str] = Field(
        description="the argv that was started: container entrypoint + command, or the process"
    )
    docker_run: str | None = Field(
        default=None, description="the equivalent docker run line (docker launcher only)"
    )
    admission: AdmissionCap | None = None
    engine_install: EngineInstall | None = Field(
        default=None,
        exclude_if=_absent,
        description="the engine package a local process ran (no image)",
    )
    env: dict[str, str] | None = Field(
        default=None,
        exclude_if=_absent,
        description="settings the server was started with by value (a SYNTHETIC ACCEPTANCE "
        "control's engine knob); never a secret",
    )


class TopLogprob(StrictModel):
    """One candidate token at one position: OpenAI chat ``top_logprobs[]`` (vLLM 0.33.0
    chat_completion/protocol.py:96-99 ``ChatCompletionLogProb``; SGLang 0.5.19
    srt/entrypoints/openai/protocol.py:147-157 ``TopLogprob``)."""

    token: str
    logprob: float


class TokenLogprobs(StrictModel):
    """One generated token with the engine's top candidates at its position (OpenAI chat
    ``choices[].logprobs.content[]``; vLLM chat_completion/protocol.py:102-110). ``top`` is kept
    in the order the engine sent it: vLLM puts the sampled token first (v1/engine/logprobs.py:
    "Sampler puts the sampled logprob in first"), so readers sort it by logprob."""

    token: str
    logprob: float
    top: list[TopLogprob] = Field(default_factory=list)


class LogprobProbe(StrictModel):
    """One greedy request sent again after the measured iterations, with logprobs: the
    evidence the lossless check needs to tell a numeric near-tie from a real divergence."""

    prompt_sha256: str = Field(description="sha256 of the whole prompt, as the measured request")
    output_sha256: str | None = Field(description="sha256 of the streamed text, as measured")
    tokens: list[TokenLogprobs] = Field(
        default_factory=list, description="one entry per generated token, in stream order"
    )
    error: str | None = Field(default=None, description="why the probe gave no usable answer")


class LogprobProbes(StrictModel):
    """The logprob probes of one payload, sent after its timed iterations (never inside them:
    logprobs cost time). They re-send the measured prompts in order (up to a cap), so probes of
    runs with the same prompt seed pair up by prompt hash."""

    top_logprobs: int = Field(ge=1, description="the request's top_logprobs")
    requests: list[LogprobProbe] = Field(default_factory=list)
    note: str | None = Field(
        default=None, description="what went wrong for the probes as a whole, if anything"
    )


class Evidence(StrictModel):
    """Everything lmx does not know: raw records, acceptance, figures, verdict."""

    run: RunInfo
    workload: Workload
    figures: Figures
    iterations: list[IterationRecord]
    acceptance: AcceptanceDelta | None = None
    acceptance_raw: dict[str, Any] = Field(
        default_factory=dict, description="engine-specific raw figures, kept verbatim"
    )
    validity: Validity
    telemetry: TelemetrySummary | dict[str, Any] | None = Field(
        default=None, description="GPU telemetry of the measured windows (bench.machine sampler)"
    )
    warnings: list[str] = Field(default_factory=list)
    server_log: ServerLogEvidence | None = Field(
        default=None, description="what the server log showed (matrix runs only)"
    )
    launch: LaunchRecord | None = Field(
        default=None, description="how the server was started (matrix runs only)"
    )
    logprob_probes: LogprobProbes | None = Field(
        default=None, description="greedy requests re-sent with logprobs after the timed ones"
    )
    served: ServedModels | None = Field(
        default=None,
        exclude_if=_absent,
        description="the model files the server read, hashed (matrix runs only)",
    )
    categories: list[CategoryWindow] = Field(
        default_factory=list,
        exclude_if=_absent,
        description="per category of a prompt set (empty: synthetic)",
    )
    speculation: SpeculationMode | None = Field(
        default=None,
        exclude_if=_absent,
        description="how the engine verified and sized its drafts (matrix runs only)",
    )
    synthetic: SyntheticAcceptance | None = Field(
        default=None,
        exclude_if=_absent,
        description="a SYNTHETIC ACCEPTANCE control: the acceptance its engine was told to force",
    )
    accuracy: AccuracyRecord | None = Field(
        default=None,
        exclude_if=_absent,
        description="the accuracy task answered after the timed levels (its lowest level only)",
    )


class Payload(StrictModel):
    """One configuration at one concurrency level. ``tokSOut``/``ttftMs`` are the arithmetic
    means over measured iterations (the seed report's headline), with the spread alongside."""

    schemaVersion: Literal["specbench.payload/1"] = PAYLOAD_SCHEMA
    simulated: bool = Field(
        description="true when produced against the emulator: never publishable"
    )
    hfId: str
    modelRevision: str | None = None
    hardware: Hardware
    engineName: EngineName
    engineVersion: str | None = None
    backend: str = "cuda"
    quantization: str
    tokSOut: float = Field(ge=0)
    ttftMs: float = Field(ge=0)
    tokSTotal: NonNegativeFloat | None = None
    promptTokens: PromptTokens
    outputTokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)]
    samples: list[NonNegativeFloat]
    sampleStats: SampleStats
    promptSha256: str
    outputSha256: str
    engineFlags: EngineFlags
    notes: str | None = None
    evidence: Evidence

    @model_validator(mode="after")
    def _simulated_is_labelled(self) -> Payload:
        if self.simulated != self.evidence.run.simulated:
            raise ValueError("simulated and evidence.run.simulated disagree")
        return self


def payload_json_schema() -> dict[str, Any]:
    return Payload.model_json_schema()


def write_payload(path: Path, payload: Payload, *, root: Path | None = None) -> None:
    write_text(path, payload.model_dump_json(indent=2) + "\n", root=root)


def read_payload(path: Path) -> Payload:
    """Read and validate a payload; an InputError names the file and the field at fault."""
    return read_json_model(path, Payload)
