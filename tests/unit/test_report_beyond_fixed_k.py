"""Issue 48's report sections, each rule with answers worked out by hand: the overhead split at
fixed acceptance, the Pareto frontier (also across hosts in compare), the accuracy gate's two
legs, the acceptance-length check, the methods left out of claims, and CITATION.cff."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_factory import Spec, jitter, write_artifacts

from bench.demo import demo_document
from bench.engines import parse_experiment
from bench.report import compare_hosts, load_artifacts
from bench.report._accuracy import accuracy_section
from bench.report._claims import single_request, speculative
from bench.report._depth import depth_sweeps
from bench.report._frontier import FrontierPoint, frontier, frontier_of
from bench.report._lossless import lossless
from bench.report._methods import method_rows
from bench.report._model import RunView
from bench.report._overhead import overhead_rows
from bench.report._profile import positions, profile_rows
from bench.schema import (
    AccuracyItem,
    AccuracyRecord,
    RunLock,
    SpeculationMode,
    SyntheticAcceptance,
)

pytestmark = pytest.mark.unit

STD = SpeculationMode(verification="standard", lossless=True, fixed_depth=True)
FLY = SpeculationMode(verification="fly", lossless=False, fixed_depth=True,
                      labels=["LOSSY VERIFICATION"])  # fmt: skip
SYN = SpeculationMode(verification="synthetic", lossless=False, fixed_depth=True,
                      labels=["SYNTHETIC ACCEPTANCE"])  # fmt: skip
ADAPT = SpeculationMode(verification="standard", lossless=True, fixed_depth=False,
                        labels=["ADAPTIVE DEPTH"])  # fmt: skip
FORCED = SyntheticAcceptance(of="vllm-dflash", acceptance_length=3.0, knob="k", source="s")


def answers(right: int, total: int, sha: str = "a") -> AccuracyRecord:
    return AccuracyRecord(
        task="t", sha256="e" * 64, source="t.jsonl", scorer="prefix", max_tokens=8, concurrency=1,
        items=[AccuracyItem(id=f"q{i}", expected="x", got="x" if i < right else "y",
                            correct=i < right, output_sha256=(sha if i < right else "b") * 64)
               for i in range(total)],
    )  # fmt: skip


def lock(specs: list[Spec]) -> str:
    """The demo experiment's lock cut to ``specs``' configurations and levels; a name the demo
    does not have is a copy of its vllm-mtp."""
    exp = parse_experiment(demo_document({}), "demo")  # the seed's workload, as the factory's
    have = {c.name: c for c in exp.configurations}
    levels: dict[str, list[int]] = {}
    for sp in specs:
        levels[sp.config] = sorted({*levels.get(sp.config, []), sp.concurrency})
    configs = [
        have.get(n, have["vllm-mtp"]).model_copy(update={"name": n, "concurrency": lv})
        for n, lv in levels.items()
    ]
    return RunLock(
        run_id="test", prompt_seed=0, created_at="2026-12-03T00:00:00+00:00", simulated=True,
        launcher="process", experiment=exp.model_copy(update={"configurations": configs}),
    ).model_dump_json(by_alias=True)  # fmt: skip


def runs(tmp_path: Path, specs: list[Spec]) -> list[RunView]:
    return list(load_artifacts(write_artifacts(tmp_path / "art", specs, lock=lock(specs))).runs)


def test_overhead_splits_a_speedup_into_acceptance_and_step_cost(tmp_path: Path) -> None:
    rs = runs(tmp_path, [
        Spec("vllm-baseline", "vllm", "NONE", jitter(40.0), jitter(60.0), acceptance=None),
        Spec("vllm-dflash", "vllm", "DFLASH", jitter(100.0), jitter(70.0),
             acceptance=(100, 400, 200), speculation=STD),
        Spec("vllm-dflash-synthetic", "vllm", "DFLASH", jitter(80.0), jitter(70.0),
             acceptance=(100, 400, 190), speculation=SYN, synthetic=FORCED),
    ])  # fmt: skip
    (row,) = overhead_rows(rs)
    # real: 100 / 40 = 2.5x at AL 3.0; control: 80 / 40 = 2.0x at AL 2.9; step cost 2.9 / 2.0
    assert (row.real_speedup, row.control_speedup) == (pytest.approx(2.5), pytest.approx(2.0))
    assert row.step_cost == pytest.approx(1.45) and row.real_vs_control == pytest.approx(1.25)
    assert row.al_matches is True  # |2.9 - 3.0| <= 5% of 3.0
    # the control is named, never ranked or compared
    assert [r.config for r in speculative(single_request(rs))] == ["vllm-dflash"]


def test_a_control_off_its_target_acceptance_is_flagged(tmp_path: Path) -> None:
    rs = runs(tmp_path, [
        Spec("vllm-baseline", "vllm", "NONE", jitter(40.0), jitter(60.0), acceptance=None),
        Spec("vllm-dflash-synthetic", "vllm", "DFLASH", jitter(80.0), jitter(70.0),
             acceptance=(100, 400, 160), speculation=SYN, synthetic=FORCED),
    ])  # fmt: skip
    (row,) = overhead_rows(rs)
    assert row.control_al == pytest.approx(2.6) and row.al_matches is False
    assert row.real_speedup is None  # its source has no run here


def test_pareto_points_are_those_no_point_beats_on_both_axes() -> None:
    def p(name: str, user: float, gpu: float) -> FrontierPoint:
        return FrontierPoint(config=name, engine="vllm", method="MTP", concurrency=1,
                             per_user=user, per_gpu=gpu)  # fmt: skip

    pts = frontier_of([p("a", 100, 50), p("b", 90, 180), p("c", 85, 40), p("d", 90, 170),
                       p("e", 100, 50)])  # fmt: skip
    # a and e tie (neither beats the other), b beats d and c
    assert [x.pareto for x in pts] == [True, True, False, False, True]


def test_frontier_divides_by_the_gpus_and_leaves_off_what_is_not_lossless(
    tmp_path: Path,
) -> None:
    rs = runs(tmp_path, [
        Spec("vllm-mtp", "vllm", "MTP", jitter(100.0), jitter(70.0), aggregate=jitter(100.0),
             speculation=STD),
        Spec("vllm-mtp", "vllm", "MTP", jitter(90.0), jitter(90.0), concurrency=4,
             aggregate=jitter(360.0), speculation=STD),
        Spec("fly", "vllm", "MTP", jitter(120.0), jitter(70.0), speculation=FLY),
        Spec("vllm-baseline", "vllm", "NONE", jitter(40.0), jitter(60.0), acceptance=None),
    ])  # fmt: skip
    f = frontier(rs)
    got = {(x.config, x.concurrency): (x.per_gpu, x.pareto) for x in f.points}
    assert got == {
        ("vllm-mtp", 1): (50.0, True),
        ("vllm-mtp", 4): (180.0, True),
        ("vllm-baseline", 1): (20.0, False),
    }
    assert f.pareto_configs == ("vllm-mtp",) and f.left_off == (("fly", "LOSSY VERIFICATION"),)


def test_compare_puts_every_host_on_one_frontier(tmp_path: Path) -> None:
    def host(name: str, decode: float) -> Path:
        specs = [
            Spec("vllm-mtp", "vllm", "MTP", jitter(decode), jitter(70.0), simulated=False),
            Spec("vllm-baseline", "vllm", "NONE", jitter(40.0), jitter(60.0), acceptance=None,
                 simulated=False),
        ]  # fmt: skip
        return write_artifacts(tmp_path / name, specs, lock=lock(specs))

    cmp = compare_hosts([host("gpu1", 100.0), host("gpu2", 110.0)])
    assert cmp.frontier.pareto_configs == ("vllm-mtp @ gpu2",)
    assert len(cmp.frontier.points) == 4


def test_the_gate_needs_both_accuracy_and_greedy_equivalence(tmp_path: Path) -> None:
    rs = runs(tmp_path, [
        Spec("vllm-baseline", "vllm", "NONE", jitter(40.0), jitter(60.0), acceptance=None,
             accuracy=answers(20, 20)),
        Spec("same", "vllm", "MTP", jitter(90.0), jitter(60.0), accuracy=answers(20, 20),
             speculation=STD),
        # 19/20 is 95% of the baseline's 100%: below 97%; its wrong answer is another output
        Spec("worse", "vllm", "MTP", jitter(90.0), jitter(60.0), accuracy=answers(19, 20),
             speculation=STD),
        # every answer right, but worded otherwise and no greedy check to say why: not equivalent
        Spec("reworded", "vllm", "MTP", jitter(90.0), jitter(60.0),
             accuracy=answers(20, 20, sha="c"), speculation=STD),
        Spec("control", "vllm", "MTP", jitter(90.0), jitter(60.0), accuracy=answers(10, 20),
             speculation=SYN, synthetic=FORCED),
    ])  # fmt: skip
    sec = accuracy_section(rs, lossless(rs, every_method=True), {"accuracy": {"min_ratio": 0.97}})
    assert sec is not None
    v = {r.config: (r.verdict, r.ratio) for r in sec.rows}
    assert v["vllm-baseline"] == ("reference", 1.0)
    assert v["same"] == ("PASS", 1.0)
    assert v["worse"] == ("FAIL (accuracy and greedy)", pytest.approx(0.95))
    assert v["reworded"] == ("FAIL (greedy)", 1.0)
    assert v["control"][0].startswith("not gated: SYNTHETIC ACCEPTANCE")


def test_acceptance_length_both_ways_and_the_marginal_check(tmp_path: Path) -> None:
    rs = runs(tmp_path, [
        # counters: 100 drafts, 150 accepted: AL 2.5 per step; per position 85 and 65
        # requests (5 a level, cycled): (30 steps, 60 accepted) -> 3.0, (70, 90) -> 2.2857
        Spec("vllm-mtp", "vllm", "MTP", jitter(90.0), jitter(60.0), acceptance=(100, 200, 150),
             accepted_per_position=(85, 65), request_counts=[(30, 60), (70, 90)]),
        # per-position counts that do not add up to the accepted counter: the check fails
        Spec("odd", "vllm", "MTP", jitter(90.0), jitter(60.0), acceptance=(100, 200, 150),
             accepted_per_position=(85, 60)),
    ])  # fmt: skip
    rows = {r.config: r for r in profile_rows(rs)}
    mtp = rows["vllm-mtp"]
    assert mtp.per_step_al == pytest.approx(2.5) and mtp.check_ok is True
    assert mtp.requests == 5  # 5 iterations x 1 stream: 3.0, 2.2857, 3.0, 2.2857, 3.0
    assert mtp.per_request_al == pytest.approx((3 * 3.0 + 2 * (1 + 90 / 70)) / 5)
    assert [(q.marginal, q.conditional) for q in mtp.positions] == [
        (0.85, 0.85), (0.65, pytest.approx(65 / 85))]  # fmt: skip
    assert rows["odd"].check_al == pytest.approx(2.45) and rows["odd"].check_ok is False
    assert positions([], 10) == ()


def test_methods_are_named_and_left_out_of_the_best_k(tmp_path: Path) -> None:
    from report_factory import depth_lock

    def s(k: int, decode: float, sp: SpeculationMode) -> Spec:
        return Spec(f"vllm-dflash-k{k}", "vllm", "DFLASH", [decode, decode + 1, decode - 1],
                    [70.0, 71.0, 72.0], spec_tokens=k, draft_model="d", speculation=sp)  # fmt: skip

    specs = [s(2, 90.0, STD), s(3, 100.0, STD), s(4, 130.0, ADAPT)]
    rset = load_artifacts(write_artifacts(tmp_path / "art", specs, lock=depth_lock(specs)))
    (sweep,) = depth_sweeps(rset)
    assert sweep.best_k == 3 and [p.k for p in sweep.points] == [2, 3]  # k=4 chose its own depth
    (row,) = method_rows(rset.runs)
    assert row.config == "vllm-dflash-k4" and row.excluded_from == ("the depth sweep's best k",)
