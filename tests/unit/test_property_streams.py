"""The property tier (issue 42), servers' side: generated HTTP responses fed to the streaming
client's parser (bench.measure: the HTTP/SSE protocol and interpret_chat_stream) and generated
/metrics bodies fed to the counter reader, as pure functions. Whatever a server sends, the
answer is a RequestRecord (valid, or invalid with its reason) or a MetricsRead (values, or a
named problem): never an exception. Legal variations of one stream (where the TCP packets
split it, chunked or read-until-close) give the same record. Seeded and bounded.

Crashes found here in code other helpers own are marked xfail(strict=True) with the example,
so that their fix turns the mark into a failure to remove.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.measure._acceptance import (
    METRICS,
    SGLANG_VERIFY,
    VLLM_DRAFTS,
    VLLM_PER_POS,
    delta,
    read_metrics,
    snapshot,
)
from bench.measure._client import RawResponse, _Protocol, interpret_chat_stream
from bench.schema import RequestRecord

PROPERTY = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow],
)
MODEL = "served"
MAX_TOKENS = 8

# -- building responses ----------------------------------------------------------------------


def _chunk(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def _delta(text: str) -> dict[str, Any]:
    return {"model": MODEL, "choices": [{"index": 0, "delta": {"content": text}}]}


def _usage(tokens: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": 12},
    }


def _http(events: bytes, cuts: list[int], chunked: bool) -> bytes:
    """An HTTP response carrying ``events``: chunked at ``cuts`` (HTTP/1.1), or an HTTP/1.0
    body read until the connection closes."""
    if not chunked:
        return b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + events
    pieces, last = [], 0
    for c in [*sorted(set(cuts)), len(events)]:
        if last < c <= len(events):
            pieces.append(events[last:c])
            last = c
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"
    return head + b"\r\n\r\n" + body


def feed(response: bytes, packets: list[int]) -> RawResponse:
    """``response`` through the client's protocol, cut into TCP packets at ``packets``; then
    the connection closes."""

    async def go() -> RawResponse:
        raw = RawResponse(sent_at=time.perf_counter())
        proto = _Protocol(raw, sse=True)
        last = 0
        for c in [*sorted(set(packets)), len(response)]:
            if last < c <= len(response):
                proto.data_received(response[last:c])
                last = c
        proto.connection_lost(None)
        return raw

    return asyncio.run(go())


def record(response: bytes, packets: list[int]) -> RequestRecord:
    return interpret_chat_stream(feed(response, packets), "r", 0, MAX_TOKENS, MODEL)


def outcome(rec: RequestRecord) -> tuple[Any, ...]:
    """What a record says, without its clock readings (nor the one verdict that depends on
    them: every token in one arrival leaves the decode rate undefined)."""
    return (
        rec.error,
        tuple(r for r in rec.reasons if "one chunk" not in r),
        rec.output_text,
        rec.completion_tokens,
        rec.finish_reason,
        tuple(rec.chunk_chars),
    )


# A piece of text with multi-byte characters (a UTF-8 character split across packets is legal).
PIECES = st.text(alphabet=st.sampled_from('ab é中😀\n"'), min_size=1, max_size=4)


@st.composite
def honest_stream(draw: st.DrawFn) -> bytes:
    pieces = draw(st.lists(PIECES, min_size=1, max_size=MAX_TOKENS))
    body = b"".join(_chunk(_delta(p)) for p in pieces)
    return body + _chunk(_usage(MAX_TOKENS)) + b"data: [DONE]\n\n"


@PROPERTY
@given(honest_stream(), st.booleans(), st.lists(st.integers(0, 400), max_size=6), st.data())
def test_where_packets_split_a_stream_changes_nothing(
    events: bytes, chunked: bool, cuts: list[int], data: st.DataObject
) -> None:
    response = _http(events, cuts, chunked)
    whole = record(response, [])
    packets = data.draw(st.lists(st.integers(1, len(response) - 1), max_size=8))
    split = record(response, packets)
    assert outcome(split) == outcome(whole)
    assert whole.error is None, whole.error


# -- streams that lie --------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**6), max_value=10**6),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = st.sampled_from(["model", "choices", "usage", "error", "object", "id"])
CHOICE = st.fixed_dictionaries(
    {},
    optional={
        "index": st.one_of(st.integers(0, 2), JSON_VALUES),
        "delta": st.one_of(
            st.fixed_dictionaries(
                {}, optional={"content": st.one_of(PIECES, JSON_VALUES), "role": st.just("x")}
            ),
            JSON_VALUES,
        ),
        "finish_reason": st.one_of(st.none(), st.sampled_from(["length", "stop"]), JSON_VALUES),
    },
)
EVENT_OBJ = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.just(MODEL), st.just("other"), JSON_VALUES),
        "choices": st.one_of(st.lists(CHOICE, max_size=2), JSON_VALUES),
        "usage": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "completion_tokens": st.one_of(
                        st.just(MAX_TOKENS), st.integers(-5, 10**6), JSON_VALUES
                    ),
                    "prompt_tokens": st.one_of(st.integers(0, 10), JSON_VALUES),
                    "completion_tokens_details": JSON_VALUES,
                },
            ),
            JSON_VALUES,
        ),
        "error": JSON_VALUES,
    },
)
LINE = st.one_of(
    EVENT_OBJ.map(_chunk),
    st.just(b"data: [DONE]\n\n"),
    JSON_VALUES.map(_chunk),
    st.binary(max_size=30),
    st.sampled_from([b": keep-alive\n\n", b"event: x\n\n", b"data:\n\n", b"\n\n", b"\r\n"]),
)


@PROPERTY
@given(st.lists(LINE, max_size=10), st.booleans(), st.lists(st.integers(0, 300), max_size=4))
def test_whatever_a_server_streams_the_answer_is_a_record(
    lines: list[bytes], chunked: bool, cuts: list[int]
) -> None:
    rec = record(_http(b"".join(lines), cuts, chunked), [])
    if rec.valid:
        # a valid record is never a guess: every token counted, text streamed, clocks in order
        assert rec.completion_tokens == MAX_TOKENS
        assert rec.output_text
        assert rec.first_token_at is not None and rec.last_token_at is not None
        assert rec.first_token_at <= rec.last_token_at


@settings(PROPERTY, max_examples=100)
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=5))
def test_arbitrary_bytes_on_the_connection(response: bytes, packets: list[int]) -> None:
    rec = record(response, packets)
    assert not rec.valid


def test_a_usage_count_past_a_floats_range_is_no_crash() -> None:
    events = (
        _chunk(_delta("ab")) + _chunk(_delta("cd")) + _chunk(_usage(10**400)) + b"data: [DONE]\n\n"
    )
    rec = interpret_chat_stream(feed(_http(events, [], True), [5]), "r", 0, 10**400, MODEL)
    assert rec.decode_tok_s is None or math.isfinite(rec.decode_tok_s)


# -- /metrics bodies -----------------------------------------------------------------------------

# values up to 1e12: no sum of a few overflows (an overflowing sum is a case below)
METRIC_VALUES = st.one_of(
    st.integers(0, 10**6).map(str),
    st.floats(min_value=0, max_value=1e12).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "-1", "1e400", "abc", "", "0x1"]),
)


@st.composite
def metrics_body(draw: st.DrawFn, engine: str) -> str:
    names = [*METRICS[engine], "other_metric", "vllm:num_requests_running"]
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        name = draw(st.sampled_from(names))
        labels: list[str] = []
        model = draw(st.sampled_from([MODEL, "other", None]))
        if model is not None:
            labels.append(f'model_name="{model}"')
        if name == VLLM_PER_POS:
            labels.append(f'position="{draw(st.integers(0, 4))}"')
        if draw(st.booleans()):
            labels.append('engine="0"')
        text = f"{name}{{{','.join(labels)}}}" if labels else name
        lines.append(f"{text} {draw(METRIC_VALUES)}")
    lines += draw(st.lists(st.sampled_from(["# HELP x y", "# TYPE x counter", "", "<html>"])))
    order = draw(st.permutations(lines))
    return "\n".join(order) + "\n"


@PROPERTY
@given(st.sampled_from(["vllm", "sglang"]), st.data())
def test_whatever_metrics_says_the_read_is_values_or_a_problem(
    engine: str, data: st.DataObject
) -> None:
    body = data.draw(metrics_body(engine))
    got = read_metrics(body, METRICS[engine], MODEL)
    assert all(math.isfinite(v) for v in got.values.values())
    assert got.problem is None or got.problem


@PROPERTY
@given(st.sampled_from(["vllm", "sglang"]), st.data())
def test_a_window_of_generated_counters_is_a_delta_or_none(
    engine: str, data: st.DataObject
) -> None:
    before = snapshot(engine, data.draw(metrics_body(engine)), MODEL)
    after = snapshot(engine, data.draw(metrics_body(engine)), MODEL)
    got = delta(engine, before, after, data.draw(st.sampled_from([None, 1, 3])))
    if got is not None:
        assert got.drafts >= 0 and got.draft_tokens >= 0 and got.accepted_tokens >= 0


@pytest.mark.parametrize(
    "body",
    [
        # both found by this tier; read_metrics now names them as problems (no longer xfail)
        pytest.param(
            f'{VLLM_DRAFTS} 10\n{VLLM_PER_POS}{{position="x"}} 3\n', id="position-not-an-integer"
        ),
        pytest.param(f"{VLLM_DRAFTS} 1e308\n{VLLM_DRAFTS} 1e308\n", id="sum-overflows"),
        pytest.param(f"{SGLANG_VERIFY} 5\n", id="sglang-verify-only"),
    ],
)
def test_counter_bodies_found_by_the_property_tier(body: str) -> None:
    engine = "sglang" if body.startswith(SGLANG_VERIFY) else "vllm"
    before = snapshot(engine, "", MODEL)
    after = snapshot(engine, body, MODEL)
    delta(engine, before, after, 3)
