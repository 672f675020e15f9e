"""The emulator over real HTTP on 127.0.0.1: endpoints, SSE shapes, truth, metrics, logs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from bench.emulator import EmulatorHandle, serve_in_thread
from bench.emulator.tokens import words_for

SCALE = 0.002  # a 512-token request takes a few ms of emulated time
MODEL = "qwen38-27b-gptq"


def body(max_tokens: int = 40, prompt: int = 60, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "word " * words_for(prompt)}],
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


def stream(base: str, payload: dict[str, Any]) -> list[dict[str, Any] | str]:
    """Every SSE data payload, parsed ("[DONE]" kept as a string)."""
    events: list[dict[str, Any] | str] = []
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=payload, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["x-specbench-emulator"] == "1"
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture(params=["vllm", "sglang"])
def emu(request: pytest.FixtureRequest) -> Iterator[EmulatorHandle]:
    with serve_in_thread(request.param, time_scale=SCALE, seed=1) as h:
        assert h.wait_ready(10)
        yield h


def test_models_and_health_say_simulated(emu: EmulatorHandle) -> None:
    r = httpx.get(f"{emu.base_url}/health")
    assert r.status_code == 200 and r.headers["x-specbench-emulator"] == "1"
    models = httpx.get(f"{emu.base_url}/v1/models").json()
    assert models["data"][0]["id"] == MODEL
    assert models["emulator"]["simulated"] is True
    assert models["emulator"]["tokenizer"]["per_message"] == 4
    assert emu.log_lines[0].startswith("SIMULATED")


def test_stream_shape_usage_and_truth(emu: EmulatorHandle) -> None:
    events = stream(emu.base_url, body(max_tokens=50, prompt=100))
    assert events[-1] == "[DONE]"
    chunks = [e for e in events if isinstance(e, dict)]
    first = chunks[0]["choices"][0]["delta"]
    assert first["role"] == "assistant" and first["content"] == ""
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 50
    assert usage["usage"]["prompt_tokens"] == 100
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert len(text.split()) == 50
    reasons = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert reasons[-1] == "length" and all(r is None for r in reasons[:-1])
    truth = emu.truth(chunks[0]["id"])
    assert truth is not None and truth["simulated"] is True
    assert sum(c["tokens"] for c in truth["chunks"]) == 50
    token_chunks = [c for c in truth["chunks"] if c["tokens"]]
    received = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(token_chunks) == len(received)
    assert all(c["t"] >= c["scheduled"] for c in truth["chunks"])
    assert emu.truth("nope") is None


def test_metrics_deltas_match_truth(emu: EmulatorHandle) -> None:
    base = emu.base_url
    before = httpx.get(f"{base}/metrics").text
    ids = []
    for _ in range(3):
        events = stream(base, body(max_tokens=64))
        ids.append(events[0]["id"])  # type: ignore[index]
    after = httpx.get(f"{base}/metrics").text
    truths = [emu.truth(i) for i in ids]
    drafts = sum(t["drafts"] for t in truths if t)
    accepted = sum(t["accepted_tokens"] for t in truths if t)
    assert drafts > 0 and accepted > 0
    if emu.profile.engine == "vllm":
        d = metric(after, "vllm:spec_decode_num_drafts_total") - metric(
            before, "vllm:spec_decode_num_drafts_total"
        )
        a = metric(after, "vllm:spec_decode_num_accepted_tokens_total") - metric(
            before, "vllm:spec_decode_num_accepted_tokens_total"
        )
        assert (d, a) == (drafts, accepted)
    else:
        v = metric(after, "sglang:spec_verify_calls_total") - metric(
            before, "sglang:spec_verify_calls_total"
        )
        g = metric(after, "sglang:generation_tokens_total") - metric(
            before, "sglang:generation_tokens_total"
        )
        assert v == drafts and g == 3 * 64
        assert (
            metric(after, "sglang:num_requests_total") - metric(before, "sglang:num_requests_total")
            == 3
        )


def test_non_streamed(emu: EmulatorHandle) -> None:
    r = httpx.post(f"{emu.base_url}/v1/chat/completions", json=body(stream=False), timeout=30)
    data = r.json()
    assert r.headers["x-specbench-emulator"] == "1"
    assert data["object"] == "chat.completion"
    assert data["usage"]["completion_tokens"] == 40
    assert len(data["choices"][0]["message"]["content"].split()) == 40


def test_engine_specific_endings(emu: EmulatorHandle) -> None:
    events = stream(emu.base_url, body(max_tokens=8))
    chunks = [e for e in events if isinstance(e, dict) and e["choices"]]
    last = chunks[-1]["choices"][0]
    if emu.profile.engine == "vllm":
        assert last["delta"]["content"] and last["finish_reason"] == "length"
        assert last["stop_reason"] is None
    else:  # SGLang sends the finish reason in its own chunk, without content
        assert last["delta"] == {"reasoning_content": None} and last["finish_reason"] == "length"
    no_usage = stream(emu.base_url, {**body(max_tokens=8), "stream_options": None})
    assert all(isinstance(e, str) or e.get("usage") is None for e in no_usage)


def _logged(h: EmulatorHandle, *needles: str) -> bool:
    """Whether each needle is in some log line, waiting for it: vLLM logs its stats every
    10 s (20 ms at this scale) after the tokens they count. A hang guard, not a timing bound."""
    deadline = time.monotonic() + 30
    while not all(any(n in x for x in list(h.log_lines)) for n in needles):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_periodic_acceptance_log_lines() -> None:
    with serve_in_thread("vllm", time_scale=SCALE, seed=2) as h:
        assert h.wait_ready(10)
        stream(h.base_url, body(max_tokens=400))
        assert _logged(
            h, "SpecDecoding metrics: Mean acceptance length: ", "Avg generation throughput"
        ), h.log_lines[-5:]
    with serve_in_thread("sglang", time_scale=SCALE, seed=2) as h:
        assert h.wait_ready(10)
        stream(h.base_url, body(max_tokens=400))
        lines = [x for x in h.log_lines if "Decode batch" in x]
        assert lines and all("accept len: " in x and " TP0] " in x for x in lines)
        assert any("The server is fired up and ready to roll!" in x for x in h.log_lines)


def test_sglang_admission_cap_queues() -> None:
    with serve_in_thread("sglang", "sglang-dflash", time_scale=0.05, seed=4) as h:
        assert h.wait_ready(10)
        cap = h.profile.admission_cap  # five: SGLang's 48 lowered by the Mamba state cache
        assert cap == 5
        gate = threading.Barrier(8)

        def one(_: int) -> list[object]:
            gate.wait()  # all eight arrive together, so three of them must queue
            return stream(h.base_url, body(max_tokens=128))

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(one, range(8)))
        truths = [h.truth(r[0]["id"]) for r in results]  # type: ignore[index]
        spans = sorted((t["admitted"], t["chunks"][-1]["t"]) for t in truths if t)
        assert len(spans) == 8
        for i, (start, _) in enumerate(spans):
            running = sum(1 for s, e in spans[:i] if e > start)
            assert running < cap + 1
        # The later three were admitted only when one of the first five had finished.
        first_ends = sorted(e for _, e in spans[:cap])
        for start, _ in spans[cap:]:
            assert start >= first_ends[0] - 1e-3


def _health(h: EmulatorHandle) -> int:
    """GET /health: its status, or 0 where the connection is refused."""
    try:
        return httpx.get(f"{h.base_url}/health", timeout=5).status_code
    except httpx.ConnectError:
        return 0


def _looks_until_up(h: EmulatorHandle) -> list[tuple[str, int, str]]:
    """(phase before, /health's answer, phase after) of each look until the server answers
    200; a look whose phase did not change while it was made was made in that phase."""
    looks: list[tuple[str, int, str]] = []
    deadline = time.monotonic() + 60  # a hang guard
    while not looks or looks[-1][1] != 200:
        assert time.monotonic() < deadline, looks[-5:]
        before = h.phase
        code = _health(h)
        looks.append((before, code, h.phase))
        time.sleep(0.02)
    return looks


@pytest.mark.parametrize(("engine", "waiting"), [("vllm", 0), ("sglang", 503)])
def test_vllm_loading_refuses_and_sglang_warmup_503(engine: str, waiting: int) -> None:
    """vLLM does not listen while it loads (connection refused); SGLang listens and answers
    503 while it warms up. Seen deterministically on a server held in that phase (never_ready
    stops there), then on one that gets ready: no look before 'up' was answered 200 and the
    first 200 came once it was up, whenever the machine let each look happen."""
    held_in = "loading" if engine == "vllm" else "warmup"
    with serve_in_thread(engine, time_scale=0.01, fail=["never_ready"]) as held:
        deadline = time.monotonic() + 60  # a hang guard
        # vLLM: held before it listens; SGLang: once it listens (its first answer)
        while held.phase != held_in or (engine == "sglang" and _health(held) == 0):
            assert time.monotonic() < deadline, held.phase
            time.sleep(0.01)
        assert [_health(held) for _ in range(3)] == [waiting] * 3
        assert held.phase == held_in and not held.wait_ready(0.1)
    with serve_in_thread(engine, time_scale=0.02) as h:
        looks = _looks_until_up(h)
        # a look made wholly before 'up' (its phase the same before and after it) got no 200
        assert all(code != 200 for b, code, a in looks if b == a != "up"), looks
        assert looks[-1][2] == "up"
        assert h.wait_ready(10)
        assert _health(h) == 200


def test_vllm_rejects_unknown_model() -> None:
    with serve_in_thread("vllm", time_scale=SCALE) as h:
        assert h.wait_ready(10)
        r = httpx.post(f"{h.base_url}/v1/chat/completions", json=body(model="other"))
        assert r.status_code == 404
        assert r.json()["error"]["type"] == "NotFoundError"
