"""The log lines a not-ready failure quotes: the server's own, not our polls of it."""

from __future__ import annotations

import pytest

from bench.matrix._launch import tail

pytestmark = pytest.mark.unit


def test_the_tail_of_a_server_that_never_got_ready_skips_our_own_polls() -> None:
    # SGLang logs every /health poll (503 until its warm-up answered): on the GPU (2026-12-06) the
    # failure's "last log lines" were 20 of those and nothing of the server's own
    own = [
        "[2026-12-06 05:42:13] INFO:     Uvicorn running on http://127.0.0.1:35501",
        '[2026-12-06 05:42:14] INFO:     127.0.0.1:34046 - "GET /model_info HTTP/1.1" 200 OK',
    ]
    polls = ['INFO:     127.0.0.1:37454 - "GET /health HTTP/1.1" 503 Service Unavailable'] * 50
    polls += ['INFO:     127.0.0.1:37454 - "GET /v1/models HTTP/1.1" 200 OK']
    text = "\n".join(own + polls)
    got = tail(text, n=20, polled=("/health", "/v1/models"))
    assert got.splitlines() == own
    assert tail(text, n=3).splitlines() == polls[-3:]  # nothing named: the plain tail
