"""Every emulator failure mode, for both engine shapes, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from bench.emulator import serve_in_thread
from bench.emulator.tokens import words_for

SCALE = 0.002
ENGINES = ["vllm", "sglang"]


def body(max_tokens: int = 100, prompt: int = 50) -> dict[str, Any]:
    return {
        "model": "qwen38-27b-gptq",
        "messages": [{"role": "user", "content": "word " * words_for(prompt)}],
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }


def raw_events(base: str, payload: dict[str, Any]) -> tuple[list[str], bool]:
    """Raw SSE payload strings and whether the stream ended cleanly."""
    events: list[str] = []
    try:
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=payload, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])
    except (httpx.RemoteProtocolError, httpx.ReadError):
        return events, False
    return events, True


def parsed(events: list[str]) -> list[dict[str, Any]]:
    return [json.loads(e) for e in events if e != "[DONE]"]


@pytest.mark.parametrize("engine", ENGINES)
def test_disconnect_mid_stream(engine: str) -> None:
    with serve_in_thread(engine, time_scale=SCALE, fail=["disconnect"]) as h:
        assert h.wait_ready(10)
        events, clean = raw_events(h.base_url, body())
        assert not clean and "[DONE]" not in events
        truth = h.truth(json.loads(events[0])["id"])
        assert truth is not None and truth["outcome"] == "disconnected"
        assert 64 <= truth["completion_tokens"] < 100


@pytest.mark.parametrize("engine", ENGINES)
def test_malformed_chunk(engine: str) -> None:
    with serve_in_thread(engine, time_scale=SCALE, fail=["malformed_chunk"]) as h:
        assert h.wait_ready(10)
        events, clean = raw_events(h.base_url, body())
        assert clean and events[-1] == "[DONE]"
        bad = []
        for e in events[:-1]:
            try:
                json.loads(e)
            except json.JSONDecodeError:
                bad.append(e)
        assert len(bad) == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_http_5xx(engine: str) -> None:
    with serve_in_thread(engine, time_scale=SCALE, fail=["http_5xx"]) as h:
        assert h.wait_ready(10)
        r = httpx.post(f"{h.base_url}/v1/chat/completions", json=body())
        assert r.status_code == 500 and r.headers["x-specbench-emulator"] == "1"
        assert "SIMULATED" in r.text


@pytest.mark.parametrize("engine", ENGINES)
def test_missing_usage(engine: str) -> None:
    with serve_in_thread(engine, time_scale=SCALE, fail=["missing_usage"]) as h:
        assert h.wait_ready(10)
        events, clean = raw_events(h.base_url, body(max_tokens=20))
        assert clean and all(c.get("usage") is None for c in parsed(events))


@pytest.mark.parametrize("engine", ENGINES)
def test_early_eos(engine: str) -> None:
    with serve_in_thread(engine, time_scale=SCALE, fail=["early_eos"]) as h:
        assert h.wait_ready(10)
        events, _ = raw_events(h.base_url, body(max_tokens=100))
        chunks = parsed(events)
        assert chunks[-1]["usage"]["completion_tokens"] == 50
        reasons = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        assert reasons[-1] == "stop"


@pytest.mark.parametrize("engine", ENGINES)
def test_prompt_count_drift(engine: str) -> None:
    with serve_in_thread(engine, time_scale=SCALE, fail=["prompt_drift"]) as h:
        assert h.wait_ready(10)
        events, _ = raw_events(h.base_url, body(max_tokens=10, prompt=500))
        chunks = parsed(events)
        assert chunks[-1]["usage"]["prompt_tokens"] == 503
        truth = h.truth(chunks[0]["id"])
        assert truth is not None and truth["prompt_tokens"] == 500


@pytest.mark.parametrize("engine", ENGINES)
def test_zero_acceptance(engine: str) -> None:
    profile = f"{engine}-mtp"
    with serve_in_thread(engine, profile, time_scale=SCALE, fail=["zero_acceptance"]) as h:
        assert h.wait_ready(10)
        events, _ = raw_events(h.base_url, body(max_tokens=120))
        truth = h.truth(parsed(events)[0]["id"])
        assert truth is not None
        assert truth["drafts"] > 0 and truth["accepted_tokens"] == 0
        assert all(n == 1 for n, _ in truth["steps"])
        if engine == "sglang":
            skipped = [x for x in h.log_lines if "not found in params_dict, skip loading" in x]
            assert len(skipped) == 7 * h.profile.tensor_parallel
            assert any("accept len: 1.00" in x for x in h.log_lines)


@pytest.mark.parametrize("engine", ENGINES)
def test_never_ready(engine: str, caplog: pytest.LogCaptureFixture) -> None:
    with serve_in_thread(engine, time_scale=SCALE, fail=["never_ready"]) as h:
        assert not h.wait_ready(0.5)
        try:
            status = httpx.get(f"{h.base_url}/health", timeout=2).status_code
        except httpx.ConnectError:
            status = 0
        assert status == (0 if engine == "vllm" else 503)
    gc.collect()  # a pending task left on the closed loop is reported when it is collected
    assert not [r for r in caplog.records if "Task was destroyed" in r.getMessage()]


@pytest.mark.parametrize("engine", ENGINES)
def test_crash_at_start_in_thread(engine: str) -> None:
    with serve_in_thread(engine, time_scale=SCALE, fail=["crash_at_start"], exit_code=3) as h:
        assert h.wait_exit(10) == 3
        assert not h.wait_ready(0.1)


def test_exit_mid_run_in_thread() -> None:
    with serve_in_thread("vllm", time_scale=SCALE, fail=["exit_mid_run"], exit_code=5) as h:
        assert h.wait_ready(10)
        _, clean = raw_events(h.base_url, body(max_tokens=200))
        assert not clean
        assert h.wait_exit(10) == 5


def _process(*args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "bench.emulator", *args, "--time-scale", str(SCALE)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def test_process_crash_exit_code_and_simulated_first_line() -> None:
    proc = _process("sglang", "--port", "0", "--fail", "crash_at_start", "--exit-code", "9")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 9
    assert out.splitlines()[0].startswith("SIMULATED")


def test_process_exit_mid_run() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _process("vllm", "--port", str(port), "--fail", "exit_mid_run", "--exit-code", "4")
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            except httpx.ConnectError:
                time.sleep(0.05)
        raw_events(base, body(max_tokens=200))
        assert proc.wait(20) == 4
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_unknown_profile_is_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.emulator", "vllm", "--port", "1", "--profile", "nope"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "unknown" in proc.stderr
