"""The emulator's server-fault modes (an engine restart, /metrics garbage, 429 rate limits)
measured by `specbench run`, both engine shapes (issue 38 faults 2-4): what the raw-socket
tests (test_server_faults.py) hold on scripted bytes, here on the emulator the matrix and the
demo use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_server_faults import HW

from bench.cli import main
from bench.emulator import serve_in_thread
from bench.emulator.profile import FailMode
from bench.emulator.runner import EmulatorHandle, resolve_profile

PROFILES = {"vllm": "vllm-dflash", "sglang": "sglang-mtp"}


def serve(engine: str, mode: FailMode, every_n_requests: int = 1) -> EmulatorHandle:
    prof = resolve_profile(engine, PROFILES[engine], fail=[mode], time_scale=0.005)
    failures = prof.failures.model_copy(update={"every_n_requests": every_n_requests})
    handle = serve_in_thread(engine, prof.model_copy(update={"failures": failures}))
    assert handle.wait_ready(30)
    return handle


@pytest.fixture
def hw(tmp_path: Path) -> Path:
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(HW))
    return path


def run(
    h: EmulatorHandle, engine: str, hw: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, dict[str, Any]]:
    out = hw.parent / "p.json"
    args = [
        "run", engine, "--base-url", h.base_url, "--hf-id", "x/y",
        "--served-model", "qwen38-27b-gptq", "--quantization", "GPTQ-4bit",
        "--hardware", str(hw), "--spec-method", "mtp" if engine == "sglang" else "dflash",
        "--spec-num-tokens", "3" if engine == "sglang" else "4", "--prompt-tokens", "64",
        "--max-tokens", "16", "--concurrency", "2", "--warmup", "1", "--iterations", "2",
        "--out", str(out), "--no-telemetry", "--logprob-probes", "0",
    ]  # fmt: skip
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    data: dict[str, Any] = json.loads(out.read_text())
    return code, err, data


def codes(p: dict[str, Any]) -> dict[str, str]:
    return {r["code"]: r["message"] for r in p["evidence"]["validity"]["reasons"]}


@pytest.mark.parametrize("engine", list(PROFILES))
def test_an_engine_restart_inside_a_window(
    engine: str, hw: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = serve(engine, FailMode.ENGINE_RESTART)
    try:
        code, _err, p = run(h, engine, hw, capsys)
    finally:
        h.stop()
    assert code == 1
    got = codes(p)
    assert "zero_acceptance" not in got, got
    assert got["metrics_counters_reset"].startswith(
        "/metrics counters went backwards inside 1 measured window(s) (iteration 1: "
    )
    acc = [it["acceptance"] for it in p["evidence"]["iterations"] if not it["warmup"]]
    assert acc[0] is None and acc[1] is not None and acc[1]["accepted_tokens"] > 0


@pytest.mark.parametrize("engine", ["vllm"])
def test_metrics_garbage_at_every_other_scrape(
    engine: str, hw: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = serve(engine, FailMode.METRICS_GARBAGE)
    try:
        code, _err, p = run(h, engine, hw, capsys)
    finally:
        h.stop()
    assert code == 1
    msg = codes(p)["metrics_scrape_failed"]
    assert msg.startswith("GET /metrics failed around 2 measured iteration(s)")
    assert "not Prometheus text" in msg and "502 Bad Gateway" in msg
    assert p["engineFlags"]["specAcceptedTokens"] is None


@pytest.mark.parametrize("engine", ["sglang"])
def test_rate_limited_requests_are_sent_again(
    engine: str, hw: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = serve(engine, FailMode.HTTP_429, every_n_requests=4)
    try:
        code, err, p = run(h, engine, hw, capsys)
    finally:
        h.stop()
    assert code == 0, err
    retried = [w for w in p["evidence"]["warnings"] if "HTTP 429 (Retry-After: 0)" in w]
    assert retried, p["evidence"]["warnings"]
    assert all(
        r["http_status"] == 200 for it in p["evidence"]["iterations"] for r in it["requests"]
    )
