"""Acceptance from engine counters, one definition for both engines, shared by the runner
that computes it (bench.measure) and every reader that recomputes it from the raw /metrics
snapshots a payload stores (bench.schema._invariants: validate, report, compare, publish).
The formula and the pinned sources it comes from are explained in bench/measure/_acceptance.py;
the per-request counts' cross-check in bench/measure/_requestacc.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.schema._payload import (
    AcceptanceDelta,
    CategoryRequestAcceptance,
    IterationRecord,
    MetricSnapshot,
)

#: where per-request counts come from (bench/measure/_requestacc.py says how each engine sends them)
SGLANG_SOURCE = "sglang sglext.spec_tokens_details"
VLLM_SOURCE = "vllm metrics.speculative_decoding"

VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"

SGLANG_VERIFY = "sglang:spec_verify_calls_total"
SGLANG_GEN = "sglang:generation_tokens_total"
SGLANG_REQS = "sglang:num_requests_total"
SGLANG_DRAFT_TOKENS_GAUGE = "sglang:spec_num_draft_tokens"
SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate")

#: counters among METRICS (the SGLang gauges may go down; counters never do on one process)
GAUGES = frozenset({SGLANG_DRAFT_TOKENS_GAUGE, *SGLANG_GAUGES})


def counters_went_back(before: MetricSnapshot, after: MetricSnapshot) -> list[str]:
    """Counters lower (or gone) after the window than before it: the engine restarted (its
    counters start again from zero) or the scrape lost them. Never a negative delta."""
    out: list[str] = []
    for name, was in sorted(before.values.items()):
        if name in GAUGES:
            continue
        now = after.values.get(name)
        if now is None:
            out.append(f"{name} {was:g} -> (absent)")
        elif now < was:
            out.append(f"{name} {was:g} -> {now:g}")
    return out


def delta(
    engine: str, before: MetricSnapshot, after: MetricSnapshot, spec_num_tokens: int | None
) -> AcceptanceDelta | None:
    """Counter delta over one window; None when the engine exports no speculative counters."""
    b, a = before.values, after.values

    def d(name: str) -> float:
        return a.get(name, 0.0) - b.get(name, 0.0)

    if engine == "vllm":
        if VLLM_DRAFTS not in a:
            return None
        drafts, draft_tokens, accepted = d(VLLM_DRAFTS), d(VLLM_DRAFT_TOKENS), d(VLLM_ACCEPTED)
        positions = sorted(
            (k for k in a if k.startswith(VLLM_PER_POS) and _pos_of(k).isdigit()),
            key=lambda k: int(_pos_of(k)),
        )
        per_pos = [round(d(k)) for k in positions]
        source = "vllm /metrics spec_decode counters"
    else:
        if SGLANG_VERIFY not in a:
            return None
        drafts = d(SGLANG_VERIFY)
        accepted = max(0.0, d(SGLANG_GEN) - d(SGLANG_REQS) - drafts)
        per_round = a.get(SGLANG_DRAFT_TOKENS_GAUGE)
        if per_round is not None and per_round > 1:
            draft_tokens = drafts * (per_round - 1)
        elif spec_num_tokens is not None:
            draft_tokens = drafts * spec_num_tokens
        else:
            draft_tokens = 0.0
        per_pos = []
        source = "sglang /metrics: verify calls, generation tokens, requests"
    return build(drafts, draft_tokens, accepted, per_pos, source, before, after)


def _pos_of(key: str) -> str:
    return key.rsplit('="', 1)[-1].rstrip('"}')


def build(
    drafts: float,
    draft_tokens: float,
    accepted: float,
    per_pos: list[int],
    source: str,
    before: MetricSnapshot | None = None,
    after: MetricSnapshot | None = None,
) -> AcceptanceDelta:
    nd, nt, na = round(drafts), round(draft_tokens), round(accepted)
    return AcceptanceDelta(
        drafts=max(nd, 0),
        draft_tokens=max(nt, 0),
        accepted_tokens=max(na, 0),
        acceptance_rate=na / nt if nt > 0 else None,
        mean_acceptance_length=1 + na / nd if nd > 0 else None,
        accepted_per_position=per_pos,
        source=source,
        before=before,
        after=after,
    )


def combine(deltas: Iterable[AcceptanceDelta]) -> AcceptanceDelta | None:
    """Sum per-iteration deltas into the run's figure (raw snapshots stay per iteration)."""
    items = list(deltas)
    if not items:
        return None
    width = max(len(x.accepted_per_position) for x in items)
    per_pos = [
        sum(x.accepted_per_position[i] for x in items if i < len(x.accepted_per_position))
        for i in range(width)
    ]
    return build(
        sum(x.drafts for x in items),
        sum(x.draft_tokens for x in items),
        sum(x.accepted_tokens for x in items),
        per_pos,
        items[0].source,
    )


def cross_check(
    total: CategoryRequestAcceptance, counters: AcceptanceDelta | None, k: int | None
) -> CategoryRequestAcceptance:
    """``total`` with the verdict of comparing it with the window's counter delta."""
    if counters is None:
        return total.model_copy(update={"check": "no counter delta to compare with"})
    steps_ok = total.verify_steps == counters.drafts
    if total.source == SGLANG_SOURCE:
        slack = (k or 0) * total.requests
        acc_ok = (
            counters.accepted_tokens <= total.accepted_tokens <= counters.accepted_tokens + slack
        )
        rule = f"counters {counters.accepted_tokens} <= per-request <= counters + {slack}"
    else:
        acc_ok = total.accepted_tokens == counters.accepted_tokens
        rule = f"counters {counters.accepted_tokens} = per-request"
    check = (
        f"verify steps {total.verify_steps} vs counter drafts {counters.drafts}; "
        f"accepted {total.accepted_tokens} ({rule})"
    )
    return total.model_copy(update={"agrees_with_counters": steps_ok and acc_ok, "check": check})


def request_total(its: list[IterationRecord]) -> CategoryRequestAcceptance | None:
    reqs = [r for it in its for r in it.requests]
    got = [r.spec_tokens for r in reqs if r.spec_tokens is not None]
    if not got or len(got) != len(reqs):
        return None  # every request must carry them, or the sum is not the window's
    drafted = sum(g.draft_tokens for g in got)
    accepted = sum(g.accepted_tokens for g in got)
    return CategoryRequestAcceptance(
        source=got[0].source,
        requests=len(got),
        verify_steps=sum(g.verify_steps for g in got),
        draft_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate=accepted / drafted if drafted else None,
    )
