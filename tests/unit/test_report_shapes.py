"""Golden reports, one per shape of experiment (issue 36): the report was written around the
seed's two engines x two methods and said wrong things for any other shape. Each shape is
rendered from a small artifacts folder (tests/report_factory.py) and compared with a reviewed
file under tests/fixtures/reports/, so a template change that breaks one shape fails here.

After a deliberate change: ``SPECBENCH_UPDATE_GOLDEN=1 pytest tests/unit/test_report_shapes.py``
rewrites the golden files; read each diff before committing it.

Beside the goldens, one test per defect the issue found, each stated as the rule it breaks."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from report_factory import (
    HF_ID,
    OUTPUT,
    PROMPT,
    Spec,
    depth_lock,
    jitter,
    lock_for,
    seed_matrix,
    write_artifacts,
    write_sums,
)

from bench.demo import demo_document
from bench.engines import load_experiment, parse_experiment
from bench.report import render_report
from bench.schema import (
    PLAN_FILE,
    AccuracyItem,
    AccuracyRecord,
    Experiment,
    PlanEstimate,
    PlanRecord,
    RunLock,
    SpeculationMode,
    SyntheticAcceptance,
    ValidityReason,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "reports"
EXPERIMENTS = REPO / "bench" / "experiments"
UPDATE = os.environ.get("SPECBENCH_UPDATE_GOLDEN") == "1"


def _lock(exp: Experiment, specs: list[Spec]) -> str:
    """The lock of a matrix of ``exp`` that ran exactly these specs' configurations and levels."""
    levels: dict[str, list[int]] = {}
    for s in specs:
        levels[s.config] = sorted({*levels.get(s.config, []), s.concurrency})
    configs = [
        c.model_copy(update={"concurrency": levels[c.name]})
        for c in exp.configurations
        if c.name in levels
    ]
    # the factory's payloads measure 1044 prompt / 512 output tokens: so does the lock's run
    # (issue 47: a payload of another workload than its lock's is refused)
    workload = exp.workload.model_copy(update={"prompt_tokens": PROMPT, "max_tokens": OUTPUT})
    target = exp.target.model_copy(update={"hf_id": HF_ID})
    models = {**exp.models, exp.target_model: target}
    lock = RunLock(
        run_id="test",
        prompt_seed=0,
        created_at="2026-12-03T00:00:00+00:00",
        simulated=True,
        launcher="process",
        experiment=exp.model_copy(
            update={"configurations": configs, "workload": workload, "models": models}
        ),
    )
    return lock.model_dump_json(by_alias=True)


def seed_2x2() -> tuple[list[Spec], str]:
    """The seed's shape: vLLM and SGLang, each with DFlash and MTP, and a DFlash sweep."""
    specs = seed_matrix()
    return specs, lock_for(specs)


def one_engine_three_methods() -> tuple[list[Spec], str]:
    """vLLM alone with DFlash, MTP and n-gram, and its baseline (tiny-vllm-cpu-seed plus an
    n-gram configuration)."""
    exp = load_experiment(EXPERIMENTS / "tiny-vllm-cpu-seed.yaml")
    mtp = next(c for c in exp.configurations if c.name == "mtp")
    ngram = mtp.model_copy(
        update={
            "name": "ngram",
            "method": "NGRAM",
            "spec_num_tokens": 3,
            "args": [
                *mtp.args[:-1],
                '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}',
            ],
            "notes": "Prompt lookup: no draft model.",
        }
    )
    exp = exp.model_copy(update={"configurations": [*exp.configurations, ngram]})
    specs = [
        Spec("baseline", "vllm", "NONE", jitter(80.0, 20), jitter(20.0, 5)),
        Spec(
            "dflash",
            "vllm",
            "DFLASH",
            jitter(120.0, 20),
            jitter(22.0, 5),
            draft_model="d",
            spec_tokens=4,
        ),
        Spec("mtp", "vllm", "MTP", jitter(105.0, 20), jitter(21.0, 5), spec_tokens=2),
        Spec("ngram", "vllm", "NGRAM", jitter(90.0, 20), jitter(20.5, 5), spec_tokens=3),
    ]
    return specs, _lock(exp, specs)


def same_engine_and_method() -> tuple[list[Spec], str]:
    """Two draft-model configurations of vLLM (the target as its own draft, a partial draft)
    at concurrency 1 and 4 under an admission cap of 4, a baseline and an invalid eager run:
    the shape of docs/gpu-tiny-example."""
    exp = load_experiment(EXPERIMENTS / "tiny-vllm-gpu.yaml")
    eager_reason = ValidityReason(
        code="cuda_graphs_not_captured", message="no decode CUDA graph capture in the server log"
    )
    specs = [
        Spec("baseline", "vllm", "NONE", jitter(470.0, 20), jitter(16.0)),
        Spec("baseline", "vllm", "NONE", jitter(440.0, 20), jitter(28.0), concurrency=4),
        Spec("self-draft", "vllm", "DRAFT_MODEL", jitter(540.0, 20), jitter(16.0),
             draft_model="specbench/tiny-qwen3", spec_tokens=3),
        Spec("self-draft", "vllm", "DRAFT_MODEL", jitter(550.0, 20), jitter(27.0),
             concurrency=4, draft_model="specbench/tiny-qwen3", spec_tokens=3),
        Spec("partial-draft", "vllm", "DRAFT_MODEL", jitter(410.0, 20), jitter(13.5),
             draft_model="specbench/tiny-qwen3-draft", spec_tokens=3),
        Spec("partial-draft", "vllm", "DRAFT_MODEL", jitter(380.0, 20), jitter(28.0),
             concurrency=4, aggregate=jitter(600.0, 2000), draft_model="specbench/tiny-qwen3-draft",
             spec_tokens=3),
        Spec("eager", "vllm", "NONE", jitter(250.0, 20), jitter(16.0), reasons=[eager_reason]),
    ]  # fmt: skip
    return specs, _lock(exp, specs)


def single_configuration() -> tuple[list[Spec], str]:
    """One configuration, one level: vLLM with DFlash (tiny-vllm-gpu-dflash)."""
    exp = load_experiment(EXPERIMENTS / "tiny-vllm-gpu-dflash.yaml")
    specs = [Spec("dflash", "vllm", "DFLASH", jitter(500.0, 10), jitter(19.0), spec_tokens=3)]
    return specs, _lock(exp, specs)


def depth_sweep() -> tuple[list[Spec], str]:
    """vLLM DFlash at k = 2, 3, 4 (the depth experiment), per-position counters exported."""

    def s(k: int, decode: list[float], per_pos: tuple[int, ...]) -> Spec:
        return Spec(
            f"vllm-dflash-k{k}",
            "vllm",
            "DFLASH",
            decode,
            [70.0, 71.0, 72.0],
            spec_tokens=k,
            draft_model="d",
            acceptance=(100, 100 * k, sum(per_pos)),
            accepted_per_position=per_pos,
        )

    specs = [
        s(2, [90.0, 91.0, 89.0], (80, 56)),
        s(3, [100.0, 101.0, 99.5], (80, 56, 34)),
        s(4, [100.5, 101.5, 100.0], (80, 56, 34, 17)),
    ]
    return specs, depth_lock(specs)


def _answers(n: int, wrong: int = 0, differ: int = 0) -> AccuracyRecord:
    """``n`` answers of the emulator's task: the last ``wrong`` wrong (another output), the
    ``differ`` before them right but worded otherwise (another output)."""
    items = []
    for i in range(n):
        bad, other = i >= n - wrong, n - wrong - differ <= i < n - wrong
        items.append(
            AccuracyItem(
                id=f"e{i + 1:02d}",
                expected="w0 w1 w2",
                got="d2 d3" if bad else "w0 w1 w2",
                correct=not bad,
                completion_tokens=8,
                output_sha256=("b" if bad else "c" if other else "a") * 64,
            )
        )
    return AccuracyRecord(
        task="emulator-continuation",
        sha256="e" * 64,
        source="bench/prompts/emulator-continuation.jsonl",
        scorer="prefix",
        max_tokens=8,
        concurrency=1,
        items=items,
    )


def beyond_fixed_k() -> tuple[list[Spec], str]:
    """Issue 48: the demo's experiment (the seed's with a SYNTHETIC ACCEPTANCE control of vLLM
    DFlash, vLLM MTP with FLy's lossy verification, SGLang DFlash with adaptive depth and an
    accuracy task), each with the records the matrix writes; figures chosen by hand (the
    golden's expected overhead at c=1: speedups 100/40 = 2.5 and 95/40 = 2.375, step cost
    2.95/2.375 = 1.242, real/control 1.053)."""
    exp = parse_experiment(demo_document(), "demo")
    lossless = SpeculationMode(verification="standard", lossless=True, fixed_depth=True)
    fly = SpeculationMode(
        verification="fly",
        lossless=False,
        fixed_depth=True,
        labels=["LOSSY VERIFICATION"],
        from_config=['--speculative-config rejection_sample_method: "fly"'],
        from_log=[
            "WARNING [speculative.py:2031] FLy verification is a lossy speculative decoding method"
        ],
    )
    adaptive = SpeculationMode(
        verification="standard",
        lossless=True,
        fixed_depth=False,
        labels=["ADAPTIVE DEPTH"],
        from_config=["--speculative-adaptive"],
        from_log=["server_args={... 'speculative_adaptive': True ...}"],
    )
    synthetic = SpeculationMode(
        verification="synthetic", lossless=False, fixed_depth=True, labels=["SYNTHETIC ACCEPTANCE"]
    )
    forced = SyntheticAcceptance(
        of="vllm-dflash",
        acceptance_length=3.0,
        rates=[0.8, 0.6, 0.4, 0.2],
        knob='--speculative-config {"rejection_sample_method":"synthetic"}',
        source="vllm-dflash-c1.json, vllm-dflash-c4.json: 400 accepted over 200 drafts",
    )
    base = SpeculationMode(verification="none", lossless=True, fixed_depth=True)
    specs = [
        Spec("vllm-dflash", "vllm", "DFLASH", jitter(100.0), jitter(70.0), draft_model="d",
             acceptance=(100, 400, 200), accepted_per_position=(80, 60, 40, 20),
             speculation=lossless, accuracy=_answers(12)),
        Spec("vllm-dflash", "vllm", "DFLASH", jitter(90.0), jitter(90.0), concurrency=4,
             draft_model="d", acceptance=(100, 400, 200), accepted_per_position=(80, 60, 40, 20),
             speculation=lossless),
        Spec("vllm-dflash-synthetic", "vllm", "DFLASH", jitter(95.0), jitter(70.0),
             draft_model="d", acceptance=(100, 400, 195), accepted_per_position=(80, 58, 38, 19),
             speculation=synthetic, synthetic=forced, accuracy=_answers(12, wrong=1)),
        Spec("vllm-dflash-synthetic", "vllm", "DFLASH", jitter(86.0), jitter(90.0),
             concurrency=4, draft_model="d", acceptance=(100, 400, 330),
             accepted_per_position=(100, 100, 80, 50), speculation=synthetic, synthetic=forced),
        Spec("vllm-mtp", "vllm", "MTP", jitter(70.0), jitter(69.0), acceptance=(100, 200, 150),
             accepted_per_position=(85, 65), request_counts=[(30, 60), (70, 90)],
             speculation=lossless, accuracy=_answers(12, differ=1)),
        Spec("vllm-mtp-fly", "vllm", "MTP", jitter(75.0), jitter(69.0),
             acceptance=(100, 200, 170), accepted_per_position=(90, 80), speculation=fly,
             accuracy=_answers(12, wrong=2)),
        Spec("sglang-dflash", "sglang", "DFLASH", jitter(85.0), jitter(66.0), draft_model="d",
             acceptance=(100, 400, 180), speculation=lossless, accuracy=_answers(12)),
        Spec("sglang-dflash-adaptive", "sglang", "DFLASH", jitter(80.0), jitter(66.0),
             draft_model="d", acceptance=(100, 300, 150), speculation=adaptive,
             accuracy=_answers(12)),
        Spec("vllm-baseline", "vllm", "NONE", jitter(40.0), jitter(60.0), speculation=base,
             accuracy=_answers(12)),
        Spec("vllm-baseline", "vllm", "NONE", jitter(35.0), jitter(80.0), concurrency=4,
             speculation=base),
        Spec("sglang-baseline", "sglang", "NONE", jitter(38.0), jitter(58.0), speculation=base,
             accuracy=_answers(12)),
    ]  # fmt: skip
    return specs, _lock(exp, specs)


def _plan(root: Path, lock: str) -> None:
    """plan.json as the matrix writes it: 95 s to start each server, 60 s to measure it."""
    exp = RunLock.model_validate_json(lock).experiment
    record = PlanRecord(
        experiment="bench/experiments/demo.yaml",
        basis="ESTIMATE from the emulator profiles",
        estimates=[PlanEstimate(name=c.name, start_s=95.0, measure_s=60.0)
                   for c in exp.configurations],
    )  # fmt: skip
    (root / PLAN_FILE).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")


SHAPES: dict[str, Callable[[], tuple[list[Spec], str]]] = {
    "seed-2x2": seed_2x2,
    "one-engine-three-methods": one_engine_three_methods,
    "same-engine-and-method": same_engine_and_method,
    "single-configuration": single_configuration,
    "depth-sweep": depth_sweep,
    "beyond-fixed-k": beyond_fixed_k,
}


def render_shape(name: str, root: Path) -> tuple[str, Path]:
    specs, lock = SHAPES[name]()
    art = write_artifacts(root / "art", specs, lock=lock)
    if name == "beyond-fixed-k":
        _plan(art, lock)
        write_sums(art)  # the matrix lists plan.json in SHA256SUMS with the rest
    path = render_report(art, root / "out")
    # file digests follow the payload schema, not the report: a golden names them by place
    text = re.sub(r"\b[0-9a-f]{64}\b", "<sha256>", path.read_text(encoding="utf-8"))
    return text, path.parent


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Path]]:
    return {name: render_shape(name, tmp_path_factory.mktemp(name)) for name in SHAPES}


@pytest.mark.parametrize("name", list(SHAPES))
def test_report_matches_its_golden_file(name: str, rendered: dict[str, tuple[str, Path]]) -> None:
    text = rendered[name][0]
    golden = GOLDEN / f"{name}.md"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"{golden} missing: run with SPECBENCH_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), (
        f"{name}: the report differs from {golden.relative_to(REPO)}; if the change is meant, "
        "rerun with SPECBENCH_UPDATE_GOLDEN=1 and read the diff"
    )


# --- the defects of issue 36, one rule each ---------------------------------------------------


def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def test_configurations_sharing_engine_and_method_are_named_everywhere(
    rendered: dict[str, tuple[str, Path]],
) -> None:
    text, out = rendered["same-engine-and-method"]
    assert "vLLM + draft model," not in text and "vLLM + draft model |" not in text
    ranking = _section(text, "## Decode ranking")
    assert "vLLM + draft model (self-draft):" in ranking
    assert "vLLM + draft model (partial-draft):" in ranking
    for heading in ("## Measurement stability", "## Speculative acceptance evidence"):
        rows = _section(text, heading)
        assert "| vLLM + draft model (self-draft) |" in rows
        assert "| vLLM + draft model (partial-draft) |" in rows
    assert "vLLM + draft model (partial-draft) continued scaling" in text or (
        "vLLM + draft model (partial-draft) peaked" in text
    )
    # the setting that tells them apart is stated
    setup = _section(text, "## Test setup")
    assert "(differs from partial-draft in the draft model)" in setup
    # the valid baseline beside an invalid eager run: the eager run is the one named
    assert "### vLLM + no speculation (eager), concurrency 1" in text
    # and the charts
    for chart in ("decode.svg", "acceptance.svg", "concurrency.svg"):
        svg = (out / chart).read_text()
        assert "self-draft" in svg and "partial-draft" in svg, chart
    # where the pair is not shared the label stays short
    seed = rendered["seed-2x2"][0]
    assert "1. vLLM + DFlash: 109.36 tok/s" in seed


def test_engine_comparisons_only_across_engines_method_comparisons_only_across_methods(
    rendered: dict[str, tuple[str, Path]],
) -> None:
    text = rendered["same-engine-and-method"][0]
    assert "Within draft model" not in text  # no engine comparison of vLLM with vLLM
    assert "## Engine comparison" not in text
    assert not re.search(r"between draft model \([^)]*\) and draft model", text)
    assert "## Method comparison" not in text  # one speculative method: nothing to compare
    assert "On vLLM with draft model, " in _section(
        text, "## Configurations with the same engine and method"
    )
    three = rendered["one-engine-three-methods"][0]
    assert "## Method comparison on vLLM" in three and "## Engine comparison" not in three
    assert "on every engine" not in three and "within each engine" not in three
    assert "With DFlash, " not in three  # no TTFT leader among one engine's runs


def test_headings_count_what_is_there(rendered: dict[str, tuple[str, Path]]) -> None:
    expected = {
        "seed-2x2": "## Four-way single-request results",
        "one-engine-three-methods": "## Three-way single-request results",
        "same-engine-and-method": "## Two-way single-request results",
        "single-configuration": "## Single-request result\n",
    }
    for name, heading in expected.items():
        text = rendered[name][0]
        assert heading in text, name
        if name != "seed-2x2":
            assert "Four-way" not in text, name
    single = rendered["single-configuration"][0]
    assert "## Decode ranking" not in single and "compares 1 " not in single
    assert "This report measures one speculative-decoding configuration" in single
    assert "every gap in the ranking" not in single and "choose vLLM + DFlash" not in single


def test_a_cause_is_stated_only_with_its_evidence(rendered: dict[str, tuple[str, Path]]) -> None:
    text = rendered["same-engine-and-method"][0]
    conc = _section(text, "## Concurrency")
    assert "queued" not in conc  # concurrency 4 is within the admission cap of 4
    assert "TTFT rose from 13.50 ms at concurrency 1 to 28.00 ms at concurrency 4, within " in (
        conc
    )
    # where the cap is below the offered concurrency, queueing is the evidence's conclusion
    seed = rendered["seed-2x2"][0]
    assert "offered concurrency 8 and 16 queued in waves" in seed


def test_a_note_ending_in_a_period_gives_one_full_stop(
    rendered: dict[str, tuple[str, Path]],
) -> None:
    for name, (text, _) in rendered.items():
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        assert not re.search(r"(?<!\.)\.\.(?!\.)", prose), name
    text = rendered["same-engine-and-method"][0]
    assert "acceptance is \\>= 0.98, not exactly 1.0." in text
