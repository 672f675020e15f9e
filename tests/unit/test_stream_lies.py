"""bench.measure (client): streams that are not what they claim (issues 39 class 8, 42 class 8).

Each lie ends in a record with a named ``error`` or reason (never an exception, never a valid
record), and the healthy stream it was made from stays valid, so every test can fail both
ways."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bench.measure import RawResponse, interpret_chat_stream
from bench.measure._client import _Protocol
from bench.measure._probes import _probe

M = 3
MODEL = "served"


def chunk(delta: Any, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def usage(ct: int = M, pt: int = 10) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": pt, "completion_tokens": ct},
    }


def healthy() -> list[Any]:
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "a"}),
        chunk({"content": "b"}),
        chunk({"content": "c"}, "length"),
        usage(),
        b"[DONE]",
    ]


def raw(events: list[Any]) -> RawResponse:
    r = RawResponse(sent_at=100.0, status=200, ended_at=101.0)
    r.events = [
        (100.0 + 0.1 * (k + 1), e if isinstance(e, bytes) else json.dumps(e).encode())
        for k, e in enumerate(events)
    ]
    return r


def read(events: list[Any]) -> Any:
    return interpret_chat_stream(raw(events), "r", 0, M, model=MODEL)


def test_the_healthy_stream_is_valid_and_exact() -> None:
    rec = read(healthy())
    assert rec.valid and rec.error is None and rec.reasons == []
    assert rec.output_text == "abc" and rec.completion_tokens == M


def _edit(k: int, new: Any) -> list[Any]:
    events = healthy()
    events[k] = new
    return events


LIES: dict[str, tuple[list[Any], str]] = {
    "another model": (
        _edit(2, {**chunk({"content": "b"}), "model": "other"}),
        "names model 'other'",
    ),
    "choices an object": (
        _edit(2, {"model": MODEL, "choices": {"0": chunk("b")}}),
        "choices is an object",
    ),
    "choices a string": (_edit(2, {"model": MODEL, "choices": "b"}), "choices is a string"),
    "a choice a number": (_edit(2, {"model": MODEL, "choices": [7]}), "a choice is a number"),
    "delta an array": (_edit(2, chunk(["b"])), "delta is an array"),
    "delta a string": (_edit(2, chunk("b")), "delta is a string"),
    "content a number": (_edit(2, chunk({"content": 7})), "delta.content is a number"),
    "finish_reason an object": (
        _edit(3, chunk({"content": "c"}, {"x": 1})),
        "finish_reason is an object",
    ),  # type: ignore[arg-type]
    "usage an array": (_edit(4, {"choices": [], "usage": [M]}), "usage is an array"),
    "[DONE] first, stream goes on": ([b"[DONE]", *healthy()], "after data: [DONE]"),
    "two usage chunks disagree": (
        [*healthy()[:4], usage(M + 5), usage(), b"[DONE]"],
        "two usage chunks disagree",
    ),
    "finish_reason mid-stream, then tokens": (
        _edit(1, chunk({"content": "a"}, "stop")),
        "after finish_reason='stop'",
    ),
    "a second choice in every chunk": (
        [
            {**c, "choices": [*c["choices"], {**c["choices"][0], "index": 1}]}
            if isinstance(c, dict) and c["choices"]
            else c
            for c in healthy()
        ],
        "2 choice(s)",
    ),
}


@pytest.mark.parametrize("events,needle", list(LIES.values()), ids=list(LIES))
def test_a_lying_stream_ends_in_a_named_error(events: list[Any], needle: str) -> None:
    rec = read(events)
    assert not rec.valid
    assert rec.error is not None and needle in rec.error, rec.error


def test_every_token_chunk_sent_twice_is_invalid() -> None:
    # the text doubles while usage counts M: more token chunks than tokens
    events = healthy()
    doubled = [events[0], events[1], events[1], events[2], events[2], *events[3:]]
    rec = read(doubled)
    assert not rec.valid and rec.output_text == "aabbc"
    assert any("5 chunks carried text but usage counts 3" in r for r in rec.reasons), rec.reasons
    # a chunk carrying several tokens (SGLang's stream interval, speculation) is not a lie
    few = [events[0], chunk({"content": "abc"}, "length"), *events[4:]]
    assert read(few).reasons == ["all tokens arrived in one chunk: decode rate undefined"]


def test_identical_usage_twice_and_no_model_field_are_legal() -> None:
    events = healthy()
    assert read([*events[:5], usage(), b"[DONE]"]).valid
    anonymous = [
        {k: v for k, v in e.items() if k != "model"} if isinstance(e, dict) else e for e in events
    ]
    assert read(anonymous).valid
    # without a model to check against (the logprob probes' callers), any name passes
    assert interpret_chat_stream(
        raw(_edit(2, {**chunk({"content": "b"}), "model": "x"})), "r", 0, M
    ).valid


def test_usage_details_of_the_wrong_type_are_ignored_not_a_crash() -> None:
    u = usage()
    u["usage"]["completion_tokens_details"] = ["reasoning"]
    rec = read(_edit(4, u))
    assert rec.valid and rec.reasoning_tokens is None


def _feed(*parts: bytes) -> RawResponse:
    async def go() -> RawResponse:
        r = RawResponse(sent_at=100.0)
        p = _Protocol(r, sse=True)
        for part in parts:
            p.data_received(part)
        p.connection_lost(None)
        return r

    return asyncio.run(go())


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"


def _body(events: list[Any]) -> bytes:
    return b"".join(
        b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n"
        for e in events
    )


def test_events_without_their_data_field_are_not_dropped_silently() -> None:
    events = _body(healthy()).split(b"\n\n")
    events[2] = events[2].removeprefix(b"data: ")  # the token "b" without its field name
    r = _feed(HEAD, b"\n\n".join(events))
    assert r.stray_count == 1
    rec = interpret_chat_stream(r, "r", 0, M, model=MODEL)
    assert not rec.valid and rec.error is not None
    assert rec.error.startswith('1 SSE line(s) without a data: field (first: \'{"id": "c1"')
    # comments (keep-alives) and blank lines are SSE, not lies
    ok = _feed(HEAD, b": ping\n\n" + _body(healthy()) + b":\n\n")
    assert ok.stray_count == 0 and len(ok.events) == len(healthy())
    rec = interpret_chat_stream(ok, "r", 0, M, model=MODEL)
    # one read: every token at one instant, the only reason left
    assert rec.error is None and rec.output_text == "abc"
    assert rec.reasons == ["all tokens arrived in one chunk: decode rate undefined"]


def test_nesting_deeper_than_the_stack_is_a_malformed_event() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    rec = read(_edit(2, deep))
    assert not rec.valid and rec.error is not None
    assert rec.error.startswith("malformed SSE event #2")


@pytest.mark.parametrize(
    "logprobs",
    [
        ["a"],
        {"content": ["tok"]},
        {"content": [{"token": "a"}]},
        {"content": [{"token": "a", "logprob": "x"}]},
    ],
    ids=["an array", "entries strings", "no logprob", "logprob not a number"],
)
def test_logprob_answers_of_the_wrong_shape_are_a_probe_error(logprobs: Any) -> None:
    answer = {
        "choices": [{"message": {"content": "a"}, "logprobs": logprobs}],
        "usage": {"completion_tokens": 1},
    }
    r = RawResponse(status=200, body=json.dumps(answer).encode())
    probe = _probe(r, "prompt", 1)
    assert probe.error is not None and probe.error.startswith("bad logprobs")


def test_legal_sse_fields_and_multi_line_data() -> None:
    # id/event/retry lines and comments are SSE; data lines of one event join with newlines
    events = _body(healthy()).split(b"\n\n")
    events[1] = b"id: 7\nevent: message\nretry: 100\n" + events[1]
    events[2] = events[2].replace(b'"model": ', b'\ndata: "model": ', 1)
    r = _feed(HEAD, b"\n\n".join(events))
    assert r.stray_count == 0 and len(r.events) == len(healthy())
    rec = interpret_chat_stream(r, "r", 0, M, model=MODEL)
    assert rec.error is None and rec.output_text == "abc"


def test_a_flooding_server_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.measure._client.MAX_STREAM_BYTES", 4096)
    flood = b"data: " + json.dumps(chunk({"content": "x" * 100})).encode() + b"\n\n"
    r = _feed(HEAD, *([flood] * 40))
    assert r.error == "response larger than 0.00390625 MiB" and len(r.events) < 40
    rec = interpret_chat_stream(r, "r", 0, M, model=MODEL)
    assert rec.error == f"stream broken: {r.error}"
