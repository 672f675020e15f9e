"""Speculative-decoding acceptance from engine counters, one definition for both engines.

The counters are scraped from ``/metrics`` right before and right after each measured window;
the delta gives drafts, draft tokens and accepted tokens, and from them

    acceptance rate        = accepted / draft_tokens
    mean acceptance length = 1 + accepted / drafts      (tokens per target forward, bonus incl.)

vLLM 0.33.0 (``vllm/v1/spec_decode/metrics.py``, class ``SpecDecodingProm``, lines 229-260)
exports prometheus counters, shown with the ``_total`` suffix the client library adds:

- ``vllm:spec_decode_num_drafts_total``: one per speculative step per request (= drafts)
- ``vllm:spec_decode_num_draft_tokens_total``: proposed draft tokens
- ``vllm:spec_decode_num_accepted_tokens_total``: accepted draft tokens
- ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}``: accepted at position i

SGLang 0.5.19 has no draft/accepted counters; its equivalents are derived
(``sglang/srt/observability/metrics_collector.py``):

- ``sglang:spec_verify_calls_total`` (line 1530) grows by ``req.spec_verify_ct`` when a request
  finishes (``observe_one_finished_request``, lines 1750-1766); ``spec_verify_ct`` is +1 per
  target verify forward of that request (``srt/managers/scheduler_components/
  batch_result_processor.py`` line 761). One verify forward = one draft round, so
  drafts = delta(spec_verify_calls).
- ``sglang:generation_tokens_total`` (line 1525) grows by the request's completion tokens and
  ``sglang:num_requests_total`` (line 1605) by one, both at the same moment. Each verify
  forward emits its accepted drafts plus one bonus token, and the first token comes from the
  prefill, so accepted = delta(generation_tokens) - delta(num_requests) - delta(verify_calls).
  (A last verify that overshoots ``max_tokens`` is truncated, so this can undercount by at
  most ``spec_num_tokens`` per request.)
- draft tokens = drafts x (``speculative_num_draft_tokens`` - 1): SGLang's own per-request rate
  uses the same product (``srt/managers/tokenizer_manager.py`` lines 2803-2805); the value comes
  from the gauge ``sglang:spec_num_draft_tokens`` (line 455) when exported, else from the
  configured number of speculative tokens + 1.
- The gauges ``sglang:spec_accept_length`` / ``sglang:spec_accept_rate`` (lines 424-435) are
  refreshed only at the decode-log interval and cover other windows: kept as raw evidence only.

Counters only cover finished requests on SGLang, so the "after" scrape happens once every
stream of the window has ended. Label sets (engine index, is_streaming) are summed; of the
``model_name`` series only the served model's is read (a server serving two models keeps one
series each), and the payload says which (``acceptance.source``, ``acceptance_raw``). Counters
lower after a window than before it (an engine that restarted) give no acceptance at all.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from bench.schema import MetricSnapshot

# The delta's formula lives with the payload's schema: every reader recomputes it from the
# snapshots a payload stores (bench.schema._invariants). Its names stay importable from here.
from bench.schema._counters import (
    GAUGES,
    SGLANG_DRAFT_TOKENS_GAUGE,
    SGLANG_GAUGES,
    SGLANG_GEN,
    SGLANG_REQS,
    SGLANG_VERIFY,
    VLLM_ACCEPTED,
    VLLM_DRAFT_TOKENS,
    VLLM_DRAFTS,
    VLLM_PER_POS,
    build,
    combine,
    counters_went_back,
    delta,
)

# The server's own TTFT histogram (vLLM 0.33.0 vllm/v1/metrics/loggers.py:931; SGLang 0.5.19
# srt/observability/metrics_collector.py:1706): its _sum and _count deltas over a window give the
# server-side mean TTFT of that window's requests, a cross-check of the client's clock.
TTFT_HISTOGRAM = {
    "vllm": "vllm:time_to_first_token_seconds",
    "sglang": "sglang:time_to_first_token_seconds",
}

METRICS: dict[str, tuple[str, ...]] = {
    "vllm": (
        VLLM_DRAFTS,
        VLLM_DRAFT_TOKENS,
        VLLM_ACCEPTED,
        VLLM_PER_POS,
        "vllm:time_to_first_token_seconds_sum",
        "vllm:time_to_first_token_seconds_count",
    ),
    "sglang": (
        SGLANG_VERIFY,
        SGLANG_GEN,
        SGLANG_REQS,
        SGLANG_DRAFT_TOKENS_GAUGE,
        *SGLANG_GAUGES,
        "sglang:time_to_first_token_seconds_sum",
        "sglang:time_to_first_token_seconds_count",
    ),
}


def server_ttft_ms(engine: str, before: MetricSnapshot, after: MetricSnapshot) -> float | None:
    """Mean server-side TTFT (ms) of the requests that got their first token in the window."""
    name = TTFT_HISTOGRAM.get(engine)
    if name is None:
        return None
    s, c = f"{name}_sum", f"{name}_count"
    if s not in after.values or c not in after.values:
        return None
    count = after.values[c] - before.values.get(c, 0.0)
    if count <= 0:
        return None
    return 1000.0 * (after.values[s] - before.values.get(s, 0.0)) / count


@dataclass(frozen=True)
class MetricsRead:
    """One /metrics body read for one served model: the wanted values (summed over the label
    sets of that model's series), which series were read, and what made the body unusable."""

    values: dict[str, float]
    series: str
    other_models: tuple[str, ...] = ()
    problem: str | None = None


_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _labels(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _LABEL.finditer(text)}


def read_metrics(text: str, wanted: Iterable[str], model: str | None = None) -> MetricsRead:
    """Sum each wanted metric over its label sets; the per-position family is kept per position
    as ``name{position="i"}``. Unknown lines and comments are skipped. With ``model``, a line
    whose ``model_name`` label names another model is not read (a server that serves several
    models keeps one series per model). A body with content but not one sample line
    (an HTML page, an error text), or a wanted counter whose value is not a finite number, is
    a ``problem``: not 'no counters'."""
    want = set(wanted)
    out: dict[str, float] = {}
    others: set[str] = set()
    own = False
    samples = content = 0
    bad: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line[0] == "#":
            continue
        content += 1
        brace = line.find("{")
        space = line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            name = line[:brace]
            close = line.rfind("}")
            labels = line[brace + 1 : close]
            rest = line[close + 1 :].split()
        else:
            name, labels, rest = line[:space], "", line[space + 1 :].split()
        try:
            value = float(rest[0]) if rest and _NAME.fullmatch(name) else None
        except ValueError:
            value = None
        if value is None:
            if name in want:
                bad.append(line.strip()[:120])
            continue
        samples += 1
        if name not in want:
            continue
        if not math.isfinite(value) or value < 0:  # counters and these gauges are never < 0
            bad.append(line.strip()[:120])
            continue
        parsed = _labels(labels)
        served = parsed.get("model_name")
        if model is not None and served is not None:
            if served != model:
                others.add(served)
                continue
            own = True
        key = name
        if name == VLLM_PER_POS:
            position = parsed.get("position", "?")
            if position != "?" and not position.isdigit():
                bad.append(line.strip()[:120])  # a position that is not a draft position
                continue
            key = f'{name}{{position="{position}"}}'
        out[key] = out.get(key, 0.0) + value
    overflowed = sorted(k for k, v in out.items() if not math.isfinite(v))
    for k in overflowed:  # finite label sets whose sum is past a float's range
        del out[k]
        bad.append(f"{k}: the sum of its label sets overflows")
    problem = None
    if content and not samples:
        first = next(ln for ln in text.splitlines() if ln.strip() and ln[0] != "#")
        problem = f"not Prometheus text ({content} line(s), none a sample; first: {first[:80]!r})"
    elif bad:
        problem = f"{len(bad)} counter line(s) unusable: no finite non-negative number, a "
        problem += f"position that is not an integer, or an overflowing sum (first: {bad[0]!r})"
    series = (
        f'model_name="{model}"'
        if own
        else "no model_name label (every label set summed)"
        if model is None or not others
        else f'none for model_name="{model}"'
    )
    return MetricsRead(out, series, tuple(sorted(others)), problem)


_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def parse_prometheus(
    text: str, wanted: Iterable[str], model: str | None = None
) -> dict[str, float]:
    """The wanted values of ``read_metrics`` (lines it cannot read are skipped)."""
    return read_metrics(text, wanted, model).values


def snapshot(engine: str, metrics_text: str, model: str | None = None) -> MetricSnapshot:
    return MetricSnapshot(
        at=time.perf_counter(), values=parse_prometheus(metrics_text, METRICS[engine], model)
    )


__all__ = [
    "GAUGES",
    "METRICS",
    "SGLANG_DRAFT_TOKENS_GAUGE",
    "SGLANG_GAUGES",
    "SGLANG_GEN",
    "SGLANG_REQS",
    "SGLANG_VERIFY",
    "TTFT_HISTOGRAM",
    "VLLM_ACCEPTED",
    "VLLM_DRAFTS",
    "VLLM_DRAFT_TOKENS",
    "VLLM_PER_POS",
    "MetricsRead",
    "build",
    "combine",
    "counters_went_back",
    "delta",
    "parse_prometheus",
    "read_metrics",
    "server_ttft_ms",
    "snapshot",
]
