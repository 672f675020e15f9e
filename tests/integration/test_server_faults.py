"""Faults a server can put on `specbench run`, over real sockets on 127.0.0.1 (raw_engine.py):
a stream that stalls, 429/503 with Retry-After, an engine restart (counters backwards), /metrics
garbage or unreachable for one scrape, another model's counters, streams that lie, and the
legal framings that must stay valid and exact (issues 38 faults 1-5, 39 classes 8-10,
42 classes 7-8). Each ends in a named reason (exit 1, payload written) or a one-line error with
the server-condition exit code 3; never exit 2, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from raw_engine import (
    RawEngine,
    Write,
    answer,
    chunk,
    sse,
    stream_events,
    vllm_metrics,
)

from bench.cli import main

M = 6
HW = {
    "hwClass": "DISCRETE_GPU",
    "gpuName": "RTX 3090",
    "gpuCount": 1,
    "vramGb": 24,
    "gpus": [{"name": "RTX 3090", "vramGb": 24}],
    "cpu": "test cpu",
    "ramGb": 64,
    "os": "linux",
}


def measured(body: dict[str, Any]) -> bool:
    return int(body["max_tokens"]) > 1  # calibration requests ask for one token


def run(
    eng: RawEngine, tmp: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, dict[str, Any] | None]:
    hw = tmp / "hw.json"
    hw.write_text(json.dumps(HW))
    out = tmp / "p.json"
    args = [
        "run", "vllm", "--base-url", eng.base_url, "--hf-id", "x/y",
        "--served-model", eng.model, "--quantization", "BF16", "--hardware", str(hw),
        "--spec-method", "dflash", "--spec-num-tokens", "3", "--prompt-tokens", "24",
        "--max-tokens", str(M), "--warmup", "0", "--iterations", "2", "--out", str(out),
        "--no-telemetry", "--logprob-probes", "0", "--request-timeout", "5", *extra,
    ]  # fmt: skip
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err, json.loads(out.read_text()) if out.exists() else None


def reasons(p: dict[str, Any] | None) -> dict[str, str]:
    assert p is not None
    return {r["code"]: r["message"] for r in p["evidence"]["validity"]["reasons"]}


def chat_with(edit: Callable[[list[bytes]], list[bytes]]) -> Callable[..., list[Write]]:
    """Measured streams with ``edit`` applied to their events; calibration left alone."""

    def script(body: dict[str, Any], n: int) -> list[Write]:
        events = stream_events(body)
        return sse(edit(events) if measured(body) else events)

    return script


def test_a_stream_that_stalls_is_bounded_by_the_read_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def stall(body: dict[str, Any], n: int) -> list[Write]:
        w = sse(stream_events(body))
        if measured(body):
            w.insert(6, 3.0)  # three tokens out, then nothing
        return w

    with RawEngine(chat=stall) as eng:
        code, _err, p = run(eng, tmp_path, capsys, "--stall-timeout", "0.3")
    # cut by the stall timeout, not waited out: the server's 3 s pause ends in a whole, valid
    # stream, so a cut named after 0.3 s of silence is the timeout's (how soon after the 0.3 s
    # it fires is the machine's load, not this test's business)
    assert code == 1
    msg = reasons(p)["invalid_iteration"]
    assert "stream stalled: no bytes for 0.3 s" in msg and "after 3 event(s)" in msg


def test_429_with_retry_after_in_an_iteration_is_sent_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[int] = []

    def busy(body: dict[str, Any], n: int) -> list[Write]:
        if measured(body):
            seen.append(n)
            if len(seen) == 1:
                return answer(429, b'{"error": "busy"}', retry_after="0")
        return sse(stream_events(body))

    with RawEngine(chat=busy) as eng:
        code, err, p = run(eng, tmp_path, capsys)
    assert code == 0, err
    assert p is not None and p["evidence"]["validity"]["valid"]
    assert len(seen) == 3  # the refused iteration once more, then the second
    (note,) = [w for w in p["evidence"]["warnings"] if "Retry-After" in w]
    assert note.startswith("iteration 0: the server answered HTTP 429 (Retry-After: 0)")


def merged(writes: list[Write]) -> list[Write]:
    """The answer's bytes in one write: every token reaches the client in one read, as from
    an API server that fell behind its engine core."""
    return [b"".join(w for w in writes if isinstance(w, bytes))]


def test_an_iteration_whose_streams_arrived_merged_is_measured_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts: list[str] = []

    def behind(body: dict[str, Any], n: int) -> list[Write]:
        w = sse(stream_events(body))
        if not measured(body):
            return w
        prompts.append(body["messages"][-1]["content"])
        return merged(w) if len(prompts) == 1 else w

    with RawEngine(chat=behind) as eng:
        code, err, p = run(eng, tmp_path, capsys)
    assert code == 0, err
    assert p is not None and p["evidence"]["validity"]["valid"]
    # iteration 0 twice (the merged attempt discarded), then iteration 1
    assert len(prompts) == 3 and len(set(prompts)) == 3
    (note,) = [w for w in p["evidence"]["warnings"] if "arrived in one chunk" in w]
    assert note.startswith("iteration 0: 1/1 stream(s) (index 0) arrived in one chunk")
    assert "attempt 1 discarded" in note
    kept = [r["output_sha256"] for it in p["evidence"]["iterations"] for r in it["requests"]]
    assert len(kept) == 2  # the payload holds the attempt it measured, once per iteration


def test_streams_that_always_arrive_merged_end_invalid_after_two_more_attempts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sent: list[int] = []

    def always(body: dict[str, Any], n: int) -> list[Write]:
        w = sse(stream_events(body))
        if measured(body):
            sent.append(n)
            return merged(w)
        return w

    with RawEngine(chat=always) as eng:
        code, _err, p = run(eng, tmp_path, capsys)
    assert code == 1
    assert len(sent) == 6  # each of the two iterations sent three times
    assert "all tokens arrived in one chunk" in reasons(p)["invalid_iteration"]
    notes = [w for w in p["evidence"]["warnings"] if "arrived in one chunk" in w]  # type: ignore[index]
    assert [n.split(":")[0] for n in notes] == ["iteration 0"] * 2 + ["iteration 1"] * 2


@pytest.mark.parametrize("status", [429, 503])
def test_a_server_that_keeps_refusing_exits_3_not_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int
) -> None:
    with RawEngine(chat=lambda b, n: answer(status, b"{}", retry_after="0")) as eng:
        code, err, p = run(eng, tmp_path, capsys)
        assert eng.chats == 4  # the first try and three retries
    assert code == 3 and p is None
    assert f"calibration request failed after 3 retries: HTTP {status}" in err
    assert err.count("\n") == 1
    # a Retry-After longer than we wait for: no retry, the same exit
    with RawEngine(chat=lambda b, n: answer(status, b"{}", retry_after="3600")) as eng:
        code, err, _ = run(eng, tmp_path, capsys)
        assert eng.chats == 1
    assert code == 3 and f"HTTP {status}" in err
    with RawEngine(models_script=lambda n: answer(status, b"{}", retry_after="0")) as eng:
        code, err, _ = run(eng, tmp_path, capsys)
        assert eng.model_calls == 4
    assert code == 3 and f"GET /v1/models answered HTTP {status} (Retry-After: 0)" in err


def test_an_engine_restart_mid_run_is_named_not_zero_acceptance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eng = RawEngine()

    def restarted(scrape: int) -> list[Write]:
        d, t, a = eng.counters
        if scrape == 1:  # before iteration 0: the old process, far ahead
            d, t, a = d + 500, t + 1500, a + 1000
        text = vllm_metrics(d, t, a, eng.model)
        return answer(200, text.encode(), "text/plain")

    eng.metrics = restarted
    with eng:
        code, _err, p = run(eng, tmp_path, capsys)
    assert code == 1
    got = reasons(p)
    assert "zero_acceptance" not in got
    assert (
        "iteration 0: vllm:spec_decode_num_accepted_tokens_total" in got["metrics_counters_reset"]
    )
    assert p is not None
    its = [it for it in p["evidence"]["iterations"] if not it["warmup"]]
    assert its[0]["acceptance"] is None  # never from a negative delta
    # the window after the restart is read as usual: M-1 drafts of 3, 2 accepted each
    assert p["engineFlags"]["specAcceptedTokens"] == 2 * (M - 1)


@pytest.mark.parametrize(
    "bad",
    [
        answer(200, b"<html><body>upstream timed out</body></html>", "text/html"),
        answer(502, b"bad gateway"),
        [],  # the connection closes without an answer
    ],
    ids=["garbage", "http502", "unreachable"],
)
def test_metrics_failing_for_one_scrape_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: list[Write]
) -> None:
    eng = RawEngine()

    def once(scrape: int) -> list[Write]:
        if scrape == 3:  # before iteration 1
            return bad
        d, t, a = eng.counters
        return answer(200, vllm_metrics(d, t, a, eng.model).encode(), "text/plain")

    eng.metrics = once
    with eng:
        code, _err, p = run(eng, tmp_path, capsys)
    assert code == 1
    msg = reasons(p)["metrics_scrape_failed"]
    assert msg.startswith("GET /metrics failed around 1 measured iteration(s) (iteration 1: ")
    assert "no speculative-decoding counters" not in json.dumps(p)


def test_only_the_served_models_counters_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eng = RawEngine()

    def two(scrape: int) -> list[Write]:
        d, t, a = eng.counters
        # another model on the same server accepts everything and runs ahead every scrape
        other = vllm_metrics(scrape * 1000, scrape * 3000, scrape * 3000, "other-model")
        return answer(200, (vllm_metrics(d, t, a, eng.model) + other).encode(), "text/plain")

    eng.metrics = two
    with eng:
        code, err, p = run(eng, tmp_path, capsys)
    assert code == 0, err
    assert p is not None
    assert p["engineFlags"]["specAcceptanceRate"] == pytest.approx(2 / 3)
    assert p["evidence"]["acceptance"]["source"].endswith('series model_name="test-model"')
    assert p["evidence"]["acceptance_raw"]["metrics_series"] == {
        "series": 'model_name="test-model"',
        "other_models_ignored": ["other-model"],
    }


def _double_tokens(events: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for e in events:
        out.append(e)
        if b'"content": " w' in e and b'"length"' not in e:
            out.append(e)
    return out


def _second_choice(events: list[bytes]) -> list[bytes]:
    out = []
    for e in events:
        obj = json.loads(e) if e != b"[DONE]" else None
        if obj and obj["choices"]:
            obj["choices"].append({**obj["choices"][0], "index": 1})
        out.append(json.dumps(obj).encode() if obj else e)
    return out


def _swap(k: int, obj: Any) -> Callable[[list[bytes]], list[bytes]]:
    return lambda ev: [*ev[:k], json.dumps(obj).encode(), *ev[k + 1 :]]


def _usage_twice(ev: list[bytes]) -> list[bytes]:
    other = ev[-2].replace(b'"completion_tokens": 6', b'"completion_tokens": 9')
    return [*ev[:-2], other, *ev[-2:]]


def _model(ev: list[bytes]) -> list[bytes]:
    return [e.replace(b'"test-model"', b'"other"') for e in ev]


LIES: dict[str, tuple[Callable[[list[bytes]], list[bytes]], str]] = {
    "another model": (_model, "names model 'other'"),
    "every token chunk twice": (_double_tokens, "chunks carried text but usage counts 6"),
    "choices an object": (_swap(2, {"choices": {"0": {}}}), "choices is an object"),
    "delta an array": (_swap(2, chunk("test-model", ["x"])), "delta is an array"),
    "[DONE] first": (lambda ev: [b"[DONE]", *ev], "after data: [DONE]"),
    "two usages disagree": (_usage_twice, "two usage chunks disagree"),
    "finish mid-stream": (_swap(2, chunk("test-model", {"content": " w1"}, "stop")), "'stop'"),
    "second choice": (_second_choice, "2 choice(s)"),
}


@pytest.mark.parametrize("edit,needle", list(LIES.values()), ids=list(LIES))
def test_a_lying_stream_makes_the_run_invalid_with_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[list[bytes]], list[bytes]],
    needle: str,
) -> None:
    with RawEngine(chat=chat_with(edit)) as eng:
        code, err, p = run(eng, tmp_path, capsys)
    assert code == 1
    assert needle in reasons(p)["invalid_iteration"], err


def test_events_without_data_are_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def script(body: dict[str, Any], n: int) -> list[Write]:
        w = sse(stream_events(body))
        if measured(body):
            k = 5  # the third token's HTTP chunk, re-framed without 'data: '
            data = w[k]
            assert isinstance(data, bytes)
            event = data.split(b"\r\n", 1)[1][:-2].removeprefix(b"data: ")
            w[k] = b"%x\r\n%s\r\n" % (len(event), event)
        return w

    with RawEngine(chat=script) as eng:
        code, _err, p = run(eng, tmp_path, capsys)
    assert code == 1
    assert "1 SSE line(s) without a data: field" in reasons(p)["invalid_iteration"]


def _utf8_split(body: dict[str, Any], n: int) -> list[Write]:
    """Every event in two HTTP chunks and two TCP writes, cut inside a 3-byte character."""
    events = [e.replace(b" w", " \u20ac".encode()) for e in stream_events(body)]
    out: list[Write] = [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    ]
    for e in events:
        data = b"data: " + e + b"\n\n"
        cut = data.find(b"\xe2\x82") + 1 if b"\xe2\x82" in data else len(data) // 2
        for part in (data[:cut], data[cut:]):
            out += [b"%x\r\n%s\r\n" % (len(part), part), 0.002]
    return [*out, b"0\r\n\r\n"]


def _http10(body: dict[str, Any], n: int) -> list[Write]:
    """An HTTP/1.0 answer: no chunking, no length, the body ends when the connection closes."""
    out: list[Write] = [b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"]
    for e in stream_events(body):
        out += [b"data: " + e + b"\n\n", 0.002]
    return out


@pytest.mark.parametrize("script", [_utf8_split, _http10], ids=["utf8-split", "http10"])
def test_legal_framings_stay_valid_and_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], script: Callable[..., list[Write]]
) -> None:
    with RawEngine(chat=script) as eng:
        code, err, p = run(eng, tmp_path, capsys)
    assert code == 0, err
    assert p is not None
    sign = "\u20ac" if script is _utf8_split else "w"
    want = "".join(f" {sign}{i}" for i in range(M))
    for it in p["evidence"]["iterations"]:
        for r in it["requests"]:
            assert r["output_text"] == want and r["completion_tokens"] == M


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "soon"])
def test_a_stall_timeout_that_is_no_duration_is_the_users_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with RawEngine() as eng:
        code, err, p = run(eng, tmp_path, capsys, "--stall-timeout", value)
        assert eng.chats == 0  # refused before any request
    assert code == 2 and "--stall-timeout" in err and p is None
