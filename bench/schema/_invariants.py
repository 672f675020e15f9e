"""What a payload's own evidence says its figures must be (issue 47, class 2). MLPerf's
submission checker re-derives every reported figure from the logs it ships with; this is that
check for one payload, shared by ``validate``, ``report``, ``compare`` and ``publish``:

- every window holds the workload's concurrency of requests, each request inside its window,
  the window ending after it starts and the windows in order, the counters scraped around it;
- every request's figures are its token times' (decode rate, TTFT, end to end), its completion
  tokens within ``max_tokens`` unless a reason is named, and a request with a reason makes its
  iteration and the run invalid;
- every summary (per configuration, level and category) equals its recomputation from the
  samples it summarises, and the headline figures (``tokSOut``, ``samples``, ...) are those;
- every acceptance is the counter delta of the raw /metrics snapshots the payload stores
  (bench.schema._counters, the runner's own formula), summed the runner's way, accepted within
  drafted and every rate in [0, 1]; per-request counts and their "agrees" verdict recomputed;
- every category is one the prompt set has, with its own windows.

A finding is ``(JSON path, reason)``; any finding means the payload contradicts itself: a reader
uses none of its figures (the report lists it, publish refuses it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from datetime import datetime

from bench.core import Summary, summarize
from bench.schema._counters import combine, counters_went_back, cross_check, delta, request_total
from bench.schema._payload import (
    AcceptanceDelta,
    CategoryRequestAcceptance,
    CategoryWindow,
    IterationRecord,
    Payload,
    RequestRecord,
)

Finding = tuple[str, str]
#: seconds two clock readings of one event may differ by (float rounding of sums of offsets)
CLOCK_EPS = 1e-6


def close(a: float, b: float) -> bool:
    """Equal but for float rounding (the stored figure went through JSON and back)."""
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def payload_findings(p: Payload) -> list[Finding]:
    """Every way ``p``'s figures disagree with its own evidence (empty: none)."""
    return [
        *_run_times(p),
        *_settings(p),
        *_windows(p),
        *_requests(p),
        *_verdicts(p),
        *_summaries(p),
        *_headline(p),
        *_acceptances(p),
        *_categories(p),
    ]


def _its(p: Payload) -> Iterator[tuple[str, IterationRecord]]:
    for i, it in enumerate(p.evidence.iterations):
        yield f"$.evidence.iterations[{i}]", it


def _measured(p: Payload) -> list[IterationRecord]:
    return [it for it in p.evidence.iterations if not it.warmup]


def _valid(p: Payload, category: str | None = None) -> list[IterationRecord]:
    return [it for it in _measured(p) if it.valid and (category is None or it.category == category)]


# -- times and windows -------------------------------------------------------------------------


def _run_times(p: Payload) -> Iterator[Finding]:
    run = p.evidence.run
    try:
        started = datetime.fromisoformat(run.started_at.replace("Z", "+00:00"))
        finished = datetime.fromisoformat(run.finished_at.replace("Z", "+00:00"))
    except ValueError:
        yield "$.evidence.run.started_at", "started_at and finished_at must be ISO 8601 times"
        return
    if started.tzinfo is None or finished.tzinfo is None:
        yield "$.evidence.run.started_at", "started_at and finished_at must carry a time zone"
    elif finished < started:
        yield "$.evidence.run.finished_at", f"{run.finished_at} is before started_at"


def _settings(p: Payload) -> Iterator[Finding]:
    """The settings a payload records twice say the same thing both times."""
    wl, fl = p.evidence.workload, p.engineFlags
    if not close(fl.temperature, wl.temperature):
        yield (
            "$.engineFlags.temperature",
            f"{fl.temperature!r}, the workload's is {wl.temperature!r}",
        )
    s = wl.sampling
    twice = (wl.temperature, wl.max_tokens, wl.ignore_eos)
    if s is not None and (s.temperature, s.max_tokens, s.ignore_eos) != twice:
        why = "temperature, max_tokens or ignore_eos differ from the workload's"
        yield "$.evidence.workload.sampling", why
    t = wl.chat_template
    if t is not None and t.enable_thinking != t.kwargs.get("enable_thinking"):
        yield (
            "$.evidence.workload.chat_template.enable_thinking",
            (f"{t.enable_thinking!r}, the kwargs sent say {t.kwargs.get('enable_thinking')!r}"),
        )


def _windows(p: Payload) -> Iterator[Finding]:
    c = p.evidence.workload.concurrency
    prev_end: float | None = None
    for k, (path, it) in enumerate(_its(p)):
        if it.index != k:
            yield f"{path}.index", f"{it.index}, but it is iteration {k} of the payload"
        if it.window_end < it.window_start:
            yield (
                f"{path}.window_end",
                (f"the window ends ({it.window_end!r}) before it starts ({it.window_start!r})"),
            )
        if len(it.requests) != c:
            yield f"{path}.requests", f"{len(it.requests)} request(s), the concurrency is {c}"
        if not any(r.sent_at for r in it.requests):
            continue  # nothing was sent (no connection): the window has no time to place
        if prev_end is not None and it.window_start < prev_end - CLOCK_EPS:
            yield f"{path}.window_start", "the window starts before the one before it ended"
        prev_end = it.window_end if prev_end is None else max(prev_end, it.window_end)
        yield from _inside(path, it)
        yield from _scraped_around(path, it)


def _inside(path: str, it: IterationRecord) -> Iterator[Finding]:
    for k, r in enumerate(it.requests):
        if not r.sent_at:
            continue  # never sent (no connection): no time to place
        end = r.sent_at + (r.ended_at if r.ended_at is not None else r.last_token_at or 0.0)
        if r.sent_at < it.window_start - CLOCK_EPS or end > it.window_end + CLOCK_EPS:
            yield (
                f"{path}.requests[{k}].sent_at",
                (
                    f"the request ({r.sent_at!r} .. {end!r}) is outside its window "
                    f"({it.window_start!r} .. {it.window_end!r})"
                ),
            )


def _scraped_around(path: str, it: IterationRecord) -> Iterator[Finding]:
    acc = it.acceptance
    if acc is None or acc.before is None or acc.after is None:
        return
    if acc.before.at > it.window_start + CLOCK_EPS or acc.after.at < it.window_end - CLOCK_EPS:
        yield (
            f"{path}.acceptance",
            (
                f"the counters were scraped at {acc.before.at!r} and {acc.after.at!r}, not around "
                f"the window ({it.window_start!r} .. {it.window_end!r})"
            ),
        )


# -- requests and verdicts ---------------------------------------------------------------------


def _requests(p: Payload) -> Iterator[Finding]:
    for path, it in _its(p):
        for k, r in enumerate(it.requests):
            yield from _request(p, f"{path}.requests[{k}]", r)


def _request(p: Payload, path: str, r: RequestRecord) -> Iterator[Finding]:
    wl = p.evidence.workload
    ct = r.completion_tokens
    if ct is not None and ct > wl.max_tokens and r.valid:
        yield (
            f"{path}.completion_tokens",
            f"{ct} completion tokens at max_tokens {wl.max_tokens}, and no reason named",
        )
    if r.reasoning_tokens is not None and (ct is None or r.reasoning_tokens > ct):
        yield f"{path}.reasoning_tokens", f"{r.reasoning_tokens} exceeds completion_tokens {ct}"
    synthetic = wl.prompt_set is None and not wl.allow_prompt_mismatch
    if synthetic and r.valid and r.prompt_tokens not in (None, wl.prompt_tokens):
        yield (
            f"{path}.prompt_tokens",
            f"{r.prompt_tokens}, the exact prompt length is {wl.prompt_tokens}, no reason named",
        )
    yield from _request_rates(path, r)
    yield from _request_counts(path, r)


def _request_rates(path: str, r: RequestRecord) -> Iterator[Finding]:
    first, last, ct = r.first_token_at, r.last_token_at, r.completion_tokens
    if r.decode_tok_s is not None:
        rate = None
        if first is not None and last is not None and ct is not None and ct >= 2 and last > first:
            rate = (ct - 1) / (last - first)
        if rate is None or not close(r.decode_tok_s, rate):
            yield f"{path}.decode_tok_s", "is not (completion_tokens-1)/(last-first token)"
    if r.ttft_ms is not None and (first is None or not close(r.ttft_ms, first * 1e3)):
        yield f"{path}.ttft_ms", "is not first_token_at in milliseconds"
    if r.e2e_ms is not None and (r.ended_at is None or not close(r.e2e_ms, r.ended_at * 1e3)):
        yield f"{path}.e2e_ms", "is not ended_at in milliseconds"


def _request_counts(path: str, r: RequestRecord) -> Iterator[Finding]:
    st = r.spec_tokens
    if st is None:
        return
    if st.accepted_tokens > st.draft_tokens:
        yield (
            f"{path}.spec_tokens.accepted_tokens",
            f"{st.accepted_tokens} accepted of {st.draft_tokens} drafted",
        )
    if st.acceptance_rate is not None and not 0.0 <= st.acceptance_rate <= 1.0:
        yield f"{path}.spec_tokens.acceptance_rate", f"{st.acceptance_rate!r} is not in [0, 1]"


def _verdicts(p: Payload) -> Iterator[Finding]:
    """A request with a reason makes its iteration invalid, and a measured invalid iteration
    the run (bench.measure._validity: invalid_iteration)."""
    for path, it in _its(p):
        bad = [k for k, r in enumerate(it.requests) if not r.valid]
        if bad and not it.reasons:
            yield (
                f"{path}.reasons",
                f"request {bad[0]} is invalid, and the iteration names no reason",
            )
        if not it.valid and not it.warmup and p.evidence.validity.valid:
            yield "$.evidence.validity.valid", f"true, but measured iteration {it.index} is invalid"
        if bad and it.per_stream_mean_tok_s is not None:
            yield f"{path}.per_stream_mean_tok_s", "a rate over an iteration with invalid requests"
        rates = [r.decode_tok_s for r in it.requests if r.decode_tok_s is not None]
        mean = it.per_stream_mean_tok_s
        if mean is not None and (not rates or not close(mean, math.fsum(rates) / len(rates))):
            yield f"{path}.per_stream_mean_tok_s", "is not the mean of its requests' decode rates"


# -- summaries -----------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def decode_samples(its: Sequence[IterationRecord]) -> list[float]:
    """The per-iteration decode samples of valid iterations (the runner's figures' own)."""
    return [it.per_stream_mean_tok_s for it in its if it.per_stream_mean_tok_s is not None]


def _ttft_samples(its: Sequence[IterationRecord]) -> list[float]:
    return [
        _mean(ts) for it in its if (ts := [r.ttft_ms for r in it.requests if r.ttft_ms is not None])
    ]


def _e2e_samples(its: Sequence[IterationRecord]) -> list[float]:
    return [
        _mean(ts) for it in its if (ts := [r.e2e_ms for r in it.requests if r.e2e_ms is not None])
    ]


def _agg_samples(its: Sequence[IterationRecord]) -> list[float]:
    return [it.aggregate_tok_s for it in its if it.aggregate_tok_s is not None]


def summary_findings(path: str, stored: Summary | None, samples: list[float]) -> Iterator[Finding]:
    """``stored`` against ``summarize(samples)``: every field, each named when it differs."""
    if not samples or stored is None:
        if samples or stored is not None:
            n = len(samples)
            yield path, f"{'missing' if stored is None else 'present'} over {n} sample(s)"
        return
    again = summarize(samples)
    for name in ("n", "mean", "stddev", "median", "min", "max", "ci95_low", "ci95_high", "cv"):
        want, got = getattr(again, name), getattr(stored, name)
        if not close(float(got), float(want)):
            yield f"{path}.{name}", f"{got!r}, but its {len(samples)} sample(s) give {want!r}"


def _summaries(p: Payload) -> Iterator[Finding]:
    fig, valid = p.evidence.figures, _valid(p)
    yield from summary_findings(
        "$.evidence.figures.decode_tok_s", fig.decode_tok_s, decode_samples(valid)
    )
    yield from summary_findings("$.evidence.figures.ttft_ms", fig.ttft_ms, _ttft_samples(valid))
    yield from summary_findings("$.evidence.figures.e2e_ms", fig.e2e_ms, _e2e_samples(valid))
    yield from summary_findings(
        "$.evidence.figures.aggregate_tok_s", fig.aggregate_tok_s, _agg_samples(valid)
    )
    for k, c in enumerate(p.evidence.categories):
        path, its = f"$.evidence.categories[{k}]", _valid(p, c.category)
        yield from summary_findings(f"{path}.decode_tok_s", c.decode_tok_s, decode_samples(its))
        yield from summary_findings(f"{path}.aggregate_tok_s", c.aggregate_tok_s, _agg_samples(its))
        yield from summary_findings(f"{path}.ttft_ms", c.ttft_ms, _ttft_samples(its))


def _headline(p: Payload) -> Iterator[Finding]:
    """The lmx fields are the decode and TTFT figures, as the runner wrote them."""
    dec, ttft = p.evidence.figures.decode_tok_s, p.evidence.figures.ttft_ms
    samples = decode_samples(_valid(p))
    if len(p.samples) != len(samples) or not all(map(close, p.samples, samples)):
        yield "$.samples", "are not the valid measured iterations' decode rates"
    if not close(p.tokSOut, dec.mean if dec else 0.0):
        yield "$.tokSOut", "is not evidence.figures.decode_tok_s.mean"
    if not close(p.ttftMs, ttft.mean if ttft else 0.0):
        yield "$.ttftMs", "is not evidence.figures.ttft_ms.mean"
    st = p.sampleStats
    want = (dec.min, dec.median, dec.mean, dec.max, dec.stddev) if dec else (0.0,) * 5
    if not all(map(close, (st.min, st.p50, st.mean, st.max, st.stddev), want)):
        yield "$.sampleStats", "is not evidence.figures.decode_tok_s"
    yield from _total_rate(p)


def _total_rate(p: Payload) -> Iterator[Finding]:
    per_request = [
        (p.promptTokens + p.evidence.workload.max_tokens) / (r.e2e_ms / 1e3)
        for it in _valid(p)
        for r in it.requests
        if r.e2e_ms
    ]
    want = _mean(per_request) if per_request else None
    got = p.tokSTotal
    if (got is None) != (want is None) or (got is not None and not close(got, want or 0.0)):
        yield "$.tokSTotal", f"{got!r}, but its requests' prompt+output rates give {want!r}"


# -- acceptance ----------------------------------------------------------------------------------


def acceptance_findings(path: str, acc: AcceptanceDelta) -> Iterator[Finding]:
    """One acceptance's own arithmetic: accepted within drafted, rates from its counts."""
    if acc.accepted_tokens > acc.draft_tokens:
        yield (
            f"{path}.accepted_tokens",
            f"{acc.accepted_tokens} accepted of {acc.draft_tokens} draft tokens",
        )
    rate = acc.accepted_tokens / acc.draft_tokens if acc.draft_tokens else None
    if not _same(acc.acceptance_rate, rate):
        yield f"{path}.acceptance_rate", f"{acc.acceptance_rate!r}, its counts give {rate!r}"
    length = 1 + acc.accepted_tokens / acc.drafts if acc.drafts else None
    if not _same(acc.mean_acceptance_length, length):
        yield (
            f"{path}.mean_acceptance_length",
            f"{acc.mean_acceptance_length!r}, its counts give {length!r}",
        )
    if sum(acc.accepted_per_position) > acc.accepted_tokens:
        yield f"{path}.accepted_per_position", "sums to more than accepted_tokens"


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and close(a, b))


def _counts(acc: AcceptanceDelta | None) -> tuple[int, int, int, tuple[int, ...]] | None:
    if acc is None:
        return None
    return acc.drafts, acc.draft_tokens, acc.accepted_tokens, tuple(acc.accepted_per_position)


def _acceptances(p: Payload) -> Iterator[Finding]:
    for path, it in _its(p):
        if it.acceptance is not None:
            yield from acceptance_findings(f"{path}.acceptance", it.acceptance)
            yield from _from_snapshots(p, f"{path}.acceptance", it.acceptance)
    run = p.evidence.acceptance
    if run is not None:
        yield from acceptance_findings("$.evidence.acceptance", run)
    summed = combine([it.acceptance for it in _valid(p) if it.acceptance is not None])
    if _counts(run) != _counts(summed):
        yield (
            "$.evidence.acceptance",
            (
                f"{_counts(run)} (drafts, draft tokens, accepted, per position), but its valid "
                f"measured iterations' counter deltas sum to {_counts(summed)}"
            ),
        )
    yield from _flags(p, run)


def _from_snapshots(p: Payload, path: str, acc: AcceptanceDelta) -> Iterator[Finding]:
    """An iteration's acceptance is the delta of the two scrapes it stores, never a figure
    taken on trust: without them, or with counters that went back, there is none."""
    if acc.before is None or acc.after is None:
        yield path, "an acceptance without the /metrics snapshots it is the delta of"
        return
    back = counters_went_back(acc.before, acc.after)
    if back:
        yield path, f"counters went back inside the window ({back[0]}): no acceptance"
        return
    again = delta(p.engineName, acc.before, acc.after, p.engineFlags.specNumTokens)
    if _counts(again) != _counts(acc):
        yield (
            path,
            (
                f"{_counts(acc)} (drafts, draft tokens, accepted, per position), but its /metrics "
                f"snapshots give {_counts(again)}"
            ),
        )


def _flags(p: Payload, run: AcceptanceDelta | None) -> Iterator[Finding]:
    fl = p.engineFlags
    stored = (fl.specDraftTokens, fl.specAcceptedTokens)
    want = (run.draft_tokens, run.accepted_tokens) if run else (None, None)
    drafted, accepted = stored
    if drafted is not None and accepted is not None and accepted > drafted:
        yield "$.engineFlags.specAcceptedTokens", f"{accepted} exceeds specDraftTokens {drafted}"
    elif stored != want:
        yield (
            "$.engineFlags.specAcceptedTokens",
            f"specDraftTokens and specAcceptedTokens {stored}, evidence.acceptance says {want}",
        )
    if not _same(fl.specAcceptanceRate, run.acceptance_rate if run else None):
        yield "$.engineFlags.specAcceptanceRate", "is not evidence.acceptance.acceptance_rate"
    if not _same(fl.specMeanAcceptedLength, run.mean_acceptance_length if run else None):
        why = "is not evidence.acceptance.mean_acceptance_length"
        yield "$.engineFlags.specMeanAcceptedLength", why


# -- categories ----------------------------------------------------------------------------------


def _categories(p: Payload) -> Iterator[Finding]:
    ps = p.evidence.workload.prompt_set
    allowed = set(ps.prompts) if ps is not None else set()
    for path, it in _its(p):
        if it.category is not None and it.category not in allowed:
            yield f"{path}.category", f"{it.category!r} is not a category of the prompt set"
        for k, r in enumerate(it.requests):
            if r.category != it.category:
                yield (
                    f"{path}.requests[{k}].category",
                    f"{r.category!r}, its window's is {it.category!r}",
                )
    if ps is None:
        if p.evidence.categories:
            yield "$.evidence.categories", "categories without a prompt set"
        return
    names = [c.category for c in p.evidence.categories]
    if names != list(ps.prompts):
        yield (
            "$.evidence.categories",
            f"{names}, the prompt set's categories are {list(ps.prompts)}",
        )
    for k, c in enumerate(p.evidence.categories):
        yield from _category(p, f"$.evidence.categories[{k}]", c)


def _category(p: Payload, path: str, c: CategoryWindow) -> Iterator[Finding]:
    name, ps = c.category, p.evidence.workload.prompt_set
    if ps is not None and c.prompts != ps.prompts.get(name):
        yield f"{path}.prompts", f"{c.prompts}, the prompt set has {ps.prompts.get(name)}"
    measured = [it for it in _measured(p) if it.category == name]
    if c.iterations != [it.index for it in measured]:
        yield f"{path}.iterations", "are not the measured iterations of this category"
    valid = _valid(p, name)
    if c.valid_iterations != len(valid):
        yield f"{path}.valid_iterations", f"{c.valid_iterations}, but {len(valid)} are valid"
    acc = combine([it.acceptance for it in valid if it.acceptance is not None])
    if c.acceptance is not None:
        yield from acceptance_findings(f"{path}.acceptance", c.acceptance)
    if _counts(c.acceptance) != _counts(acc):
        yield (
            f"{path}.acceptance",
            f"{_counts(c.acceptance)}, its valid iterations' deltas sum to {_counts(acc)}",
        )
    yield from _category_requests(p, path, c.request_acceptance, valid, acc)


def _category_requests(
    p: Payload,
    path: str,
    stored: CategoryRequestAcceptance | None,
    valid: list[IterationRecord],
    acc: AcceptanceDelta | None,
) -> Iterator[Finding]:
    """The per-request counts summed again, and their cross-check with the counters redone."""
    total = request_total(valid)
    if acc is not None:
        acc = acc.model_copy(update={"before": None, "after": None})
    want = cross_check(total, acc, p.engineFlags.specNumTokens) if total is not None else None
    if stored != want:
        agrees = want.agrees_with_counters if want is not None else None
        check = want.check if want is not None else "no per-request counts"
        yield (
            f"{path}.request_acceptance",
            (
                f"is not what its requests' own counts give (recomputed: agrees_with_counters "
                f"{agrees}; {check})"
            ),
        )
