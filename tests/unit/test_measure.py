"""The pure parts of bench.measure: one iteration's figures from its request records, and the
payload's figures, validity and acceptance over the measured iterations. Every expected value
is worked out by hand from the records below, never by calling the code under test."""

from __future__ import annotations

import math

import pytest

from bench.measure import RunSpec
from bench.measure._acceptance import VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS
from bench.measure._assemble import level_payload
from bench.measure._loop import _iteration_record
from bench.schema import (
    AcceptanceDelta,
    Hardware,
    IterationRecord,
    MetricSnapshot,
    Payload,
    RequestRecord,
    check_payload,
)

P, M = 64, 17  # M - 1 = 16 decode intervals: rates come out round
HW = Hardware(hwClass="CPU_ONLY", gpuName="none", gpuCount=0, vramGb=0, cpu="x", ramGb=1, os="l")
T_975_DF2 = 4.302652729749464  # Student t, 97.5% quantile, 2 degrees of freedom (tables)


def spec(**kw: object) -> RunSpec:
    base: dict[str, object] = {
        "engine": "vllm",
        "base_url": "http://127.0.0.1:1",
        "hf_id": "a/b",
        "served_model": "m",
        "quantization": "GPTQ-4bit",
        "hardware": HW,
        "spec_method": "dflash",
        "spec_num_tokens": 4,
        "prompt_tokens": P,
        "max_tokens": M,
        "concurrency": 2,
        "warmup": 1,
        "iterations": 3,
    }
    return RunSpec.model_validate({**base, **kw})


def req(
    k: int,
    sent: float,
    first: float,
    last: float,
    ended: float,
    decode: float,
    *,
    ct: int = M,
    pt: int = P,
    reasons: tuple[str, ...] = (),
) -> RequestRecord:
    """Times relative to ``sent``; ``decode`` is given (= (ct-1)/(last-first), done by hand)."""
    return RequestRecord(
        request_id=f"r{k}-{sent}",
        stream_index=k,
        sent_at=sent,
        first_token_at=first,
        last_token_at=last,
        ended_at=ended,
        ttft_ms=first * 1e3,
        decode_tok_s=decode,
        e2e_ms=ended * 1e3,
        prompt_tokens=pt,
        completion_tokens=ct,
        finish_reason="length",
        output_sha256="ab" * 32,
        http_status=200,
        reasons=list(reasons),
    )


# _iteration_record: per-stream mean and aggregate of one iteration.


def test_iteration_per_stream_mean_and_aggregate() -> None:
    records = [
        req(0, 10.0, 0.1, 0.5, 0.55, 40.0),  # 16 / 0.4 s
        req(1, 10.2, 0.2, 0.4, 0.45, 80.0),  # 16 / 0.2 s, sent 0.2 s later
    ]
    it = _iteration_record(spec(), 3, False, records)
    assert it.valid and it.reasons == []
    assert (it.index, it.warmup) == (3, False)
    assert it.per_stream_mean_tok_s == pytest.approx(60.0)
    # 2 x 17 tokens from the first send (10.0) to the last token (10.2 + 0.4 = 10.6).
    assert it.aggregate_tok_s == pytest.approx(34 / 0.6)
    assert it.window_start == 10.0
    assert it.window_end == pytest.approx(10.65)  # the later stream's end: 10.2 + 0.45


def test_iteration_aggregate_is_not_the_sum_of_stream_rates() -> None:
    # Two streams with the same rate, the second started late: the aggregate counts the
    # whole window, so it is below 2 x 40.
    records = [req(0, 5.0, 0.1, 0.5, 0.5, 40.0), req(1, 5.4, 0.1, 0.5, 0.5, 40.0)]
    it = _iteration_record(spec(), 0, False, records)
    assert it.per_stream_mean_tok_s == pytest.approx(40.0)
    assert it.aggregate_tok_s == pytest.approx(34 / 0.9)


def test_iteration_window_ignores_a_request_never_sent() -> None:
    # The client leaves sent_at at 0.0 when the connection never opened: that is no send time.
    never = RequestRecord(request_id="x", stream_index=1, sent_at=0.0, error="cannot connect")
    it = _iteration_record(spec(), 0, False, [req(0, 5.0, 0.1, 0.5, 0.6, 40.0), never])
    assert (it.window_start, it.window_end) == pytest.approx((5.0, 5.6))
    assert it.reasons == ["1/2 requests invalid; stream 1: cannot connect"]


def test_iteration_with_an_invalid_request_has_no_figures() -> None:
    records = [
        req(0, 1.0, 0.1, 0.5, 0.5, 40.0),
        req(1, 1.0, 0.1, 0.3, 0.3, 35.0, ct=8, reasons=("early stop: 8 of 17 tokens",)),
    ]
    it = _iteration_record(spec(), 2, False, records)
    assert not it.valid
    assert it.reasons == ["1/2 requests invalid; stream 1: early stop: 8 of 17 tokens"]
    assert it.per_stream_mean_tok_s is None and it.aggregate_tok_s is None


def test_iteration_request_error_is_named() -> None:
    bad = RequestRecord(request_id="x", stream_index=1, sent_at=1.0, error="HTTP 500: boom")
    it = _iteration_record(spec(), 0, False, [req(0, 1.0, 0.1, 0.5, 0.5, 40.0), bad])
    assert it.reasons == ["1/2 requests invalid; stream 1: HTTP 500: boom"]


def test_iteration_prompt_mismatch_invalidates_the_request() -> None:
    records = [req(0, 1.0, 0.1, 0.5, 0.5, 40.0), req(1, 1.0, 0.1, 0.5, 0.5, 40.0, pt=P + 3)]
    it = _iteration_record(spec(), 0, False, records)
    assert records[0].valid and not records[1].valid
    assert records[1].reasons == [
        f"prompt mismatch: server counted {P + 3} prompt tokens, expected {P}"
    ]
    assert not it.valid and it.per_stream_mean_tok_s is None


def test_iteration_prompt_mismatch_allowed() -> None:
    records = [req(0, 1.0, 0.1, 0.5, 0.5, 40.0), req(1, 1.0, 0.1, 0.5, 0.5, 40.0, pt=P + 3)]
    it = _iteration_record(spec(allow_prompt_mismatch=True), 0, False, records)
    assert it.valid and it.per_stream_mean_tok_s == pytest.approx(40.0)


# level_payload: figures over the measured iterations only.


def acc(drafts: int, draft_tokens: int, accepted: int) -> AcceptanceDelta:
    return AcceptanceDelta(
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        acceptance_rate=accepted / draft_tokens,
        mean_acceptance_length=1 + accepted / drafts,
        source="test",
    )


def iteration(
    index: int,
    warmup: bool,
    records: list[RequestRecord],
    per_stream: float | None,
    aggregate: float | None,
    acceptance: AcceptanceDelta | None = None,
    reasons: tuple[str, ...] = (),
) -> IterationRecord:
    start, end = records[0].sent_at, records[0].sent_at + 1
    if acceptance is not None:
        # the vLLM counters scraped around the window, whose delta the acceptance is (every
        # reader recomputes it from them: bench/schema/_invariants.py)
        names = (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED)
        counts = (acceptance.drafts, acceptance.draft_tokens, acceptance.accepted_tokens)
        before = MetricSnapshot(at=start - 0.01, values=dict.fromkeys(names, 0.0))
        after = MetricSnapshot(at=end + 0.01, values=dict(zip(names, counts, strict=True)))
        acceptance = acceptance.model_copy(update={"before": before, "after": after})
    return IterationRecord(
        index=index,
        warmup=warmup,
        window_start=start,
        window_end=end,
        requests=records,
        per_stream_mean_tok_s=per_stream,
        aggregate_tok_s=aggregate,
        acceptance=acceptance,
        reasons=list(reasons),
    )


def run_records() -> list[IterationRecord]:
    """A warmup that would wreck every figure, then three measured iterations at c=2:
    per-stream means 60, 50, 40; TTFT means 150, 50, 100 ms; E2E means 500, 600, 600 ms."""
    return [
        iteration(
            0,
            True,
            [req(0, 0.0, 5.0, 5.016, 6.0, 1000.0), req(1, 0.0, 5.0, 5.016, 6.0, 1000.0)],
            1000.0,
            2000.0,
            acc(1000, 4000, 4000),
        ),
        iteration(
            1,
            False,
            [req(0, 10.0, 0.1, 0.5, 0.55, 40.0), req(1, 10.2, 0.2, 0.4, 0.45, 80.0)],
            60.0,
            34 / 0.6,
            acc(10, 40, 20),
        ),
        iteration(
            2,
            False,
            [req(0, 20.0, 0.05, 0.25, 0.3, 80.0), req(1, 20.0, 0.05, 0.85, 0.9, 20.0)],
            50.0,
            40.0,
            acc(12, 48, 30),
        ),
        iteration(
            3,
            False,
            [req(0, 30.0, 0.1, 0.5, 0.6, 40.0), req(1, 30.0, 0.1, 0.5, 0.6, 40.0)],
            40.0,
            68.0,
            acc(8, 32, 10),
        ),
    ]


def build(iterations: list[IterationRecord], **kw: object) -> Payload:
    return level_payload(spec(**kw), iterations, "prompt", False, "2026-01-01T00:00:00+00:00", [])


def test_figures_over_measured_iterations_only() -> None:
    p = build(run_records())
    assert p.evidence.validity.valid and p.evidence.validity.reasons == []
    assert p.samples == [60.0, 50.0, 40.0]
    assert p.tokSOut == pytest.approx(50.0)
    assert p.ttftMs == pytest.approx(100.0)
    d = p.evidence.figures.decode_tok_s
    assert d is not None
    assert (d.n, d.mean, d.median, d.min, d.max) == (3, 50.0, 50.0, 40.0, 60.0)
    assert d.stddev == pytest.approx(10.0)
    half = T_975_DF2 * 10.0 / math.sqrt(3)
    assert (d.ci95_low, d.ci95_high) == pytest.approx((50 - half, 50 + half))
    s = p.sampleStats
    assert (s.min, s.p50, s.mean, s.max) == (40.0, 50.0, 50.0, 60.0)
    assert s.stddev == pytest.approx(10.0)
    ttft, e2e, agg = (
        p.evidence.figures.ttft_ms,
        p.evidence.figures.e2e_ms,
        p.evidence.figures.aggregate_tok_s,
    )
    assert ttft is not None and e2e is not None and agg is not None
    assert (ttft.n, ttft.min, ttft.max) == pytest.approx((3, 50.0, 150.0))
    assert e2e.mean == pytest.approx((500 + 600 + 600) / 3)
    assert agg.mean == pytest.approx((34 / 0.6 + 40 + 68) / 3)
    assert (agg.min, agg.max) == (40.0, 68.0)
    # tokSTotal: (P + M) tokens over each measured request's E2E, averaged over requests.
    e2e_s = [0.55, 0.45, 0.3, 0.9, 0.6, 0.6]
    assert p.tokSTotal == pytest.approx(sum(81 / t for t in e2e_s) / 6)
    assert (p.promptTokens, p.outputTokens, p.engineFlags.concurrency) == (P, M, 2)
    assert p.outputSha256 == "ab" * 32
    assert len(p.evidence.iterations) == 4  # raw records kept, warmup included
    assert not p.simulated and not p.evidence.run.simulated
    assert check_payload(p) == []


def test_acceptance_is_summed_over_measured_windows() -> None:
    p = build(run_records())
    a = p.evidence.acceptance
    assert a is not None
    # 10+12+8 drafts, 40+48+32 draft tokens, 20+30+10 accepted; the warmup's huge delta is out.
    assert (a.drafts, a.draft_tokens, a.accepted_tokens) == (30, 120, 60)
    assert a.acceptance_rate == pytest.approx(0.5)
    assert a.mean_acceptance_length == pytest.approx(3.0)
    f = p.engineFlags
    assert (f.specDecoding, f.specMethod, f.specNumTokens) == (True, "DFLASH", 4)
    assert (f.specDraftTokens, f.specAcceptedTokens) == (120, 60)
    assert f.specAcceptanceRate == pytest.approx(0.5)
    assert f.specMeanAcceptedLength == pytest.approx(3.0)


def test_invalid_iteration_makes_the_run_invalid_and_leaves_the_figures() -> None:
    its = run_records()
    bad = its[2]
    bad.requests[1].reasons = ["early stop"]
    bad.reasons = ["1/2 requests invalid; stream 1: early stop"]
    bad.per_stream_mean_tok_s = None
    bad.aggregate_tok_s = None
    p = build(its)
    v = p.evidence.validity
    assert not v.valid
    assert [(r.code, r.severity) for r in v.reasons] == [("invalid_iteration", "invalid")]
    assert v.reasons[0].message == "iteration 2: 1/2 requests invalid; stream 1: early stop"
    # Figures over the two valid measured iterations (1 and 3), acceptance likewise.
    assert p.samples == [60.0, 40.0]
    assert p.tokSOut == pytest.approx(50.0)
    assert p.ttftMs == pytest.approx(125.0)
    a = p.evidence.acceptance
    assert a is not None and (a.drafts, a.draft_tokens, a.accepted_tokens) == (18, 72, 30)
    problems = check_payload(p)
    assert [x.path for x in problems] == ["$.evidence.validity.valid"]


def test_no_valid_iteration() -> None:
    its = run_records()
    for it in its[1:]:
        it.reasons = ["1/2 requests invalid; stream 0: HTTP 500"]
        it.per_stream_mean_tok_s = it.aggregate_tok_s = None
    p = build(its)
    codes = [r.code for r in p.evidence.validity.reasons]
    assert codes == ["invalid_iteration"] * 3 + ["no_valid_iteration"]
    f = p.evidence.figures
    assert (f.decode_tok_s, f.ttft_ms, f.e2e_ms, f.aggregate_tok_s) == (None, None, None, None)
    assert (p.tokSOut, p.ttftMs, p.samples, p.tokSTotal) == (0.0, 0.0, [], None)
    assert p.evidence.acceptance is None and p.outputSha256 == ""


def test_zero_acceptance_with_speculation_on_is_invalid() -> None:
    its = run_records()
    for it in its[1:]:
        it.acceptance = AcceptanceDelta(drafts=5, draft_tokens=20, accepted_tokens=0, source="t")
    p = build(its)
    v = p.evidence.validity
    assert not v.valid
    assert [r.code for r in v.reasons] == ["zero_acceptance"]
    assert "0 accepted tokens over 15 drafts" in v.reasons[0].message
    assert p.engineFlags.specAcceptedTokens == 0 and p.engineFlags.specAcceptanceRate == 0.0


def test_speculation_without_counters_is_a_warning() -> None:
    its = run_records()
    for it in its:
        it.acceptance = None
    p = build(its)
    assert p.evidence.validity.valid
    assert "no speculative-decoding counters on /metrics: acceptance unknown" in (
        p.evidence.warnings
    )
    assert p.engineFlags.specAcceptedTokens is None


def test_no_speculation() -> None:
    its = run_records()
    for it in its:
        it.acceptance = None
    p = build(its, spec_method="none", spec_num_tokens=None)
    f = p.engineFlags
    assert (f.specDecoding, f.specMethod, f.specDraftTokens) == (False, "NONE", None)
    assert p.evidence.validity.valid and p.evidence.warnings == []


def test_emulator_makes_the_payload_simulated() -> None:
    p = level_payload(spec(), run_records(), "prompt", True, "2026-01-01T00:00:00+00:00", [])
    assert p.simulated and p.evidence.run.simulated


def test_allowed_prompt_mismatch_is_a_warning() -> None:
    its = run_records()
    its[1].requests[0].prompt_tokens = P + 2
    p = build(its, allow_prompt_mismatch=True)
    assert p.evidence.validity.valid
    assert [w for w in p.evidence.warnings if w.startswith("prompt mismatch allowed")] == [
        f"prompt mismatch allowed: server counted [{P}, {P + 2}] prompt tokens, requested {P}"
    ]


def test_allowed_prompt_mismatch_does_not_warn_about_missing_counts() -> None:
    # A request without usage is invalid for its own reason; it is no prompt mismatch.
    its = run_records()
    its[1].requests[0].prompt_tokens = None
    its[1].requests[0].reasons = ["missing usage"]
    its[1].reasons = ["1/2 requests invalid; stream 0: missing usage"]
    p = build(its, allow_prompt_mismatch=True)
    assert not any(w.startswith("prompt mismatch") for w in p.evidence.warnings)
