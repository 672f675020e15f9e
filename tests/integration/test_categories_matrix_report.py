"""Issue 37: the seed host's categories experiment (bench/experiments/
qwen38-27b-gptq-2x3090-categories.yaml), cut small, through the matrix and the report on the
emulator. The emulator's profiles fix each category's acceptance (accepted draft tokens per
verify step), so the report's per-category acceptance is known exactly; the per-category
speedups over each engine's baseline and the chart come with it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from emulator_profiles import without_load_time

from bench.emulator.runner import resolve_profile
from bench.engines import load_experiment
from bench.matrix import Artifacts, MatrixOptions, run_matrix
from bench.report import render_report
from bench.schema import EXPERIMENTS_DIR, read_payload

EXP = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090-categories.yaml"
KEEP = ("vllm-mtp", "vllm-baseline", "sglang-dflash", "sglang-baseline")


def small(tmp_path: Path) -> Path:
    data: dict[str, Any] = yaml.safe_load(EXP.read_text())
    data["configurations"] = [c for c in data["configurations"] if c["name"] in KEEP]
    for c in data["configurations"]:
        without_load_time(c, tmp_path)
    data["workload"].update(max_tokens=16, warmup=0, iterations=2, concurrency=[1])
    # the copy lives elsewhere: its prompt set path is relative to the copy
    data["workload"]["prompt_set"]["path"] = str(
        (EXP.parent / data["workload"]["prompt_set"]["path"]).resolve()
    )
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_categories_run_through_matrix_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_dummyTOKENvalue0123456789")
    exp_path = small(tmp_path)
    exp = load_experiment(exp_path)
    out = tmp_path / "out"
    # the profiles' own speed (their load time taken out: emulator_profiles): a 16-token stream
    # takes ~150 ms, not the ~5 ms at time scale 0.05 that a loaded CI read whole (one chunk,
    # no decode rate: an invalid request, rightly; docs/benchmarks.md)
    opts = MatrixOptions(out=out, launcher="process", show_progress=False, prestart=True)
    result = run_matrix(exp, opts, experiment_path=exp_path)
    assert [o.status for o in result.outcomes] == ["done"] * 4
    arts = Artifacts(out)
    want: dict[str, dict[str, float]] = {}
    for cfg in exp.configurations:
        p = read_payload(arts.payload(cfg.name, 1))
        assert p.evidence.validity.valid, (cfg.name, p.evidence.validity.reasons)
        assert [c.category for c in p.evidence.categories] == ["code", "factual", "prose"]
        assert p.evidence.workload.chat_template is not None
        assert p.evidence.workload.chat_template.enable_thinking is False
        if cfg.speculative:
            prof = resolve_profile(cfg.engine, cfg.emulator.profile)
            assert prof.spec is not None and cfg.spec_num_tokens is not None
            k = cfg.spec_num_tokens
            want[cfg.name] = {c.name: min(c.accepted, k) / k for c in prof.spec.categories}
            for c in p.evidence.categories:
                rate = (
                    c.request_acceptance.acceptance_rate
                    if c.request_acceptance is not None
                    else c.acceptance.acceptance_rate
                    if c.acceptance
                    else None
                )
                assert rate == pytest.approx(want[cfg.name][c.category], abs=1e-12)
    report = render_report(out)
    text = report.read_text()
    assert "Workload: the prompts of the prompt set `categories-small`" in text
    section = text.split("## Acceptance and speedup by prompt category", 1)[1].split("\n## ")[0]
    assert "SIMULATED" in section and "categories-small@a5af22200f4b" in section
    assert "thinking off (enable_thinking false)" in section
    for name, rates in want.items():
        for cat, rate in rates.items():
            assert f"{100 * rate:.2f}%" in section, (name, cat)
    # one speedup row per speculative configuration and category, against its own engine
    rows = [
        ln for ln in section.splitlines() if re.match(r"^\| .* \| 1 \| (code|factual|prose) \|", ln)
    ]
    assert len(rows) == 2 * 3
    assert all(re.search(r"\| \d+\.\d\dx \(\d+\.\d\d to \d+\.\d\d\) \|", ln) for ln in rows)
    assert "agreed in every one" in section  # SGLang's per-request counts vs its counters
    chart = report.parent / "categories.svg"
    assert chart.is_file() and "SIMULATED" in chart.read_text()
    assert "categories.svg" in json.loads((report.parent / ".charts.json").read_text())
