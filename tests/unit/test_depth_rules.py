"""bench.report (depth): the depth sweep's rules on hand-built runs — tokens per step and step
time, the p of each k against the fastest, the best k, the declared k, and which runs form a
sweep (branches found by mutation testing, docs/MUTATION.md)."""

from __future__ import annotations

import math

import pytest

from bench.report import Figure, RunView
from bench.report._claims import Family, claim_key
from bench.report._depth import (
    ALPHA,
    DepthPoint,
    best_k,
    depth_sweeps,
    depth_tests,
    expected_tokens_per_step,
)
from bench.report._model import ConfigInfo, RunSet


def dec(*samples: float) -> Figure:
    n = len(samples)
    mean = sum(samples) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1)) if n > 1 else None
    return Figure(mean=mean, stddev=sd, n=n, samples=samples)


def point_run(k: int, decode: Figure, c: int = 1, **kw: object) -> RunView:
    base: dict[str, object] = {
        "key": f"d-k{k}-c{c}",
        "config": f"d-k{k}",
        "engine": "vllm",
        "method": "DFLASH",
        "spec_tokens": k,
        "concurrency": c,
        "decode": decode,
    }
    base |= kw
    return RunView(**base)  # type: ignore[arg-type]


def info(k: int, declared: int | str | None = None, **kw: object) -> ConfigInfo:
    devs = () if declared is None else ({"flag": "speculative tokens", "seed": str(declared)},)
    base: dict[str, object] = {
        "name": f"d-k{k}",
        "spec_tokens": k,
        "depth_of": "d",
        "deviations": devs,
    }
    base |= kw
    return ConfigInfo(**base)  # type: ignore[arg-type]


def rs(runs: list[RunView], configs: list[ConfigInfo]) -> RunSet:
    return RunSet(
        source_kind="artifacts", source="s", title="t", runs=tuple(runs), configs=tuple(configs)
    )


def test_expected_tokens_per_step_with_one_draft() -> None:
    # 1 draft, 1 accepted at position 1: E = 1 + 1/1 = 2
    assert expected_tokens_per_step([1], 1) == 2.0
    assert expected_tokens_per_step([1, 1], 2) == 2.0  # 1 + 1/2 + 1/2


def test_points_step_time_and_p_against_the_fastest() -> None:
    # k=2: 90 tok/s with E = 1 + 80/100 + 40/100 = 2.2 -> 1000 * 2.2 / 90 ms per step
    k2 = point_run(2, dec(89.0, 90.0, 91.0), drafts=100, accepted_per_position=(80, 40))
    k3 = point_run(3, dec(99.0, 100.0, 101.0), drafts=0, accepted_per_position=(1, 1, 1))
    k4 = point_run(4, dec(98.0, 100.5, 103.0))
    runs = [k4, k2, k3]
    [s] = depth_sweeps(rs(runs, [info(2, 4), info(3, 4), info(4)]))
    p2, p3, p4 = s.points
    assert [p.k for p in s.points] == [2, 3, 4]
    assert p2.per_position == pytest.approx((0.8, 0.4))
    assert p2.tokens_per_step == pytest.approx(2.2)
    assert p2.step_ms == pytest.approx(1000 * 2.2 / 90.0)
    assert p3.per_position == () and p3.tokens_per_step is None and p3.step_ms is None
    assert p4.p_vs_best is None  # the fastest mean is not tested against itself
    # k=2 against k=4: clearly slower; k=3 against k=4: within the noise
    assert p2.p_vs_best is not None and p2.p_vs_best < ALPHA
    assert p3.p_vs_best is not None and p3.p_vs_best > ALPHA
    assert (s.best_k, s.fastest_k, s.declared_k) == (3, 4, 4)
    assert (s.group, s.engine, s.method, s.concurrency) == ("d", "vllm", "DFLASH", 1)
    assert s.per_position_exported and not s.holm
    assert s.references == ()
    tests = depth_tests(rs(runs, [info(2, 4), info(3, 4), info(4)]))
    assert set(tests) == {claim_key("decode", k2, k4), claim_key("decode", k3, k4)}
    assert tests[claim_key("decode", k2, k4)] == (k2.decode, k4.decode)


def test_the_family_decides_and_single_samples_are_not_tested() -> None:
    k2 = point_run(2, dec(89.0, 90.0, 91.0))
    k3 = point_run(3, dec(95.0))  # one iteration: no test
    k4 = point_run(4, dec(99.0, 100.0, 101.0))
    fam = Family.of({claim_key("decode", k2, k4): 0.2})
    [s] = depth_sweeps(rs([k2, k3, k4], [info(2), info(3), info(4)]), fam)
    assert [p.p_vs_best for p in s.points] == [0.2, None, None]
    assert s.holm and s.best_k == 2 and s.declared_k == 2
    # the fastest with one iteration: nothing to test against without a family
    lone = point_run(5, dec(120.0))
    [s2] = depth_sweeps(rs([k2, lone], [info(2), info(5)]))
    assert [p.p_vs_best for p in s2.points] == [None, None]
    assert (s2.best_k, s2.fastest_k) == (2, 5)


def test_best_k_rules() -> None:
    def pt(k: int, mean: float | None, p: float | None) -> DepthPoint:
        run = point_run(k, Figure(mean=mean))
        return DepthPoint(
            k=k, run=run, per_position=(), tokens_per_step=None, step_ms=None, p_vs_best=p
        )

    assert best_k([]) == (None, None)
    assert best_k([pt(2, None, None)]) == (None, None)
    # k=2 significantly slower, k=3 exactly at alpha (not below): k=3
    assert best_k([pt(2, 90.0, 0.01), pt(3, 95.0, ALPHA), pt(4, 100.0, None)]) == (3, 4)
    # every shallower k is significantly slower: the fastest
    assert best_k([pt(4, 100.0, None), pt(2, 90.0, 0.01), pt(3, 95.0, 0.02)]) == (4, 4)
    # an untested k counts as not significantly slower
    assert best_k([pt(2, 90.0, None), pt(3, 100.0, None)]) == (2, 3)


def test_declared_k_and_which_runs_form_a_sweep() -> None:
    k2 = point_run(2, dec(89.0, 90.0, 91.0))
    k4 = point_run(4, dec(99.0, 100.0, 101.0))
    # the declared point is the one recorded without a depth deviation
    assert depth_sweeps(rs([k2, k4], [info(2, 4), info(4)]))[0].declared_k == 4
    # only deviations: the seed value of the first point's deviation
    assert depth_sweeps(rs([k2, k4], [info(2, 6), info(4, 6)]))[0].declared_k == 6
    # a seed that is not a number: look at the next configuration
    assert depth_sweeps(rs([k2, k4], [info(2, "auto"), info(4)]))[0].declared_k == 4
    assert depth_sweeps(rs([k2, k4], [info(2, "auto"), info(4, "x")]))[0].declared_k is None
    other_dev = info(2, spec_tokens=2, deviations=({"flag": "port", "seed": "9"},))
    assert depth_sweeps(rs([k2, k4], [other_dev, info(4, 7)]))[0].declared_k == 2
    refs = info(2, depth_references=((7, "recipe"),))
    assert depth_sweeps(rs([k2, k4], [refs, info(4)]))[0].references == ((7, "recipe"),)
    # invalid and superseded runs, and configurations outside a sweep, are left out
    bad = point_run(3, dec(1.0, 2.0, 3.0), valid=False)
    old = point_run(5, dec(1.0, 2.0, 3.0), attempt="first try")
    plain = point_run(6, dec(1.0, 2.0, 3.0))
    configs = [info(2), info(3), info(4), info(5), ConfigInfo(name="d-k6", spec_tokens=6)]
    [s] = depth_sweeps(rs([k2, bad, old, plain, k4], configs))
    assert [p.k for p in s.points] == [2, 4]
    # each concurrency level is its own sweep, in the runs' order
    c4 = [point_run(2, dec(1.0, 2.0, 3.0), c=4), point_run(4, dec(2.0, 3.0, 4.0), c=4)]
    sweeps = depth_sweeps(rs([*c4, k2, k4], [info(2), info(4)]))
    assert [(s.group, s.concurrency) for s in sweeps] == [("d", 4), ("d", 1)]
    assert not sweeps[0].per_position_exported
    assert depth_tests(rs([k2], [info(2)])) == {}


def test_edges_of_a_sweep() -> None:
    # two samples each are enough for a test; a zero mean is still a mean
    k2 = point_run(2, dec(0.0, 0.0))
    k3 = point_run(3, dec(0.4, 0.6))
    [s] = depth_sweeps(rs([k2, k3], [info(2), info(3)]))
    # v = 0 and 0.02 / 2, t = -0.5 / 0.1 = -5, df = 0.01^2 / (0.01^2 / 1) = 1 (Cauchy):
    # p = 2 (1/2 - atan(5) / pi)
    assert s.fastest_k == 3
    assert s.points[0].p_vs_best == pytest.approx(1.0 - 2.0 * math.atan(5.0) / math.pi)
    assert best_k(s.points) == (2, 3)
    # no decode mean anywhere: points, but nothing fastest and nothing tested
    blind = [point_run(2, Figure()), point_run(3, Figure())]
    [b] = depth_sweeps(rs(blind, [info(2), info(3)]))
    assert (b.best_k, b.fastest_k) == (None, None) and [p.p_vs_best for p in b.points] == [
        None,
        None,
    ]
    other = [point_run(7, dec(1.0, 2.0, 3.0), config="e-k7", engine="sglang", method="MTP")]
    # a blind group first does not stop the next group's tests
    e_infos = [
        ConfigInfo(name="e-k7", spec_tokens=7, depth_of="e"),
        ConfigInfo(name="e-k8", spec_tokens=8, depth_of="e"),
    ]
    other.append(point_run(8, dec(2.0, 3.0, 4.0), config="e-k8", engine="sglang", method="MTP"))
    tests = depth_tests(rs([*blind, *other], [info(2), info(3), *e_infos]))
    assert set(tests) == {claim_key("decode", other[0], other[1])}
    # two sweeps at the same concurrency stay apart; a sweep of one point is still a sweep
    single = point_run(4, dec(1.0, 2.0, 3.0), spec_tokens=None)
    sweeps = depth_sweeps(rs([single, *other], [info(4), *e_infos]))
    assert [(s.group, s.engine, s.method, len(s.points)) for s in sweeps] == [
        ("d", "vllm", "DFLASH", 1),
        ("e", "sglang", "MTP", 2),
    ]
    assert sweeps[0].points[0].k == 0  # no spec_tokens recorded
