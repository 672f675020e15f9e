"""`specbench run` against the emulator (bench.emulator): the payload is labelled SIMULATED
without being told, the client's clocks agree with the emulator's truth where no load can change
them (no token seen before the emulator's schedule let it be written; the rate from usage's
tokens over the client's own window), and the acceptance figures from the counter deltas equal
the emulator's per-request truth. How close the client's stamps come to the emulator's writes a
loaded machine decides: tests/bench_client.py and tests/bench_emulator.py measure it.

The emulator streams at half its profile's speed without its load time: a 64-token stream lasts
~300 ms, and only a client stalled for all of it reads it in one read (at time scale 0.05, ~30 ms,
a stall of a loaded machine could: no decode rate, an invalid run)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from emulator_profiles import profile_without_load_time
from test_run_fake_engine import cli, load, measured_requests
from test_run_fake_engine import hardware as hardware  # the fixture

from bench.emulator import serve_in_thread
from bench.emulator.runner import EmulatorHandle

P, M = 128, 64


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorHandle]:
    engine, profile, fail = request.param
    handle = serve_in_thread(engine, profile_without_load_time(profile), time_scale=0.5, fail=fail)
    assert handle.wait_ready(60)
    yield handle
    handle.stop()


def args(
    h: EmulatorHandle, engine: str, hw: Path, out: Path, method: str, k: str, c: int
) -> list[str]:
    return [
        "run", engine, "--mode", "remote", "--base-url", h.base_url,
        "--hf-id", "btbtyler09/Qwen3.8-27B-GPTQ-4bit", "--served-model", "qwen38-27b-gptq",
        "--quantization", "GPTQ-4bit", "--hardware", str(hw), "--spec-method", method,
        "--spec-num-tokens", k, "--prompt-tokens", str(P), "--max-tokens", str(M),
        "--concurrency", str(c), "--warmup", "1", "--iterations", "2", "--out", str(out),
    ]  # fmt: skip


def truth_of(h: EmulatorHandle, r: dict[str, Any]) -> dict[str, Any]:
    t = h.truth(r["request_id"])
    assert t is not None, r["request_id"]
    return t


@pytest.mark.parametrize("emulator", [("vllm", "vllm-dflash", ())], indirect=True)
def test_vllm_dflash_simulated_timing_and_acceptance(
    emulator: EmulatorHandle, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    code, stdout, stderr = cli(capsys, *args(emulator, "vllm", hardware, out, "dflash", "4", 1))
    assert code == 0, stderr
    assert "SIMULATED" in stdout
    p = load(out)
    assert p["simulated"] is True and p["evidence"]["run"]["simulated"] is True
    drafts = accepted = 0
    for r in measured_requests(p):
        t = truth_of(emulator, r)
        assert r["prompt_tokens"] == P and t["reported_prompt_tokens"] == P
        content = [c for c in t["chunks"] if c["kind"] == "content" and c["tokens"]]
        # the emulator writes a chunk only once its step's scheduled end has passed (the same
        # monotonic clock as the client's): the client cannot have it earlier
        assert r["sent_at"] + r["first_token_at"] >= content[0]["scheduled"]
        assert r["sent_at"] + r["last_token_at"] >= content[-1]["scheduled"]
        # the rate: usage's M tokens over the client's own window (never the ~M/2.9 chunks)
        assert r["completion_tokens"] == M == sum(c["tokens"] for c in t["chunks"])
        window = r["last_token_at"] - r["first_token_at"]
        assert window > 0 and r["decode_tok_s"] == pytest.approx((M - 1) / window, rel=1e-9)
        drafts += t["drafts"]
        accepted += t["accepted_tokens"]
    flags = p["engineFlags"]
    assert flags["specAcceptedTokens"] == accepted
    assert flags["specMeanAcceptedLength"] == pytest.approx(1 + accepted / drafts)


@pytest.mark.parametrize("emulator", [("sglang", "sglang-mtp", ())], indirect=True)
def test_sglang_mtp_acceptance_mapping(
    emulator: EmulatorHandle, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *args(emulator, "sglang", hardware, out, "mtp", "2", 4))
    assert code == 0, stderr
    p = load(out)
    reqs = measured_requests(p)
    assert len(reqs) == 8
    truths = [truth_of(emulator, r) for r in reqs]
    drafts = sum(t["drafts"] for t in truths)
    accepted = sum(t["accepted_tokens"] for t in truths)
    acc = p["evidence"]["acceptance"]
    assert acc["drafts"] == drafts
    # The last verify of a request can overshoot max_tokens and be cut: at most k per request.
    assert accepted - 2 * len(reqs) <= acc["accepted_tokens"] <= accepted
    assert p["evidence"]["acceptance_raw"]["sglang_gauges_after_each_iteration"]


@pytest.mark.parametrize("emulator", [("vllm", "vllm-mtp", ("zero_acceptance",))], indirect=True)
def test_zero_acceptance_is_invalid(
    emulator: EmulatorHandle, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *args(emulator, "vllm", hardware, out, "mtp", "2", 1))
    assert code == 1 and "zero_acceptance" in stderr
    code, stdout, _ = cli(capsys, "validate", "--json", str(out))
    report = json.loads(stdout)
    assert code == 1 and report["valid"] is False
