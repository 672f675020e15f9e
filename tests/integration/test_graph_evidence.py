"""The CUDA graph rule end to end on the emulator: its healthy, eager-fallback and
captured-but-unused logs, over real HTTP, and through the matrix into the payloads."""

from __future__ import annotations

import copy
import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from emulator_profiles import without_load_time

from bench.emulator import EmulatorHandle, load_profile, serve_in_thread
from bench.engines import get_engine, load_experiment
from bench.matrix import Artifacts, MatrixOptions, run_matrix
from bench.measure import GraphCheck, graph_check
from bench.report import render_report
from bench.schema import (
    EXPERIMENTS_DIR,
    SuiteCounts,
    SuiteRecord,
    SuiteRun,
    SuiteTest,
    UpstreamSelection,
    read_payload,
)

SCALE = 0.01
DRAFTED = re.compile(r"SpecDecoding metrics: .* Drafted: (\d+) tokens")


def _draft_tokens(base_url: str) -> float:
    """The engine's own count of draft tokens (its /metrics counter)."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    name = "vllm:spec_decode_num_draft_tokens_total"
    return sum(float(x.rsplit(" ", 1)[1]) for x in text.splitlines() if x.startswith(name + "{"))


def _wait_for_the_last_stats_record(h: EmulatorHandle, mark: int, drafted: float) -> None:
    """vLLM logs its stats (graph use with them) once per interval, after the steps they
    count: wait until the records logged since ``mark`` count every draft token the engine's
    counter gained (the interval holding the last step has been logged), however long the
    machine takes. A hang guard, not a timing bound."""
    deadline = time.monotonic() + 60
    while True:
        logged = sum(int(m.group(1)) for x in h.log_lines[mark:] for m in DRAFTED.finditer(x))
        if logged >= drafted:
            return
        assert time.monotonic() < deadline, (logged, drafted)
        time.sleep(0.01)


def run_and_check(engine: str, fail: list[str], metrics: bool) -> GraphCheck:
    profile = load_profile(f"{engine}-mtp").with_overrides(
        time_scale=SCALE, cudagraph_metrics=metrics
    )
    with serve_in_thread(engine, profile, fail=fail) as h:
        assert h.wait_ready(30)
        mark = len(h.log_lines)
        drafted_before = _draft_tokens(h.base_url) if engine == "vllm" else 0.0
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
        if engine == "vllm":
            drafted = _draft_tokens(h.base_url) - drafted_before
            assert drafted > 0
            _wait_for_the_last_stats_record(h, mark, drafted)
        # SGLang logs its decode lines from the decode steps themselves, as they run
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
        # its oracle needs valid payloads: streams of ~20 ms (time scale 0.01) can reach a
        # stalled client in one read (an invalid request), so ten times slower, without the
        # emulated load time that would cost (tests/emulator_profiles.py)
        without_load_time(c, tmp_path)
    data["workload"].update(prompt_tokens=200, max_tokens=96, warmup=1, iterations=2)
    path = tmp_path / "graphs.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    opts = MatrixOptions(out=out, launcher="process", time_scale=0.1, show_progress=False)
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


def test_after_the_fix_list_from_the_artifacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch = load_experiment(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").images["sglang"].build
    assert patch is not None
    tests = [
        SuiteTest(id="upstream.test_x::test_a", origin="upstream", outcome="passed",
                  targets_patch=True),
        SuiteTest(id="specbench_probes.p::test_b", origin="specbench", outcome="passed",
                  targets_patch=True),
        SuiteTest(id="upstream.test_x::test_c", origin="upstream", outcome="skipped",
                  targets_patch=False),
    ]  # fmt: skip

    def run(tree: Literal["patched", "pristine"]) -> SuiteRun:
        return SuiteRun(tree=tree, command=["pytest"], returncode=0, seconds=1.0, passed=2,
                        failed=0, errors=0, skipped=1, tests=tests)  # fmt: skip

    record = SuiteRecord(
        upstream_version="0.5.19", reproduce="pytest tests/contract", python="3.11",
        pytest="9.2", patches=["0001.patch"], patch_sha256=patch.patch_sha256,
        summary=SuiteCounts(passed=2, failed=0, skipped=0, needs_gpu=1, upstream_passed=1,
                            specbench_passed=1),
        selection=UpstreamSelection(artifact="sglang.whl", artifact_sha256="0" * 64, sdist=None,
                                    scanned_test_files=1, code_path_modules=[],
                                    selected=["sglang/test_x.py"], needs_gpu=[],
                                    cpu_runnable=["sglang/test_x.py"]),
        patched=run("patched"), pristine=run("pristine"), differs_without_patch=[],
    ).model_dump(mode="json")  # fmt: skip
    rec = tmp_path / "suite.json"
    rec.write_text(json.dumps(record))
    monkeypatch.setenv("SPECBENCH_SGLANG_SUITE_RECORD", str(rec))
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    base = next(c for c in data["configurations"] if c["name"] == "sglang-mtp")
    unused = copy.deepcopy(base) | {"name": "sglang-mtp-unused"}
    unused["emulator"] = {"profile": "sglang-mtp", "fail": ["graphs_unused"]}
    data["configurations"] = [base, unused]
    for c in data["configurations"]:
        c["concurrency"] = [1]
    data["workload"].update(prompt_tokens=200, max_tokens=96, warmup=1, iterations=2)
    path = tmp_path / "fix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    opts = MatrixOptions(out=out, launcher="process", time_scale=SCALE, show_progress=False)
    run_matrix(load_experiment(path), opts, experiment_path=path)
    arts = Artifacts(out)
    assert json.loads(arts.suite_record.read_text()) == record
    assert arts.check_sums() == []
    text = render_report(out, tmp_path / "report").read_text(encoding="utf-8")
    section = text.split("### After the fix: evidence for the patched image")[1]
    ok = next(ln for ln in section.splitlines() if "(sglang-mtp) | 1 |" in ln)
    assert "yes: no skipped-parameter line (draft\\_tensors\\_skipped checked)" in ok
    assert "yes: target verify captured;" in ok and "logged steps on graphs" in ok
    assert re.search(
        r"\| [12]\.\d\d to [12]\.\d\d tokens per step over \d+ window\(s\) \| valid, ", ok
    )
    bad = next(ln for ln in section.splitlines() if "(sglang-mtp-unused) | 1 |" in ln)
    assert "**no**: captured, never used in the measured windows" in bad
    assert "2 passed, 0 failed; 1 of the passes are upstream tests of the published" in section
    assert "- passed: `upstream.test_x::test_a`" in section and "test_c" not in section
    assert "does not vouch" not in section
    warn = text.split("### Validity warnings on valid runs")[1].split("###")[0]
    assert "sglang-mtp-unused" in warn and "`cuda_graphs_unused`" in warn
