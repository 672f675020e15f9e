"""The emulator's known schedule: a pydantic profile loaded from YAML.

A profile fixes everything the emulator does in time: how long "loading" takes, the prefill
time ``a + b * prompt_tokens``, the decode step time as a function of the running batch size,
the speculative tokens per step and their per-position acceptance probabilities, the admission
cap, and which failure modes are on. ``time_scale`` multiplies every duration so tests and the
demo run fast; the figures a profile yields are SIMULATED, shaped after the seed report.
"""

from __future__ import annotations

import bisect
import re
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bench.core import InputError, TimeScale, exists, parse_yaml, read_text

PROFILE_DIR = "profiles"


class _Strict(BaseModel):
    # Own copy of the strict base: the emulator imports nothing from bench outside itself,
    # so the slim container needs only pydantic, aiohttp and pyyaml.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FailMode(StrEnum):
    """Failure modes, each switchable by ``--fail`` or the profile's ``failures.modes``."""

    NEVER_READY = "never_ready"  # health never turns 200
    CRASH_AT_START = "crash_at_start"  # load lines, an error, exit with failures.exit_code
    # as crash_at_start, with the engine's own fatal line and the traceback that follows it
    CUDA_OOM_AT_START = "cuda_oom_at_start"  # load lines, torch's CUDA out of memory
    WEIGHTS_MISSING = "weights_missing"  # the loader finds no weights where it looks
    EXIT_MID_RUN = "exit_mid_run"  # process exits once failures.after_tokens were written
    ZERO_ACCEPTANCE = "zero_acceptance"  # broken draft: nothing accepted (+ SGLang warnings)
    DISCONNECT = "disconnect"  # stream cut after failures.after_tokens tokens
    MALFORMED_CHUNK = "malformed_chunk"  # one truncated JSON event after after_tokens
    HTTP_5XX = "http_5xx"  # every failures.every_n_requests-th request gets a 500
    HTTP_429 = "http_429"  # every failures.every_n_requests-th request: 429, Retry-After: 0
    METRICS_GARBAGE = "metrics_garbage"  # every failures.every_n_scrapes-th /metrics: an HTML page
    ENGINE_RESTART = "engine_restart"  # counters start again from zero at scrape every_n_scrapes
    MISSING_USAGE = "missing_usage"  # no usage event although include_usage was asked
    EARLY_EOS = "early_eos"  # stops with "stop" at early_eos_fraction of max_tokens
    PROMPT_DRIFT = "prompt_drift"  # usage.prompt_tokens off by prompt_drift
    EAGER_FALLBACK = "eager_fallback"  # no CUDA graph captured: eager steps, eager_slowdown x
    GRAPHS_UNUSED = "graphs_unused"  # graphs captured at start, yet every step runs eager
    # speculative servers only (bench.emulator.logprobs): what the lossless check must judge
    NEAR_TIE_FLIP = "near_tie_flip"  # picks the runner-up at a bf16 near-tie past after_tokens
    LOSSY_DRAFT = "lossy_draft"  # broken draft: unverified tokens from after_tokens on


class FailureSettings(_Strict):
    modes: tuple[FailMode, ...] = ()
    exit_code: int = Field(default=1, ge=1, le=255)
    after_tokens: int = Field(default=64, ge=1)
    every_n_requests: int = Field(default=1, ge=1)
    #: /metrics scrapes: the measurement scrapes before and after each measured iteration, so
    #: an even number falls on an "after" (a restart inside a measured window)
    every_n_scrapes: int = Field(default=2, ge=1)
    early_eos_fraction: float = Field(default=0.5, gt=0.0, lt=1.0)
    prompt_drift: int = 3


class CategoryAcceptance(_Strict):
    """A prompt category with a known acceptance: a request whose last user message matches
    ``pattern`` (``re.search``) accepts exactly ``accepted`` draft tokens at every verify step
    (capped at the depth), so its acceptance rate is ``accepted / k`` by construction. The
    oracle of the per-category tests; real drafters differ by text, this one by rule."""

    name: str = Field(min_length=1)
    pattern: str = Field(min_length=1)
    accepted: int = Field(ge=0, le=16)

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as err:
            raise ValueError(f"not a regular expression: {err}") from None
        return v


class SpecSettings(_Strict):
    method: Literal["dflash", "mtp"]
    #: the method name as the server was told (vLLM logs a deprecation for MTP aliases)
    method_flag: str
    num_speculative_tokens: int = Field(ge=1, le=16)
    #: conditional probability that draft position i is accepted given 0..i-1 were
    acceptance: tuple[float, ...]
    draft_model_type: str = "DFlash2DraftModel"
    #: decode step cost of one more draft position (ms, unscaled); what a depth sweep trades
    #: against the extra accepted tokens
    draft_token_ms: float = Field(default=0.0, ge=0.0)
    #: factor by which the conditional acceptance decays at positions past the profile's list
    acceptance_decay: float = Field(default=0.9, gt=0.0, le=1.0)
    #: prompt categories with a fixed acceptance each (first match wins; others are sampled)
    categories: tuple[CategoryAcceptance, ...] = ()

    def category_of(self, text: str) -> CategoryAcceptance | None:
        """The first category whose pattern matches ``text``, if any."""
        return next((c for c in self.categories if re.search(c.pattern, text)), None)

    @field_validator("acceptance")
    @classmethod
    def _probabilities(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0.0 <= p <= 1.0 for p in v):
            raise ValueError("each acceptance probability must lie in [0, 1]")
        return v

    def at_depth(self, k: int) -> tuple[SpecSettings, float]:
        """The settings at ``k`` draft tokens and the change of the step time (ms): positions
        past the profile's list extrapolate the last probability by ``acceptance_decay``."""
        probs = list(self.acceptance[:k])
        while len(probs) < k:
            probs.append((probs[-1] if probs else 0.5) * self.acceptance_decay)
        delta_ms = (k - self.num_speculative_tokens) * self.draft_token_ms
        return self.model_copy(
            update={"num_speculative_tokens": k, "acceptance": tuple(probs)}
        ), delta_ms

    def expected_accepted(self) -> float:
        """Mean accepted draft tokens per step (tokens per step = 1 + this)."""
        total, run = 0.0, 1.0
        for p in self.acceptance:
            run *= p
            total += run
        return total


class Verification(_Strict):
    """How the emulated engine verifies and sizes its drafts, as the real one was told (issue
    48): vLLM's ``--speculative-config`` keys (``rejection_sample_method``: synthetic forces
    ``synthetic_rates``, fly accepts loosely and is lossy; ``num_speculative_tokens_per_batch_size``
    sets k per batch size), SGLang's ``SGLANG_SIMULATE_ACC_LEN`` (match-expected: each step
    accepts floor or ceil of the length, weighted to match it) and ``--speculative-adaptive``
    (here: a request drafts one more token than it last accepted). SIMULATED rules, shaped
    after the engines' own."""

    method: Literal["standard", "synthetic", "block", "fly"] = "standard"
    #: vLLM synthetic: unconditional per-position rates (P(first i+1 drafts all accepted))
    synthetic_rates: tuple[float, ...] = ()
    #: SGLang SGLANG_SIMULATE_ACC_LEN (accepted drafts + bonus token per step)
    simulate_acc_len: float | None = Field(default=None, ge=1.0)
    #: vLLM num_speculative_tokens_per_batch_size: (first batch size, last, k)
    per_batch_k: tuple[tuple[int, int, int], ...] = ()
    #: SGLang --speculative-adaptive
    adaptive: bool = False
    #: vLLM: the --speculative-config as given (logged in the "non-default args" line)
    spec_config: dict[str, object] | None = None

    @property
    def lossy(self) -> bool:
        """Its accepted tokens are not all the target's (FLy, or forced acceptance)."""
        return self.method in ("fly", "synthetic") or self.simulate_acc_len is not None

    def depth(self, k: int, batch: int, last_accepted: int | None) -> int:
        """Draft tokens this step, for a request in a running batch of ``batch``."""
        for lo, hi, kk in self.per_batch_k:
            if lo <= batch <= hi:
                return min(k, kk)
        if self.per_batch_k and batch > self.per_batch_k[-1][1]:
            return min(k, self.per_batch_k[-1][2])
        if self.adaptive and last_accepted is not None:
            return max(1, min(k, last_accepted + 1))
        return k


class Profile(_Strict):
    """One emulated server configuration. Durations are at ``time_scale`` 1.0."""

    name: str
    engine: Literal["vllm", "sglang"]
    description: str
    simulated: Literal[True] = True
    engine_version: str
    served_model: str
    model_path: str
    model_type: str = "Qwen3_5ForCausalLM"
    tensor_parallel: int = Field(default=2, ge=1)
    context_len: int = Field(default=8192, ge=16)
    time_scale: TimeScale = 1.0
    load_s: float = Field(ge=0.0)
    #: SGLang only: seconds the HTTP server answers 503 (warmup) before it is up
    warmup_s: float = Field(default=0.0, ge=0.0)
    prefill_base_ms: float = Field(ge=0.0)
    prefill_per_token_ms: float = Field(ge=0.0)
    #: running batch size -> step time; linear between points, flat beyond the ends
    decode_step_ms: dict[int, float]
    #: relative std-dev of each step time (seeded), clipped to +-3 sigma
    step_jitter: float = Field(default=0.0, ge=0.0, le=0.2)
    spec: SpecSettings | None = None
    max_running_requests: int | None = Field(default=None, ge=1)
    #: SGLang only: live requests the Mamba state cache holds; a larger admission cap is
    #: lowered to it, with the engine's warning (the seed's SGLang DFlash: five)
    mamba_cap: int | None = Field(default=None, ge=1)
    #: tokens generated before a natural EOS when the request does not set ignore_eos
    natural_stop_tokens: int | None = Field(default=None, ge=1)
    #: emulated seconds between vLLM stat log lines (vLLM's VLLM_LOG_STATS_INTERVAL)
    log_interval_s: float = Field(default=10.0, gt=0.0)
    #: SGLang --decode-log-interval (decode steps between "Decode batch" lines)
    decode_log_interval: int = Field(default=40, ge=1)
    max_total_num_tokens: int = Field(default=60000, ge=1)
    #: vLLM --cudagraph-metrics: log the per-interval CUDA graph table
    cudagraph_metrics: bool = False
    #: the server was told to run eager (vLLM --enforce-eager, SGLang --disable-cuda-graph or
    #: --cuda-graph-backend-decode disabled): no graph captured, every step eager
    eager: bool = False
    #: decode step time multiplier when steps run eager (eager_fallback, graphs_unused)
    eager_slowdown: float = Field(default=3.0, ge=1.0)
    #: vLLM --per-request-spec-decode-metrics: per-request acceptance on the usage chunk
    per_request_spec_decode_metrics: Literal["none", "summary", "detailed"] = "none"
    failures: FailureSettings = FailureSettings()
    verification: Verification = Verification()

    @field_validator("decode_step_ms")
    @classmethod
    def _steps(cls, v: dict[int, float]) -> dict[int, float]:
        if not v:
            raise ValueError("needs at least one batch size")
        if any(k < 1 or ms <= 0 for k, ms in v.items()):
            raise ValueError("batch sizes must be >= 1 and step times > 0")
        return dict(sorted(v.items()))

    def step_ms(self, batch: int) -> float:
        """Decode step time (ms, unscaled) for a running batch of ``batch`` requests."""
        sizes = list(self.decode_step_ms)
        times = list(self.decode_step_ms.values())
        if batch <= sizes[0]:
            return times[0]
        if batch >= sizes[-1]:
            return times[-1]
        i = bisect.bisect_left(sizes, batch)
        if sizes[i] == batch:
            return times[i]
        lo, hi = sizes[i - 1], sizes[i]
        frac = (batch - lo) / (hi - lo)
        return times[i - 1] + frac * (times[i] - times[i - 1])

    @property
    def admission_cap(self) -> int | None:
        """What the server admits: the configured cap, lowered by the Mamba state cache."""
        caps = [c for c in (self.max_running_requests, self.mamba_cap) if c is not None]
        return min(caps) if caps else None

    def prefill_ms(self, prompt_tokens: int) -> float:
        return self.prefill_base_ms + self.prefill_per_token_ms * prompt_tokens

    def iteration_s(self, prompt_tokens: int, max_tokens: int, concurrency: int) -> float:
        """Seconds one iteration of ``concurrency`` streams takes on this schedule (unscaled):
        admitted in waves of the admission cap, each wave a prefill plus the decode steps that
        ``max_tokens`` needs at the expected tokens per step."""
        cap = self.max_running_requests or concurrency
        batch = min(concurrency, cap)
        waves = -(-concurrency // cap)
        per_step = 1.0 + (self.spec.expected_accepted() if self.spec else 0.0)
        steps = max_tokens / per_step
        wave_s = (self.prefill_ms(prompt_tokens * batch) + steps * self.step_ms(batch)) / 1000.0
        return waves * wave_s

    def has(self, mode: FailMode) -> bool:
        return mode in self.failures.modes

    @property
    def graphs_captured(self) -> bool:
        return not self.eager and not self.has(FailMode.EAGER_FALLBACK)

    @property
    def graphs_used(self) -> bool:
        return self.graphs_captured and not self.has(FailMode.GRAPHS_UNUSED)

    def with_overrides(
        self,
        *,
        time_scale: float | None = None,
        fail: tuple[FailMode, ...] = (),
        exit_code: int | None = None,
        served_model: str | None = None,
        max_running_requests: int | None = None,
        spec_tokens: int | None = None,
        cudagraph_metrics: bool | None = None,
        tensor_parallel: int | None = None,
        eager: bool | None = None,
        per_request_spec_decode_metrics: str | None = None,
        verification: Verification | None = None,
    ) -> Profile:
        """A copy with CLI/test overrides applied (and validated). ``spec_tokens`` runs the
        profile at another speculative depth (``SpecSettings.at_depth``)."""
        failures = self.failures.model_dump()
        failures["modes"] = tuple(dict.fromkeys((*self.failures.modes, *fail)))
        if exit_code is not None:
            failures["exit_code"] = exit_code
        data = self.model_dump()
        data["failures"] = failures
        if time_scale is not None:
            data["time_scale"] = time_scale
        if served_model is not None:
            data["served_model"] = served_model
        if max_running_requests is not None:
            data["max_running_requests"] = max_running_requests
        if spec_tokens is not None and self.spec is not None:
            spec, delta_ms = self.spec.at_depth(spec_tokens)
            data["spec"] = spec.model_dump()
            data["decode_step_ms"] = {b: ms + delta_ms for b, ms in self.decode_step_ms.items()}
        if cudagraph_metrics is not None:
            data["cudagraph_metrics"] = cudagraph_metrics
        if tensor_parallel is not None:
            data["tensor_parallel"] = tensor_parallel
        if eager is not None:
            data["eager"] = eager
        if per_request_spec_decode_metrics is not None:
            data["per_request_spec_decode_metrics"] = per_request_spec_decode_metrics
        if verification is not None:
            data["verification"] = verification.model_dump()
        return Profile.model_validate(data)


class ProfileError(ValueError):
    """A profile could not be found or is invalid; the message names the field."""


def shipped_profiles() -> list[str]:
    """Names of the profiles packaged in bench/emulator/profiles/."""
    folder = resources.files("bench.emulator").joinpath(PROFILE_DIR)
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a shipped profile by name (``vllm-dflash``) or any YAML file by path."""
    path = Path(name_or_path)
    source = str(path)
    if not (path.suffix in (".yaml", ".yml") or exists(path)):
        path = Path(str(resources.files("bench.emulator").joinpath(PROFILE_DIR)))
        path = path / f"{name_or_path}.yaml"
        if not path.is_file():
            known = ", ".join(shipped_profiles())
            raise ProfileError(f"profile {name_or_path!r}: unknown (shipped: {known})")
        source = f"profile {name_or_path}"
    try:
        data = parse_yaml(read_text(path, what="emulator profile"), source)
    except InputError as err:
        raise ProfileError(f"{source}: {err.reason}") from None
    try:
        return Profile.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise ProfileError(f"{source}: {loc}: {first['msg']}") from err
