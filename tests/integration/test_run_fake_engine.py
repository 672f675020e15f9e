"""`specbench run` / `validate` through the CLI against a real HTTP server on 127.0.0.1 (the
tests' fake engine), one stream shape per test."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_engine import ServerThread, Shape, State
from tokenizer import build_tokenizer

from bench.cli import main

P, M = 64, 32


@pytest.fixture
def server() -> Iterator[ServerThread]:
    srv = ServerThread(State()).start()
    yield srv
    srv.stop()


@pytest.fixture
def hardware(tmp_path: Path) -> Path:
    path = tmp_path / "hardware.json"
    path.write_text(
        json.dumps(
            {
                "hwClass": "DISCRETE_GPU",
                "gpuName": "RTX 3090",
                "gpuCount": 2,
                "vramGb": 24,
                "gpus": [{"name": "RTX 3090", "vramGb": 24}] * 2,
                "cpu": "test cpu",
                "ramGb": 64,
                "os": "linux",
            }
        )
    )
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def run_args(srv: ServerThread, hw: Path, out: Path, *extra: str) -> list[str]:
    # The seed's `lmx speed-test run` line, flag for flag, with small numbers.
    return [
        "run",
        "vllm",
        "--mode",
        "remote",
        "--base-url",
        srv.base_url,
        "--hf-id",
        "btbtyler09/Qwen3.8-27B-GPTQ-4bit",
        "--served-model",
        "test-model",
        "--quantization",
        "GPTQ-4bit",
        "--hardware",
        str(hw),
        "--spec-method",
        "dflash",
        "--spec-num-tokens",
        "3",
        "--prompt-tokens",
        str(P),
        "--max-tokens",
        str(M),
        "--concurrency",
        "1",
        "--warmup",
        "1",
        "--iterations",
        "2",
        "--out",
        str(out),
        "--spec-draft-model",
        "z-lab/Qwen3.8-27B-DFlash2",
        *extra,
    ]


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def measured_requests(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r for it in payload["evidence"]["iterations"] if not it["warmup"] for r in it["requests"]
    ]


def truth(srv: ServerThread, rid: str) -> dict[str, Any]:
    return srv.state.truth[rid]


def test_seed_command_line_role_first_chunk(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 10 ms steps: a 1 ms-step stream (31 ms) can arrive in one read on a loaded machine
    server.state.shape = Shape(role_first=True, prefill_s=0.03, step_s=0.01)
    out = tmp_path / "p.json"
    code, stdout, stderr = cli(capsys, *run_args(server, hardware, out))
    assert code == 0, stderr
    p = load(out)
    assert p["evidence"]["validity"]["valid"] is True
    assert p["engineFlags"]["specMethod"] == "DFLASH"
    assert p["simulated"] is False
    for r in measured_requests(p):
        # The role-only chunk (event 0, no text) came 30 ms before the first token: TTFT is the
        # first chunk with text, and the server's 30 ms sleep is a floor no load can lower.
        assert r["chunk_chars"][0] == 0 and r["chunk_chars"][1] > 0
        assert r["first_token_at"] == r["chunk_times"][1]
        assert r["ttft_ms"] >= 30.0
        assert r["prompt_tokens"] == P
        assert r["completion_tokens"] == M
        # the client never stamps a token before the server began to write it (how soon after,
        # a loaded machine decides: tests/bench_client.py measures it)
        t = truth(server, r["request_id"])
        assert r["sent_at"] + r["first_token_at"] >= t["before"][1]
    # Every request (warmup, measured, calibration) had its own nonce first.
    prompts = server.state.prompts
    assert len(set(prompts)) == len(prompts)
    assert all(p.startswith("Request ") for p in prompts)
    # After the timed ones, the measured prompts again with logprobs, not streamed (this server
    # streams only: the probes fail and the payload says so).
    measured = prompts[-len(measured_requests(p)) :]
    assert server.state.logprob_prompts == measured
    probes = p["evidence"]["logprob_probes"]
    assert probes["note"].startswith("2 of 2 probes failed; first: HTTP 400: ")  # streams only
    assert len(p["samples"]) == 2
    assert p["tokSOut"] == pytest.approx(sum(p["samples"]) / 2)
    code, stdout, _ = cli(capsys, "validate", str(out))
    assert code == 0 and "ok" in stdout


def test_reasoning_first_chunk_counts_as_first_token(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.state.shape = Shape(role_first=True, reasoning_first=4, prefill_s=0.02, step_s=0.01)
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *run_args(server, hardware, out))
    assert code == 0, stderr
    for r in measured_requests(load(out)):
        t = truth(server, r["request_id"])
        # event 1 is the first reasoning token; content only starts 4 steps (~40 ms) later
        assert r["chunk_chars"][1] > 0 and r["first_token_at"] == r["chunk_times"][1]
        assert r["sent_at"] + r["first_token_at"] >= t["before"][1]


def test_multi_token_chunks_use_usage_not_chunk_count(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 8 chunks of 4 tokens, 50 ms apart: the stream spans 350 ms, so only a client stalled for
    # all of it reads it in one read (which leaves no decode rate at all).
    # The rate is usage's M tokens over the client's own first-to-last window, never the M/4
    # chunks (off by a factor of 4.4). How close that window is to the server's writes, a loaded
    # machine decides: tests/bench_client.py measures it.
    server.state.shape = Shape(tokens_per_chunk=4, step_s=0.05, usage_in_last_chunk=True)
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *run_args(server, hardware, out))
    assert code == 0, stderr
    for r in measured_requests(load(out)):
        token_chunks = sum(1 for c in r["chunk_chars"] if c)
        assert token_chunks == M // 4 and r["completion_tokens"] == M
        window = r["last_token_at"] - r["first_token_at"]
        assert window > 0
        assert r["decode_tok_s"] == pytest.approx((M - 1) / window, rel=1e-9)
        t = truth(server, r["request_id"])
        firsts = [b for b, n in zip(t["before"], t["tokens"], strict=True) if n]
        assert r["sent_at"] + r["first_token_at"] >= firsts[0]
        assert r["sent_at"] + r["last_token_at"] >= firsts[-1]


def test_missing_usage_is_an_invalid_iteration(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.state.shape = Shape(missing_usage=True, faults_after=1)
    out = tmp_path / "p.json"
    tok = build_tokenizer(tmp_path / "tok")
    code, _, stderr = cli(capsys, *run_args(server, hardware, out, "--tokenizer", str(tok)))
    assert code == 1
    assert "missing usage" in stderr
    p = load(out)
    assert p["evidence"]["validity"]["valid"] is False
    code, stdout, _ = cli(capsys, "validate", str(out))
    assert code == 1 and "$.evidence.validity.valid" in stdout


def test_early_eos_is_an_invalid_iteration(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.state.shape = Shape(early_eos_at=M - 5)
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *run_args(server, hardware, out))
    assert code == 1
    assert f"completion_tokens={M - 5} != max_tokens={M}" in stderr
    assert load(out)["evidence"]["validity"]["valid"] is False


def test_prompt_count_mismatch(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tok = build_tokenizer(tmp_path / "tok")
    # Calibration (request 0) is counted right; every later request is 3 tokens off.
    server.state.shape = Shape(prompt_offset=3, faults_after=1)
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *run_args(server, hardware, out, "--tokenizer", str(tok)))
    assert code == 1
    assert f"server counted {P + 3} prompt tokens, expected {P}" in stderr
    server.state.prompts.clear()
    code, _, stderr = cli(
        capsys,
        *run_args(server, hardware, out, "--tokenizer", str(tok), "--allow-prompt-mismatch"),
    )
    assert code == 0, stderr
    assert any("prompt mismatch allowed" in w for w in load(out)["evidence"]["warnings"])


def test_tokenizer_sizes_prompts_exactly(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tok = build_tokenizer(tmp_path / "tok")
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *run_args(server, hardware, out, "--tokenizer", str(tok)))
    assert code == 0, stderr
    assert len(server.state.prompts) == 1 + 3  # one calibration request, then 3 iterations
    assert all(r["prompt_tokens"] == P for r in measured_requests(load(out)))


@pytest.mark.parametrize(
    ("shape", "needle"),
    [
        (Shape(http_status=500, faults_after=1), "HTTP 500"),
        (Shape(malformed_at=3, faults_after=1), "malformed SSE event #3"),
        (Shape(disconnect_at=5, faults_after=1), "stream"),
    ],
    ids=["http500", "malformed", "disconnect"],
)
def test_server_misbehaviour_is_recorded_not_raised(
    server: ServerThread,
    hardware: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    shape: Shape,
    needle: str,
) -> None:
    tok = build_tokenizer(tmp_path / "tok")
    server.state.shape = shape
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *run_args(server, hardware, out, "--tokenizer", str(tok)))
    assert code == 1
    assert needle in stderr
    assert "Traceback" not in stderr
    p = load(out)
    assert p["evidence"]["validity"]["valid"] is False
    assert all(it["reasons"] for it in p["evidence"]["iterations"])


def test_concurrency_16_streams_start_together(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 310 ms streams (62 ms at 2 ms steps): only a stall that long reads one in one read
    server.state.shape = Shape(step_s=0.01)
    out = tmp_path / "p.json"
    args = run_args(server, hardware, out)
    args[args.index("--concurrency") + 1] = "16"
    code, _, stderr = cli(capsys, *args)
    assert code == 0, stderr
    p = load(out)
    assert p["engineFlags"]["concurrency"] == 16
    for it in p["evidence"]["iterations"]:
        reqs = it["requests"]
        assert len(reqs) == 16
        assert len({r["request_id"] for r in reqs}) == 16
        # together: the 16 requests are written back to back in one step of the client's event
        # loop, so every send comes before any byte of any stream was read (a client that
        # waited for a stream before sending the next could not pass this, loaded or not)
        sends = [r["sent_at"] for r in reqs]
        assert max(sends) <= min(r["sent_at"] + r["chunk_times"][0] for r in reqs)
        if not it["warmup"]:
            # aggregate = all 16 streams' tokens / the window from the first send to the last
            # token (not one stream's tokens, not the mean of the streams' rates)
            total = sum(r["completion_tokens"] for r in reqs)
            assert total == 16 * M
            window = max(r["sent_at"] + r["last_token_at"] for r in reqs) - min(sends)
            assert it["aggregate_tok_s"] == pytest.approx(total / window, rel=1e-9)
    figs = p["evidence"]["figures"]
    assert figs["aggregate_tok_s"]["n"] == 2
    assert len(set(server.state.prompts)) == len(server.state.prompts)


def test_acceptance_counters_and_emulator_label(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.state.shape = Shape(emulator_header=True, accept_per_step=2, spec_tokens=3)
    out = tmp_path / "p.json"
    code, stdout, stderr = cli(capsys, *run_args(server, hardware, out))
    assert code == 0, stderr
    p = load(out)
    assert p["simulated"] is True and "SIMULATED" in stdout
    flags = p["engineFlags"]
    # Two measured requests of M tokens: M-1 steps each, 3 drafted and 2 accepted per step.
    assert flags["specDraftTokens"] == 2 * (M - 1) * 3
    assert flags["specAcceptedTokens"] == 2 * (M - 1) * 2
    assert flags["specAcceptanceRate"] == pytest.approx(2 / 3)
    assert flags["specMeanAcceptedLength"] == pytest.approx(3.0)
    # A payload from the emulator can never claim simulated=false.
    data = load(out)
    data["simulated"] = False
    out.write_text(json.dumps(data))
    code, stdout, _ = cli(capsys, "validate", "--json", str(out))
    assert code == 1
    assert json.loads(stdout)["problems"][0]["path"].startswith("$")


def test_bad_input_exits_2_with_one_line(
    hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv = ServerThread(State()).start()
    url = srv.base_url
    srv.stop()  # nothing listens there any more
    dead = ServerThread(State())
    dead.port = int(url.rsplit(":", 1)[1])
    out = tmp_path / "p.json"
    code, _, stderr = cli(capsys, *run_args(dead, hardware, out))
    # refused at once, named as refused: no timeout waited out, no retry
    assert code == 2 and "Connect call failed" in stderr and "retr" not in stderr, stderr
    assert stderr.count("\n") == 1 and "--base-url" in stderr
    bad_hw = tmp_path / "hw.json"
    bad_hw.write_text('{"gpuName": "x"}')
    for args, needle in [
        (run_args(dead, bad_hw, out), "--hardware"),
        (run_args(dead, tmp_path / "missing.json", out), "--hardware"),
        ([*run_args(dead, hardware, out)[:-2], "--spec-method", "eagle"], "--spec-method"),
        ([*run_args(dead, hardware, out), "--iterations", "0"], "--iterations"),
        ([*run_args(dead, hardware, out), "--max-tokens", "-3"], "--max-tokens"),
    ]:
        code, _, stderr = cli(capsys, *args)
        assert code == 2, (args, stderr)
        assert needle in stderr and stderr.count("\n") == 1
    assert not out.exists()


def test_no_cycle_collection_while_streams_are_open(
    server: ServerThread, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A collection mid-stream stalls the reads and merges chunks (bench/measure/_gcpause.py).
    # The fake engine runs in this process, so each write sees the client's collector state.
    # 310 ms streams (62 ms at 2 ms steps): only a stall that long reads one in one read
    server.state.shape = Shape(step_s=0.01)
    out = tmp_path / "p.json"
    assert gc.isenabled()
    code, _, stderr = cli(capsys, *run_args(server, hardware, out))
    assert code == 0, stderr
    timed = [r["request_id"] for it in load(out)["evidence"]["iterations"] for r in it["requests"]]
    assert len(timed) == 3  # 1 warmup + 2 measured, c=1
    for rid in timed:
        seen = truth(server, rid)["gc_enabled"]
        assert seen and not any(seen), rid
    # ... and it runs again between iterations and after the run
    assert gc.isenabled()
