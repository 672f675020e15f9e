"""Issue 37: the report's per-category speedups (ratio, its 95% CI, the family's verdict), the
seed host's categories experiment and plan's estimate for it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.core import InputError
from bench.demo import categories_document
from bench.engines import load_experiment
from bench.matrix._plan import categories, estimate
from bench.report._categories import category_section, category_tests, ratio_ci
from bench.report._claims import Family
from bench.report._model import CategoryView, Figure, RunSet, RunView
from bench.schema import EXPERIMENTS_DIR

SEED = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
CATS = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090-categories.yaml"


def fig(*xs: float) -> Figure:
    m = math.fsum(xs) / len(xs)
    sd = math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return Figure(mean=m, stddev=sd, n=len(xs), samples=xs)


def test_the_ratio_ci_is_the_delta_method_on_the_log_ratio() -> None:
    a, b = fig(20.0, 22.0, 21.0), fig(10.0, 10.5, 9.5)
    ratio, lo, hi = ratio_ci(a, b)
    assert ratio == pytest.approx(2.1)
    assert lo is not None and hi is not None and lo < 2.1 < hi
    assert math.log(hi / 2.1) == pytest.approx(math.log(2.1 / lo))  # symmetric on the log scale
    va, vb = 1.0 / (3 * 21.0**2), 0.25 / (3 * 10.0**2)
    df = (va + vb) ** 2 / (va * va / 2 + vb * vb / 2)
    from bench.core._stats import t_quantile

    assert math.log(hi / 2.1) == pytest.approx(t_quantile(0.975, df) * math.sqrt(va + vb))
    assert ratio_ci(a, Figure(mean=10.0)) == (2.1, None, None)
    assert ratio_ci(a, Figure()) == (None, None, None)


def run(key: str, engine: str, method: str, c: int, cats: dict[str, Figure]) -> RunView:
    return RunView(
        key=key,
        config=key,
        engine=engine,
        method=method,
        concurrency=c,
        categories=tuple(
            CategoryView(category=k, decode=f, acceptance_rate=None if method == "NONE" else 0.5)
            for k, f in cats.items()
        ),
    )


def test_each_speculative_run_is_compared_with_its_own_engines_baseline_per_category() -> None:
    fast, slow = fig(30.0, 31.0, 29.0), fig(10.0, 10.2, 9.8)
    runs = [
        run("v-mtp-c1", "vllm", "MTP", 1, {"code": fast, "prose": slow}),
        run("v-base-c1", "vllm", "NONE", 1, {"code": slow, "prose": slow}),
        run("s-mtp-c1", "sglang", "MTP", 1, {"code": fast}),  # no SGLang baseline: no speedup
        run("v-mtp-c4", "vllm", "MTP", 4, {"code": fast}),  # no baseline at c=4
    ]
    rs = RunSet(source_kind="artifacts", source="s", title="t", runs=tuple(runs))
    tests = category_tests(rs)
    assert set(tests) == {("decode:code", "v-base-c1", "v-mtp-c1"),
                          ("decode:prose", "v-base-c1", "v-mtp-c1")}  # fmt: skip
    family = Family.of({k: 0.001 if k[0] == "decode:code" else 0.9 for k in tests})
    sec = category_section(rs, family)
    assert sec is not None and sec.categories == ["code", "prose"]
    got = {(s.run.key, s.category): s for s in sec.speedups}
    assert set(got) == {("v-mtp-c1", "code"), ("v-mtp-c1", "prose")}
    assert got["v-mtp-c1", "code"].ratio == pytest.approx(3.0)
    assert got["v-mtp-c1", "code"].significance == "significant"
    assert got["v-mtp-c1", "prose"].ratio == pytest.approx(1.0)
    assert got["v-mtp-c1", "prose"].significance == "not_significant"
    # the table: every run with categories, a cell per category (None where not measured)
    row = next(r for r in sec.rows if r.run.key == "s-mtp-c1")
    assert [c.category if c else None for c in row.cells] == ["code", None]
    assert (
        category_section(
            RunSet(
                source_kind="artifacts",
                source="s",
                title="t",
                runs=(run("x", "vllm", "NONE", 1, {}),),
            ),
            None,
        )
        is None
    )


def test_the_categories_experiment_keeps_the_seeds_configurations() -> None:
    seed: dict[str, Any] = yaml.safe_load(SEED.read_text())
    cats: dict[str, Any] = yaml.safe_load(CATS.read_text())
    want = [c for c in seed["configurations"] if c["name"] != "sglang-mtp-stock"]
    assert cats["configurations"] == want
    for key in ("models", "engine_deviations", "server", "prefix_caching", "gpu_mem_util"):
        assert cats[key] == seed[key], key
    assert {k: v for k, v in cats["images"].items()} == {
        k: v for k, v in seed["images"].items() if k != "sglang-stock"
    }
    exp = load_experiment(CATS)
    assert categories(exp) == ["code", "factual", "prose"]
    assert sum(c.speculative for c in exp.configurations) == 4


def test_plan_counts_every_category_and_refuses_a_changed_prompt_set(tmp_path: Path) -> None:
    exp = load_experiment(CATS)
    synthetic = exp.model_copy(
        update={"workload": exp.workload.model_copy(update={"prompt_set": None})}
    )
    for cfg in exp.configurations:
        with_cats, plain = estimate(exp, cfg), estimate(synthetic, cfg)
        assert with_cats.measure_s == pytest.approx(3 * plain.measure_s)
    doc = categories_document()
    prompts = Path(doc["workload"]["prompt_set"]["path"])
    assert prompts.is_absolute() and prompts.is_file()
    changed = tmp_path / "p.jsonl"
    changed.write_text(prompts.read_text() + '{"category": "code", "prompt": "x"}\n')
    doc["workload"]["prompt_set"]["path"] = str(changed)
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as err:
        categories(load_experiment(path))
    assert err.value.where == "workload.prompt_set.sha256"
