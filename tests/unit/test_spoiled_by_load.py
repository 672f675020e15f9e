"""tests/oracles.py's spoiled_only_by_load: the one verdict a loaded machine can give a sound
emulated run (a stream read whole in one read) is told apart from every other, by the evidence."""

from __future__ import annotations

from pathlib import Path

from oracles import ONE_READ, spoiled_only_by_load

from bench.schema import Payload, ValidityReason, read_payload

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "payloads" / "vllm-dflash-c1.json"


def spoil(
    reason: str = ONE_READ,
    *,
    same_stamps: bool = True,
    code: str = "invalid_iteration",
    beside: tuple[ValidityReason, ...] = (),
) -> Payload:
    """The fixture's first measured iteration, one request invalid for ``reason``, with the
    run-level reasons ``beside`` after it."""
    p = read_payload(FIXTURE)
    it = next(i for i in p.evidence.iterations if not i.warmup)
    r = it.requests[0]
    if same_stamps:
        r.chunk_times = [r.chunk_times[0]] * len(r.chunk_times)
    r.reasons = [reason]
    it.reasons = [f"1/{len(it.requests)} requests invalid; stream 0: {reason}"]
    reason_of_run = ValidityReason(code=code, message=f"iteration {it.index}: ...")
    reasons = [reason_of_run, *beside]
    validity = p.evidence.validity.model_copy(update={"valid": False, "reasons": reasons})
    return p.model_copy(update={"evidence": p.evidence.model_copy(update={"validity": validity})})


def test_a_stream_read_whole_is_the_load_s_verdict() -> None:
    assert read_payload(FIXTURE).evidence.validity.valid  # the fixture itself is sound
    assert not spoiled_only_by_load(read_payload(FIXTURE))  # valid: nothing spoiled
    assert spoiled_only_by_load(spoil())


def test_every_other_cause_still_counts() -> None:
    assert not spoiled_only_by_load(spoil(same_stamps=False))  # the evidence disagrees
    assert not spoiled_only_by_load(spoil("early stop: completion_tokens=3 != max_tokens=4"))
    assert not spoiled_only_by_load(spoil(code="zero_acceptance"))
    p = spoil()
    p.evidence.iterations[-1].requests[0].error = "stream broken: reset"
    p.evidence.iterations[-1].reasons = ["1/1 requests invalid; stream 0: stream broken"]
    assert not spoiled_only_by_load(p)


def test_a_warning_beside_it_is_no_cause() -> None:
    """vLLM's CPU build runs eager: every engine-tier payload carries the warning
    ``cuda_graphs_not_captured``, which invalidates nothing (loaded run of 2026-12-07)."""
    eager = ValidityReason(code="cuda_graphs_not_captured", message="ran eager", severity="warning")
    assert spoiled_only_by_load(spoil(beside=(eager,)))
    also = ValidityReason(code="zero_acceptance", message="no draft accepted", severity="invalid")
    assert not spoiled_only_by_load(spoil(beside=(eager, also)))
