"""Per-request acceptance (the engine's own counts in its response) and the per-category
windows of a prompt-set workload, each cross-checked against the /metrics counter deltas.

Where the pinned engines put it (checked against the pinned sources, tests/contract):

- SGLang 0.5.19: request field ``return_spec_tokens_details: true``
  (srt/entrypoints/openai/protocol.py:864); the stream then carries one chunk with
  ``choices: []`` and ``sglext.spec_tokens_details`` before the usage chunk
  (serving_chat.py:1735-1764) with ``spec_verify_ct``, ``spec_num_correct_drafts``,
  ``spec_num_proposed_drafts`` (= verify_ct x (speculative_num_draft_tokens - 1)),
  ``spec_accept_rate``, ``spec_accept_length`` (= completion_tokens / verify_ct) and
  ``spec_correct_drafts_histogram`` (tokenizer_manager.py:2796-2853).
- vLLM 0.33.0: no request field; the server flag ``--per-request-spec-decode-metrics
  summary|detailed`` (config/observability.py:50) puts ``metrics.speculative_decoding`` on the
  final usage chunk (chat_completion/serving.py:883-911): ``num_spec_steps``,
  ``num_accepted_draft_tokens``, ``num_draft_tokens``, ``draft_acceptance_rate``,
  ``mean_acceptance_length``, ``acceptance_histogram`` (entrypoints/generate/base/
  protocol.py:100-119). Read when present; the seed's vLLM flags do not set it.

The cross-check: the verify steps summed over a window's requests equal the counters' drafts
on both engines. vLLM counts accepted tokens the same way per request and in /metrics, so
they are equal. SGLang's accepted tokens are derived from generated tokens (bench.measure.
_acceptance), which loses the part of a last verify cut by max_tokens: the per-request sum
lies between the counter figure and it plus ``k`` per request.
"""

from __future__ import annotations

import json
import math
from typing import Any

from bench.core import summarize
from bench.measure._client import RawResponse
from bench.measure._promptset import PromptSet
from bench.schema import (
    CategoryWindow,
    IterationRecord,
    RequestSpecTokens,
)
from bench.schema._counters import (
    SGLANG_SOURCE,
    VLLM_SOURCE,
    combine,
    cross_check,
    request_total,
)

#: the request field SGLang 0.5.19 reads (ChatCompletionRequest); vLLM 0.33.0 has none
SGLANG_REQUEST_FIELD = "return_spec_tokens_details"
#: (verify steps, accepted, proposed, rate, length, histogram) as each engine names them; the
#: contract tier checks them against the pinned sources (tests/contract/test_spec_tokens.py)
SGLANG_FIELDS = (
    "spec_verify_ct",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_accept_rate",
    "spec_accept_length",
    "spec_correct_drafts_histogram",
)
VLLM_FIELDS = (
    "num_spec_steps",
    "num_accepted_draft_tokens",
    "num_draft_tokens",
    "draft_acceptance_rate",
    "mean_acceptance_length",
    "acceptance_histogram",
)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _num(v: Any) -> float | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool)
    return float(v) if ok and math.isfinite(v) and v >= 0 else None


def _hist(v: Any) -> list[int]:
    return [x for x in v if _int(x) is not None] if isinstance(v, list) else []


def parse_spec_tokens(obj: dict[str, Any]) -> RequestSpecTokens | None:
    """The per-request counts one SSE event object carries, if any (either engine's shape);
    None when it carries none or they are not well formed."""
    ext = obj.get("sglext")
    if isinstance(ext, dict) and isinstance(ext.get("spec_tokens_details"), dict):
        return _read(ext["spec_tokens_details"], SGLANG_SOURCE, SGLANG_FIELDS)
    metrics = obj.get("metrics")
    sd = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if isinstance(sd, dict):
        return _read(sd, VLLM_SOURCE, VLLM_FIELDS)
    return None


def _read(d: dict[str, Any], source: str, names: tuple[str, ...]) -> RequestSpecTokens | None:
    steps, ok, proposed, rate, length, hist = names
    counts = _int(d.get(steps)), _int(d.get(ok)), _int(d.get(proposed))
    if counts[0] is None or counts[1] is None or counts[2] is None:
        return None
    return RequestSpecTokens.model_validate(
        {
            "source": source,
            "verify_steps": counts[0],
            "accepted_tokens": counts[1],
            "draft_tokens": counts[2],
            "acceptance_rate": _num(d.get(rate)),
            "accept_length": _num(d.get(length)),
            "histogram": _hist(d.get(hist)),
        }
    )


def spec_tokens_of(raw: RawResponse) -> RequestSpecTokens | None:
    """The per-request counts of one streamed response (the last event that carries them)."""
    found: RequestSpecTokens | None = None
    for _, data in raw.events:
        if b"spec_tokens_details" not in data and b"speculative_decoding" not in data:
            continue
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            found = parse_spec_tokens(obj) or found
    return found


def category_windows(
    prompt_set: PromptSet | None, k: int | None, iterations: list[IterationRecord]
) -> list[CategoryWindow]:
    """One record per category of the prompt set, over its valid measured iterations."""
    if prompt_set is None:
        return []
    out: list[CategoryWindow] = []
    for cat in prompt_set.categories():
        measured = [it for it in iterations if it.category == cat and not it.warmup]
        valid = [it for it in measured if it.valid]
        decode = [it.per_stream_mean_tok_s for it in valid if it.per_stream_mean_tok_s is not None]
        agg = [it.aggregate_tok_s for it in valid if it.aggregate_tok_s is not None]
        ttft = [
            math.fsum(ts) / len(ts)
            for it in valid
            if (ts := [r.ttft_ms for r in it.requests if r.ttft_ms is not None])
        ]
        counts = [r.prompt_tokens for it in valid for r in it.requests if r.prompt_tokens]
        acc = combine([it.acceptance for it in valid if it.acceptance is not None])
        if acc is not None:
            acc = acc.model_copy(update={"before": None, "after": None})
        req = request_total(valid)
        out.append(
            CategoryWindow(
                category=cat,
                prompts=len(prompt_set.of(cat)),
                iterations=[it.index for it in measured],
                valid_iterations=len(valid),
                decode_tok_s=summarize(decode) if decode else None,
                aggregate_tok_s=summarize(agg) if agg else None,
                ttft_ms=summarize(ttft) if ttft else None,
                prompt_tokens_mean=math.fsum(counts) / len(counts) if counts else None,
                acceptance=acc,
                request_acceptance=cross_check(req, acc, k) if req is not None else None,
            )
        )
    return out
