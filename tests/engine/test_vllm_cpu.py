"""vLLM's CPU build serving the tiny model without the matrix: the GPU image's argv
(``vllm serve MODEL ...``) starts the server; /version and the startup log name the pinned
version; the seed's ``specbench run`` command line measures it with every request's
prompt_tokens equal to P under the real chat template. The speculative oracles (acceptance,
per-position counts, lossless greedy output) run through the matrix in test_matrix_vllm_cpu.py,
one server start per configuration."""

from __future__ import annotations

from conftest import EngineRuns
from engine_server import GREEDY_TOKENS, P

from bench.engines import get_engine

VERSION = "0.32.0"


def test_gpu_argv_serves_and_reports_the_pinned_version(engine_runs: EngineRuns) -> None:
    run = engine_runs["baseline"]
    assert run.argv[:3] == ["vllm", "serve", "/models/target"]
    assert run.version == {"version": VERSION}
    engine = get_engine("vllm")
    assert engine.version_from_log(run.startup_log) == VERSION
    assert engine.ready_regex in run.startup_log
    assert run.payload["_exit_code"] == 0, run.payload["_stderr"]
    assert (run.payload["engineVersion"], run.payload["backend"]) == (VERSION, "cpu")


def test_prompt_tokens_equal_p(engine_runs: EngineRuns) -> None:
    run = engine_runs["baseline"]
    requests = [r for it in run.payload["evidence"]["iterations"] for r in it["requests"]]
    assert requests
    assert {r["prompt_tokens"] for r in requests} == {P}
    assert run.payload["promptTokens"] == P
    for done in run.greedy:
        assert done.usage["completion_tokens"] == GREEDY_TOKENS
