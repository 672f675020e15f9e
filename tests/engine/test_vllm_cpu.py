"""vLLM's CPU build serving the tiny models: the oracles that need no matrix.

- the GPU image's argv (``vllm serve MODEL ...``) starts the server; /version and the startup
  log name the pinned version;
- target as its own draft: acceptance exactly 1.0 and mean acceptance length exactly k+1 in
  every measured window, every position accepted as often as drafted;
- partial draft: 0 < acceptance < 1, accepted counts non-increasing with the position;
- every request's prompt_tokens equals P with the real chat template;
- greedy outputs (temperature 0, ignore_eos) identical to the baseline's.
"""

from __future__ import annotations

import itertools

import pytest
from conftest import EngineRuns
from engine_server import GREEDY_PROMPTS, GREEDY_TOKENS, K, P, per_position

from bench.engines import get_engine

SPECULATIVE = ("self_draft", "partial_draft")
VERSION = "0.32.0"


def test_gpu_argv_serves_and_reports_the_pinned_version(engine_runs: EngineRuns) -> None:
    run = engine_runs["baseline"]
    assert run.argv[:3] == ["vllm", "serve", "/models/target"]
    assert run.version == {"version": VERSION}
    engine = get_engine("vllm")
    assert engine.version_from_log(run.startup_log) == VERSION
    assert engine.ready_regex in run.startup_log
    assert run.payload["_exit_code"] == 0, run.payload["_stderr"]


@pytest.mark.parametrize("config", ["baseline", *SPECULATIVE])
def test_prompt_tokens_equal_p(engine_runs: EngineRuns, config: str) -> None:
    run = engine_runs[config]
    requests = [r for it in run.payload["evidence"]["iterations"] for r in it["requests"]]
    assert requests
    assert {r["prompt_tokens"] for r in requests} == {P}
    assert run.payload["promptTokens"] == P
    for done in run.greedy:
        assert done.usage["completion_tokens"] == GREEDY_TOKENS


def test_target_as_its_own_draft_accepts_everything(engine_runs: EngineRuns) -> None:
    run = engine_runs["self_draft"]
    windows = run.measured_windows()
    assert windows
    for it in windows:
        acc = it["acceptance"]
        assert acc["drafts"] > 0
        assert acc["draft_tokens"] == K * acc["drafts"]
        assert acc["acceptance_rate"] == 1.0
        assert acc["mean_acceptance_length"] == K + 1
        assert acc["accepted_per_position"] == [acc["drafts"]] * K
    assert run.payload["_exit_code"] == 0, run.payload["_stderr"]


def test_partial_draft_agrees_only_partly(engine_runs: EngineRuns) -> None:
    run = engine_runs["partial_draft"]
    acc = run.payload["evidence"]["acceptance"]
    assert 0 < acc["acceptance_rate"] < 1
    assert 1 < acc["mean_acceptance_length"] < K + 1
    per_pos = acc["accepted_per_position"]
    assert len(per_pos) == K
    assert all(a >= b for a, b in itertools.pairwise(per_pos)), per_pos
    assert per_pos[0] <= acc["drafts"]
    # The same shape in the server's lifetime totals (greedy prompts and warmup included).
    totals = per_position(run.metric_values)
    assert len(totals) == K
    assert all(a >= b for a, b in itertools.pairwise(totals)), totals


@pytest.mark.parametrize("config", SPECULATIVE)
def test_greedy_speculation_is_lossless(engine_runs: EngineRuns, config: str) -> None:
    base = [done.text for done in engine_runs["baseline"].greedy]
    spec = [done.text for done in engine_runs[config].greedy]
    assert len(base) == len(spec) == len(GREEDY_PROMPTS)
    assert all(base), "baseline produced empty outputs"
    for prompt, a, b in zip(GREEDY_PROMPTS, base, spec, strict=True):
        assert a == b, f"{config} differs from the baseline for {prompt!r}"
