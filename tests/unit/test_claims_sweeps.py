"""bench.report (claims): the concurrency sweep's rules on hand-built runs — levels, the peak as a
rule over noise, how far throughput scales, the admission cap and the levels it queues, TTFT
growth past the peak, and the Holm-adjusted p of the peak (found by mutation testing,
docs/MUTATION.md)."""

from __future__ import annotations

import math

from bench.report import Figure, RunView
from bench.report._claims import ConcurrencySweep, Family, _peak_tests, claim_key, sweeps
from bench.report._model import ConcurrencyFact, ConfigInfo, RunSet


def agg(*samples: float) -> Figure:
    n = len(samples)
    mean = sum(samples) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1))
    return Figure(mean=mean, stddev=sd, n=n, samples=samples)


def level(c: int, aggregate: Figure, ttft: float | None, **kw: object) -> RunView:
    return RunView(
        key=f"s-c{c}",
        config="s",
        engine="vllm",
        method="DFLASH",
        concurrency=c,
        decode=Figure(mean=100.0 / c),
        ttft=Figure(mean=ttft),
        aggregate=aggregate,
        **kw,  # type: ignore[arg-type]
    )


def rs(
    *runs: RunView, info: ConfigInfo | None = None, fact: ConcurrencyFact | None = None
) -> RunSet:
    return RunSet(
        source_kind="artifacts",
        source="s",
        title="t",
        runs=runs,
        configs=(info,) if info else (),
        concurrency_facts=(fact,) if fact else (),
    )


CLEAR = (
    level(1, agg(99.0, 100.0, 101.0), 10.0),
    level(2, agg(199.0, 200.0, 201.0), 20.0),
    level(4, agg(399.0, 400.0, 401.0), 40.0),
)


def one(runset: RunSet, family: Family | None = None) -> ConcurrencySweep:
    [s] = sweeps(runset, family)
    return s


def test_a_clean_climb_with_a_declared_level_beyond_it() -> None:
    info = ConfigInfo(
        name="s",
        concurrency=(1, 2, 4, 8),
        flags=("--max-num-seqs", "4"),
        admission_source="flag --max-num-seqs",
    )
    s = one(rs(*CLEAR, info=info))
    assert (s.config, s.engine, s.method) == ("s", "vllm", "DFLASH")
    assert s.levels == [1, 2, 4, 8]
    assert [(p.concurrency, p.aggregate, p.ttft, p.per_stream, p.valid) for p in s.points] == [
        (1, 100.0, 10.0, 100.0, True),
        (2, 200.0, 20.0, 50.0, True),
        (4, 400.0, 40.0, 25.0, True),
    ]
    assert (s.peak, s.peak_aggregate, s.scales_through) == (4, 400.0, 4)
    assert (s.admission_cap, s.queued_levels, s.cause) == (4, [8], "flag --max-num-seqs")
    assert s.ttft_growth is None and s.highest_mean_level is None
    assert s.peak_p_adjusted is None


def test_the_peak_p_is_the_largest_adjusted_p_below_it() -> None:
    runs = {r.concurrency: r for r in CLEAR}
    k14 = claim_key("aggregate", runs[1], runs[4])
    k24 = claim_key("aggregate", runs[2], runs[4])
    # Holm over 3: 0.001 x 3 = 0.003; 0.004 x 2 = 0.008; 0.5 x 1 = 0.5
    fam = Family.of({k14: 0.001, k24: 0.004, ("decode", "x", "y"): 0.5})
    s = one(rs(*CLEAR), fam)
    assert s.peak == 4 and s.peak_p_adjusted == 0.008
    # a family without the sweep's tests has no adjusted p for its peak
    assert one(rs(*CLEAR), Family.of({("decode", "x", "y"): 0.5})).peak_p_adjusted is None
    # the family holds that c=2 is not below c=4: the peak moves down to c=2
    held = Family.of({k14: 0.001, k24: 0.3})
    s2 = one(rs(*CLEAR), held)
    assert (s2.peak, s2.highest_mean_level, s2.peak_p_adjusted) == (2, 4, 0.002)
    assert s2.ttft_growth == (20.0, 40.0)


def test_a_plateau_within_noise_and_a_drop() -> None:
    plateau = (
        level(1, agg(99.0, 100.0, 101.0), 10.0),
        level(2, agg(180.0, 200.0, 220.0), 20.0),
        level(4, agg(185.0, 205.0, 225.0), 80.0),
        level(8, agg(800.0, 800.0, 800.0), 90.0, valid=False),
    )
    s = one(rs(*plateau))
    assert (s.peak, s.peak_aggregate, s.highest_mean_level) == (2, 200.0, 4)
    assert s.scales_through == 4  # 100 <= 200 <= 205: the maximum so far at every valid level
    assert s.ttft_growth == (20.0, 80.0)
    assert [p.valid for p in s.points] == [True, True, True, False]
    drop = (
        level(1, agg(99.0, 100.0, 101.0), 10.0),
        level(2, agg(299.0, 300.0, 301.0), 20.0),
        level(4, agg(249.0, 250.0, 251.0), 30.0),
    )
    d = one(rs(*drop))
    assert (d.peak, d.scales_through, d.highest_mean_level) == (2, None, None)
    assert d.ttft_growth == (20.0, 30.0)
    flat = (level(1, agg(99.0, 100.0, 101.0), 10.0), level(2, agg(99.0, 100.0, 101.0), None))
    f = one(rs(*flat))
    assert (f.peak, f.scales_through, f.ttft_growth) == (1, 2, None)


def test_published_facts_fill_what_the_runs_cannot_say() -> None:
    fact = ConcurrencyFact(
        config="s", peak_concurrency=16, scales_through=8, admission_cap=12, cause="published"
    )
    runs = (
        level(1, Figure(), 10.0),
        level(16, Figure(), 90.0),
        level(4, agg(1.0, 2.0, 3.0), 1.0, attempt="first try"),
    )
    info = ConfigInfo(name="s", flags=("--max-num-seqs=4",), admission_source="flag")
    s = one(rs(*runs, info=info, fact=fact))
    assert s.levels == [1, 16]
    assert (s.peak, s.peak_aggregate, s.scales_through) == (16, None, 8)
    assert (s.admission_cap, s.queued_levels, s.cause) == (12, [16], "published")
    # without the fact: the flags give the cap, the lock names the cause
    s2 = one(rs(*runs, info=info))
    assert (s2.peak, s2.scales_through, s2.admission_cap, s2.cause) == (None, None, 4, "flag")
    assert s2.queued_levels == [16]


def test_one_level_is_no_sweep_unless_the_lock_declares_more() -> None:
    single = (level(1, agg(99.0, 100.0, 101.0), 10.0),)
    assert sweeps(rs(*single)) == []
    s = one(rs(*single, info=ConfigInfo(name="s", concurrency=(1, 2))))
    assert s.levels == [1, 2] and s.peak is None and s.scales_through is None
    assert s.admission_cap is None and s.queued_levels == [] and s.cause is None


def test_peak_tests_use_valid_levels_only() -> None:
    c1 = level(1, agg(99.0, 100.0, 101.0), 10.0)
    c2 = level(2, agg(199.0, 200.0, 201.0), 20.0)
    c4 = level(4, agg(900.0, 901.0, 902.0), 30.0, valid=False)
    assert _peak_tests([c1, c2, c4]) == [
        (claim_key("aggregate", c1, c2), c1.aggregate, c2.aggregate)
    ]
    assert _peak_tests([c1, c4]) == []
