"""bench.measure (client): whole RequestRecords from known events, field by field, and the arrival
stamps of the parser (branches found by mutation testing, docs/MUTATION.md).

Times are typed as offsets from a ``sent_at`` of 100 s, so every relative figure below is the
offset itself: TTFT 0.2 s -> 200 ms, decode (4 - 1) tokens over 0.3 s -> 10 tok/s."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Any

import pytest

from bench.measure import RawResponse, interpret_chat_stream
from bench.measure._client import _Protocol

SENT = 100.0


def ev(offset: float, obj: Any) -> tuple[float, bytes]:
    return (SENT + offset, obj if isinstance(obj, bytes) else json.dumps(obj).encode())


def delta(**d: str) -> dict[str, Any]:
    return {"choices": [{"delta": d}]}


def raw(*events: tuple[float, bytes], status: int | None = 200, **kw: Any) -> RawResponse:
    r = RawResponse(sent_at=SENT, status=status, ended_at=SENT + 1.25, **kw)
    r.events = list(events)
    return r


USAGE = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 4}}


def test_a_healthy_stream_field_by_field() -> None:
    usage = {
        "choices": [],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "completion_tokens_details": {"reasoning_tokens": 4},
        },
    }
    r = raw(
        ev(0.1, delta(role="assistant")),
        ev(0.2, {"choices": [{"delta": {"reasoning_content": "ab", "content": "c"}}]}),
        ev(0.5, {"choices": [{"delta": {"content": "de"}, "finish_reason": "length"}]}),
        ev(0.6, usage),
        ev(0.7, b"[DONE]"),
    )
    rec = interpret_chat_stream(r, "req-7", 3, 4)
    assert rec.valid and rec.reasons == [] and rec.error is None
    assert (rec.request_id, rec.stream_index, rec.http_status) == ("req-7", 3, 200)
    assert rec.sent_at == SENT
    assert rec.ended_at == pytest.approx(1.25) and rec.e2e_ms == pytest.approx(1250.0)
    assert rec.chunk_times == pytest.approx([0.1, 0.2, 0.5, 0.6])
    assert rec.chunk_chars == [0, 3, 2, 0]
    assert rec.first_token_at == pytest.approx(0.2) and rec.last_token_at == pytest.approx(0.5)
    assert rec.ttft_ms == pytest.approx(200.0)
    assert rec.decode_tok_s == pytest.approx(3 / 0.3)
    # within a delta: content, then reasoning_content, then reasoning
    assert rec.output_text == "cabde"
    assert rec.output_sha256 == hashlib.sha256(b"cabde").hexdigest()
    assert rec.finish_reason == "length"
    assert (rec.prompt_tokens, rec.completion_tokens, rec.reasoning_tokens) == (10, 4, 4)


def test_http_and_transport_failures_are_spelled_out() -> None:
    empty = interpret_chat_stream(raw(status=503, body=b""), "r", 0, 4)
    assert empty.error == "HTTP 503: (empty body)" and empty.http_status == 503
    assert empty.ended_at == pytest.approx(1.25)
    bad_utf8 = interpret_chat_stream(raw(status=500, body=b"oops \xff\n  x"), "r", 0, 4)
    assert bad_utf8.error == "HTTP 500: oops \ufffd x"
    assert interpret_chat_stream(raw(status=None, error="refused"), "r", 0, 4).error == "refused"
    assert interpret_chat_stream(raw(status=None), "r", 0, 4).error == "no response"
    html = interpret_chat_stream(raw(body=b"<html>\n \xff</html>"), "r", 0, 4)
    assert html.error == "response is not an SSE stream: <html> \ufffd</html>"
    # events and a body: the events are read, the body is ignored
    both = raw(ev(0.1, delta(content="x")), ev(0.2, USAGE), ev(0.3, b"[DONE]"), body=b"junk")
    assert interpret_chat_stream(both, "r", 0, 4).error is None


def test_malformed_events_stop_the_reading() -> None:
    long = b"\xff" + b"y" * 100
    rec = interpret_chat_stream(
        raw(ev(0.1, delta(content="x")), (SENT + 0.2, long), ev(0.3, delta(content="z"))), "r", 0, 4
    )
    assert rec.error == "malformed SSE event #1: \ufffd" + "y" * 76 + "..."
    assert rec.chunk_times == pytest.approx([0.1]) and rec.output_text == "x"
    arr = interpret_chat_stream(raw(ev(0.1, [1]), ev(0.2, delta(content="z"))), "r", 0, 4)
    assert arr.error == "malformed SSE event #0: not a JSON object" and arr.chunk_times == []


def test_server_error_events() -> None:
    plain = interpret_chat_stream(raw(ev(0.1, {"error": "overloaded"})), "r", 0, 4)
    assert plain.error == "server error event: overloaded"
    coded = interpret_chat_stream(raw(ev(0.1, {"error": {"code": 7}})), "r", 0, 4)
    assert coded.error == "server error event: {'code': 7}"
    # an error field next to real choices is not an error event
    mixed = {"error": "x", "choices": [{"delta": {"content": "a"}}]}
    rec = interpret_chat_stream(raw(ev(0.1, mixed), ev(0.2, USAGE)), "r", 0, 4)
    assert rec.error == "stream ended without data: [DONE] (disconnect)"
    assert rec.output_text == "a"


def test_a_broken_stream_after_done() -> None:
    r = raw(ev(0.1, delta(content="x")), ev(0.2, USAGE), ev(0.3, b"[DONE]"), error="reset")
    assert interpret_chat_stream(r, "r", 0, 4).error == "stream broken: reset"


def test_usage_problems_are_reasons() -> None:
    no_content = interpret_chat_stream(raw(ev(0.1, USAGE), ev(0.2, b"[DONE]")), "r", 0, 4)
    assert no_content.reasons == ["no chunk carried content or reasoning content"]
    assert no_content.ttft_ms is None and no_content.prompt_tokens == 10
    no_usage = interpret_chat_stream(
        raw(ev(0.1, delta(content="x")), ev(0.2, b"[DONE]")), "r", 0, 4
    )
    assert no_usage.reasons == [
        "missing usage (stream_options.include_usage ignored by the server)"
    ]
    half = {"choices": [], "usage": {"prompt_tokens": 10}}
    rec = interpret_chat_stream(
        raw(ev(0.1, delta(content="x")), ev(0.2, half), ev(0.3, b"[DONE]")), "r", 0, 4
    )
    assert rec.reasons == ["usage without completion_tokens"] and rec.prompt_tokens == 10
    # reasoning tokens equal to the completion tokens are consistent
    all_thought = {
        "choices": [],
        "usage": {"completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 2}},
    }
    rec = interpret_chat_stream(
        raw(
            ev(0.1, delta(content="x")),
            ev(0.3, delta(content="y")),
            ev(0.4, all_thought),
            ev(0.5, b"[DONE]"),
        ),
        "r",
        0,
        2,
    )
    assert rec.valid and rec.reasons == []
    # 2 tokens: (2 - 1) / (0.3 - 0.1) s
    assert rec.decode_tok_s == pytest.approx(5.0)


def test_one_token_and_one_chunk() -> None:
    one = {"choices": [], "usage": {"completion_tokens": 1}}
    rec = interpret_chat_stream(
        raw(ev(0.1, delta(content="x")), ev(0.2, one), ev(0.3, b"[DONE]")), "r", 0, 1
    )
    assert rec.valid and rec.reasons == [] and rec.decode_tok_s is None
    rec = interpret_chat_stream(
        raw(ev(0.1, delta(content="wxyz")), ev(0.2, USAGE), ev(0.3, b"[DONE]")), "r", 0, 4
    )
    assert rec.reasons == ["all tokens arrived in one chunk: decode rate undefined"]
    assert rec.decode_tok_s is None


def _feed(parts: list[bytes], sse: bool = True) -> tuple[RawResponse, list[float]]:
    """Feed ``parts`` one by one; returns the response and perf_counter() before each part."""

    async def go() -> tuple[RawResponse, list[float]]:
        r = RawResponse()
        proto = _Protocol(r, sse=sse)
        stamps = []
        for p in parts:
            stamps.append(time.perf_counter())
            proto.data_received(p)
            time.sleep(0.002)
        return r, stamps

    return asyncio.run(go())


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


def test_arrival_stamps_are_the_moment_each_part_arrived() -> None:
    chunked = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    first = b'e\r\ndata:{"a":1}\n\n\r\n'  # no space after "data:"
    second = b"b\r\ndata: b\r\n\r\n\r\n0\r\n\r\n"  # CRLF-framed event: the slow path
    r, stamps = _feed([chunked, first, second])
    assert [e for _, e in r.events] == [b'{"a":1}', b"b"]
    assert r.first_byte_at is not None and stamps[0] < r.first_byte_at < stamps[1]
    assert stamps[1] < r.events[0][0] < stamps[2] < r.events[1][0]
    assert r.complete and r.ended_at is not None and r.ended_at >= r.events[1][0]
    # read-until-close SSE: stamped the same way
    plain, stamps = _feed([HEAD + b"\r\n", b"data: x\n\n", b"data: y\n\n"])
    assert [e for _, e in plain.events] == [b"x", b"y"]
    assert stamps[1] < plain.events[0][0] < stamps[2] < plain.events[1][0]


def test_headers_and_bodies_at_their_limits() -> None:
    r, _ = _feed([b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * (64 * 1024)])
    assert r.error == "response headers too large"
    ok, _ = _feed([b"HTTP/1.1 200 OK\r\nX: " + b"a" * (64 * 1024 - 20)])
    assert ok.error is None
    body = b"x" * 10
    cl, _ = _feed([b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n" + body[:1]])
    assert cl.complete and cl.body == b"x"
    two, _ = _feed([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nx", b"y"])
    assert two.complete and two.body == b"xy"
    ext, _ = _feed(
        [HEAD + b"Transfer-Encoding: chunked\r\n\r\n9;ext=1;more\r\ndata: q\n\n\r\n0\r\n\r\n"]
    )
    assert [e for _, e in ext.events] == [b"q"] and ext.complete


def test_slow_path_events_blank_blocks_and_field_lines() -> None:
    # read-until-close SSE: an empty event first, a field without a space, an id line
    r, _ = _feed([HEAD + b"\r\n", b"\n\ndata:xy\n\n", b"id: 1\ndata: z\n\n"])
    assert [e for _, e in r.events] == [b"xy", b"z"]


def test_a_plain_body_has_a_size_limit() -> None:
    limit = 16 * 1024 * 1024
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
    ok, _ = _feed([head, b"x" * limit])
    assert ok.error is None and len(bytes(ok.body)) == 0  # not finished: no Content-Length
    big, _ = _feed([head, b"x" * limit, b"y"])
    assert big.error == "response body too large"


CHUNKED = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def test_chunked_framing_edges() -> None:
    # a non-SSE chunked body that looks like an event stays a body
    err = b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n"
    r, _ = _feed([err + _chunk(b"data: x\n\n") + b"0\r\n\r\n"], sse=True)
    assert r.events == [] and r.body == b"data: x\n\n" and r.complete
    # an event line left open in one chunk joins the next chunk's lines (two data lines of
    # one event: one event, joined by a newline, as the SSE standard has it)
    r, _ = _feed([CHUNKED + _chunk(b"data: a\n"), _chunk(b"data: b\n\n") + b"0\r\n\r\n"])
    assert [e for _, e in r.events] == [b"a\nb"]
    # ... and so within one read: after a chunk that left a line open, the next whole-event
    # chunk must not take the fast path past it (mutmut's _feed_chunked 87 and 88)
    one_read = CHUNKED + _chunk(b"data: a\n") + _chunk(b"data: b\n\n") + b"0\r\n\r\n"
    r, _ = _feed([one_read])
    assert [e for _, e in r.events] == [b"a\nb"]
    # an empty size line is bad framing, said at once
    r, _ = _feed([CHUNKED + b"\r\n5\r\n"])
    assert r.error == "bad chunk size b''"
    r, _ = _feed([CHUNKED + b"z" * 30 + b"\r\n"])
    assert r.error == "bad chunk size b'" + "z" * 20 + "'"
    # a response that starts with the blank line has no status line
    r, _ = _feed([b"\r\n\r\n"])
    assert r.error == "not an HTTP/1.x response: ''"


def test_chunk_split_across_three_reads() -> None:
    first, second = _chunk(b"data: one\n\n"), _chunk(b"data: two\n\n")
    # the first read ends inside chunk one; the second completes it exactly; the third is two
    r, _ = _feed([CHUNKED + first[:6], first[6:], second + b"0\r\n\r\n"])
    assert [e for _, e in r.events] == [b"one", b"two"] and r.complete
