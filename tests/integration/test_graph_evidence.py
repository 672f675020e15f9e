"""The CUDA graph rule end to end on the emulator: its healthy, eager-fallback and
captured-but-unused logs, over real HTTP, and through the matrix into the payloads."""

from __future__ import annotations

import copy
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.emulator import load_profile, serve_in_thread
from bench.engines import get_engine, load_experiment
from bench.matrix import Artifacts, MatrixOptions, run_matrix
from bench.measure import GraphCheck, graph_check
from bench.schema import EXPERIMENTS_DIR, read_payload

SCALE = 0.01


def run_and_check(engine: str, fail: list[str], metrics: bool) -> GraphCheck:
    profile = load_profile(f"{engine}-mtp").with_overrides(
        time_scale=SCALE, cudagraph_metrics=metrics
    )
    with serve_in_thread(engine, profile, fail=fail) as h:
        assert h.wait_ready(30)
        mark = len(h.log_lines)
        body = {
            "model": profile.served_model,
            "messages": [{"role": "user", "content": "word " * 40}],
            "max_tokens": 160,
            "ignore_eos": True,
        }
        for _ in range(3):
            req = urllib.request.Request(
                f"{h.base_url}/v1/chat/completions",
                json.dumps(body).encode(),
                {"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=30) as resp:
                resp.read()
        time.sleep(profile.log_interval_s * SCALE * 2)  # one more vLLM stats interval
        lines = list(h.log_lines)
    patterns = get_engine(engine).graph_patterns
    assert patterns is not None
    return graph_check(
        "\n".join(lines),
        "\n".join(lines[mark:]),
        patterns,
        speculative=True,
        required=False,
        args=["--cudagraph-metrics"] if metrics else [],
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_emulator_healthy_eager_and_unused_logs(engine: str) -> None:
    metrics = engine == "vllm"
    healthy = run_and_check(engine, [], metrics)
    assert healthy.reasons == [] and healthy.evidence.active
    assert healthy.evidence.use_lines > 0 and healthy.evidence.used == healthy.evidence.use_lines
    eager = run_and_check(engine, ["eager_fallback"], metrics)
    assert [r.code for r in eager.reasons] == ["cuda_graphs_not_captured"]
    assert eager.evidence.captured == [] and eager.evidence.used == 0
    unused = run_and_check(engine, ["graphs_unused"], metrics)
    assert [r.code for r in unused.reasons] == ["cuda_graphs_unused"]
    assert unused.evidence.captured and unused.evidence.use_lines > 0 == unused.evidence.used


def test_matrix_judges_graphs_per_level(tmp_path: Path) -> None:
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    base = next(c for c in data["configurations"] if c["name"] == "sglang-mtp")
    eager = copy.deepcopy(base) | {"name": "sglang-mtp-eager", "require_cuda_graphs": True}
    eager["emulator"] = {"profile": "sglang-mtp", "fail": ["eager_fallback"]}
    unused = copy.deepcopy(base) | {"name": "sglang-mtp-unused"}
    unused["emulator"] = {"profile": "sglang-mtp", "fail": ["graphs_unused"]}
    data["configurations"] = [base, eager, unused]
    for c in data["configurations"]:
        c["concurrency"] = [1]
    data["workload"].update(prompt_tokens=200, max_tokens=96, warmup=1, iterations=2)
    path = tmp_path / "graphs.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    opts = MatrixOptions(out=out, launcher="process", time_scale=SCALE, show_progress=False)
    result = run_matrix(load_experiment(path), opts, experiment_path=path)
    assert [o.status for o in result.outcomes] == ["done"] * 3
    arts = Artifacts(out)
    ok = read_payload(arts.payload("sglang-mtp", 1))
    assert ok.evidence.validity.valid and ok.evidence.validity.reasons == []
    sl = ok.evidence.server_log
    assert sl is not None and sl.graphs is not None and sl.graphs.active
    assert sl.load_failures == 0 and "draft_tensors_skipped" in sl.load_checks
    assert sl.accept_lengths and all(1.0 < a <= 3.0 for a in sl.accept_lengths)
    bad = read_payload(arts.payload("sglang-mtp-eager", 1))
    assert not bad.evidence.validity.valid
    assert [(r.code, r.severity) for r in bad.evidence.validity.reasons] == [
        ("cuda_graphs_not_captured", "invalid")
    ]
    warned = read_payload(arts.payload("sglang-mtp-unused", 1))
    assert warned.evidence.validity.valid
    assert [(r.code, r.severity) for r in warned.evidence.validity.reasons] == [
        ("cuda_graphs_unused", "warning")
    ]
    # eager steps are slower: the emulator's eager_slowdown shows in the measured figure
    assert warned.tokSOut < ok.tokSOut / 2
