"""A null experiment: two configurations that run the identical emulator profile. On a quiet
machine whatever the measurement sees is noise and the Holm-Bonferroni correction keeps it out
of the report's claims; on a loaded one the two twins, run one after the other, meet different
load, which is a real difference, not chance. So this test holds what load cannot change (the
family's claims, Holm's adjustment, the report's words agreeing with the verdicts), and
tests/bench_null.py measures whether identical profiles come out 'not significant' on this
machine, with its load (docs/benchmarks.md)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from bench.engines import load_experiment
from bench.matrix import MatrixOptions, run_matrix
from bench.report import load_artifacts, render_report
from bench.report._claims import claim_family, single_request, speculative
from bench.schema import EXPERIMENTS_DIR


def test_identical_profiles_give_no_significant_claim(tmp_path: Path) -> None:
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    base = next(c for c in data["configurations"] if c["name"] == "vllm-dflash")
    twin = copy.deepcopy(base) | {"name": "vllm-dflash-twin"}
    data["configurations"] = [base, twin]
    for c in data["configurations"]:
        c["concurrency"] = [1]  # one level: a sweep's levels differ for real, not by chance
    data["workload"].update(prompt_tokens=200, max_tokens=128, warmup=1, iterations=6)
    path = tmp_path / "null.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    opts = MatrixOptions(out=out, launcher="process", time_scale=0.05, show_progress=False)
    result = run_matrix(load_experiment(path), opts, experiment_path=path)
    assert [o.status for o in result.outcomes] == ["done", "done"]

    rs = load_artifacts(out)
    single = speculative(single_request(rs.runs))
    assert len(single) == 2
    family = claim_family(rs, single, [])
    # decode (ranking, within engine, within method: one test) and TTFT between the twins
    assert sorted(k[0] for k in family.raw) == ["decode", "ttft"]
    # Holm over two claims: the smaller p doubled, the larger kept (never below it), capped at 1
    (small, p_small), (large, p_large) = sorted(family.raw.items(), key=lambda kv: kv[1])
    assert family.adjusted[small] == min(1.0, 2 * p_small)
    assert family.adjusted[large] == min(1.0, max(p_large, family.adjusted[small]))
    text = render_report(out, tmp_path / "report").read_text(encoding="utf-8")
    assert "family of 2 significance claims" in text
    decode = next(k for k in family.raw if k[0] == "decode")
    if decode in family.significant():
        assert "(faster than the next, Holm-adjusted" in text
    else:
        assert "(not significantly faster than the next: Welch t-test" in text
