"""A server that dies between the client's connect and its send (issue 38, fault 6: the real
vLLM CPU engine killed mid-iteration; Docker's port proxy still accepted the next iteration's
connections and closed them at once): the request is a failed record naming it, never a
record whose end precedes its send (that was a ValidationError, an internal error that ended
the whole matrix)."""

from __future__ import annotations

import pytest

from bench.measure._client import RawResponse, interpret_chat_stream

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("error", [None, "connection lost: [Errno 104] Connection reset by peer"])
def test_a_connection_closed_before_the_send_is_a_named_failure(error: str | None) -> None:
    raw = RawResponse(sent_at=100.0, ended_at=100.0 - 1e-4, error=error)
    rec = interpret_chat_stream(raw, "it2-s0", 0, max_tokens=16, model="m")
    assert not rec.valid
    assert rec.error is not None
    assert rec.error.startswith("the connection closed before the request was sent")
    assert (error or "EOF") in rec.error
    assert rec.ended_at is None and rec.e2e_ms is None


def test_a_connection_closed_after_the_send_keeps_its_times() -> None:
    raw = RawResponse(sent_at=100.0, ended_at=100.5, error="connection lost")
    rec = interpret_chat_stream(raw, "it2-s0", 0, max_tokens=16, model="m")
    assert rec.error == "connection lost" and rec.ended_at == pytest.approx(0.5)
