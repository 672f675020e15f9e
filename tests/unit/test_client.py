"""bench.measure (client): HTTP/SSE framing (any split of the bytes) and the token accounting
rules."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bench.measure import RawResponse, interpret_chat_stream
from bench.measure._client import _Protocol

M = 4


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def usage(ct: int = M, pt: int = 10, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "choices": [],
        "usage": {"prompt_tokens": pt, "completion_tokens": ct, **extra},
    }


def raw(*objs: Any, status: int = 200, done: bool = True) -> RawResponse:
    r = RawResponse(sent_at=100.0, status=status, ended_at=101.0)
    events = [(100.0 + 0.1 * (k + 1), json.dumps(o).encode()) for k, o in enumerate(objs)]
    if done:
        events.append((100.9, b"[DONE]"))
    r.events = events
    return r


def test_role_only_first_chunk_is_not_a_token() -> None:
    rec = interpret_chat_stream(
        raw(
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "a b"}),
            chunk({"content": "c d"}, "length"),
            usage(),
        ),
        "r",
        0,
        M,
    )
    assert rec.valid, rec.reasons
    assert rec.ttft_ms == pytest.approx(200.0)  # the second event, not the role chunk
    # 4 tokens from usage over two chunks: (4-1) / (0.3 - 0.2) s, never the chunk count.
    assert rec.decode_tok_s == pytest.approx(30.0)
    assert rec.chunk_chars == [0, 3, 3, 0]
    assert len(rec.chunk_times) == 4


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_first_chunk_is_the_first_token(key: str) -> None:
    rec = interpret_chat_stream(
        raw(
            chunk({key: "hm"}),
            chunk({"content": "x"}),
            usage(ct=M, completion_tokens_details={"reasoning_tokens": 1}),
        ),
        "r",
        0,
        M,
    )
    assert rec.valid and rec.ttft_ms == pytest.approx(100.0)
    assert rec.reasoning_tokens == 1


def test_usage_in_last_content_chunk() -> None:
    last = chunk({"content": "z"}, "length") | {"usage": usage()["usage"]}
    rec = interpret_chat_stream(raw(chunk({"content": "y"}), last), "r", 0, M)
    assert rec.valid and rec.completion_tokens == M


@pytest.mark.parametrize(
    ("response", "needle"),
    [
        (raw(chunk({"content": "x"}), chunk({"content": "y"})), "missing usage"),
        (raw(chunk({"content": "x"}), chunk({"content": "y"}), usage(ct=2)), "early stop"),
        (raw(chunk({"content": "x"}), chunk({"content": "y"}), usage(), done=False), "[DONE]"),
        (
            raw(
                chunk({"content": "x"}),
                chunk({"content": "y"}),
                usage(completion_tokens_details={"reasoning_tokens": 9}),
            ),
            "reasoning_tokens=9",
        ),
        (raw({"error": {"message": "boom"}}), "server error event: boom"),
        (raw(chunk({"role": "assistant"}), usage()), "no chunk carried content"),
    ],
)
def test_misbehaviour_makes_the_record_invalid(response: RawResponse, needle: str) -> None:
    rec = interpret_chat_stream(response, "r", 0, M)
    assert not rec.valid
    assert needle in (rec.error or "") + " ".join(rec.reasons)


def test_malformed_and_http_errors() -> None:
    r = raw(chunk({"content": "x"}))
    r.events.insert(1, (100.15, b'{"id": "c1", "choices": ['))
    assert "malformed SSE event #1" in (interpret_chat_stream(r, "r", 0, M).error or "")
    bad = RawResponse(sent_at=1.0, status=503, body=b'{"error":\n "overloaded"}')
    assert interpret_chat_stream(bad, "r", 0, M).error == 'HTTP 503: {"error": "overloaded"}'


def _http(events: list[bytes]) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)
    return head + body + b"0\r\n\r\n"


def _feed(parts: list[bytes]) -> RawResponse:
    async def go() -> RawResponse:
        r = RawResponse()
        proto = _Protocol(r, sse=True)
        for p in parts:
            proto.data_received(p)
        return r

    return asyncio.run(go())


def test_framing_survives_any_split() -> None:
    events = [
        b'data: {"a": 1}\n\n',
        b"data: two\n\ndata: three\n\n",
        b"data: fo",
        b"ur\r\n\r\n",
        b"data: [DONE]\n\n",
    ]
    wire = _http(events)
    expected = [b'{"a": 1}', b"two", b"three", b"four", b"[DONE]"]
    whole = _feed([wire])
    assert [e for _, e in whole.events] == expected and whole.complete
    for cut in range(1, len(wire)):
        r = _feed([wire[:cut], wire[cut:]])
        assert [e for _, e in r.events] == expected, cut
        assert r.complete and r.status == 200


def test_content_length_body_and_bad_chunk_size() -> None:
    body = b'{"data": []}'
    wire = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    r = _feed([wire[:40], wire[40:]])
    assert r.complete and r.body == body and not r.events
    bad = _feed(
        [
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"
        ]
    )
    assert bad.error is not None and "bad chunk size" in bad.error
