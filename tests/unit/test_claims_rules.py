"""bench.report (claims): every branch of the rules that name a winner, with p-values worked out
by hand (branches found by mutation testing, docs/MUTATION.md).

Reference p-values, from the closed forms of Student's t CDF (see test_stats_reference.py):
- samples 1,2,3 against 4,5,6 (or mean 2 / 5, sd 1, n 3): t = -3 / sqrt(2/3), df = 4,
  p = 2 (1 - F_4(3.6742346)) = 0.0213116411
- mean 2 / 5, sd 1, n 2: v = 1/2 each, t = -3, df = 1 / (1/4 + 1/4) = 2,
  p = 2 (1 - F_2(3)) = 2 (1/2 - 3 / (2 sqrt(11))) = 1 - 3 / sqrt(11) = 0.0954659663
"""

from __future__ import annotations

import math

import pytest

from bench.report import Figure, RunView, compare
from bench.report._claims import (
    ALPHA,
    Family,
    _cap_from_flags,
    claim_family,
    claim_key,
    ordered_unique,
    ranking,
    raw_p,
    single_request,
    speculative,
    stable,
    ttft_leaders,
    welch_samples,
    welch_summary,
    within,
)
from bench.report._model import ConfigInfo, PublishedDelta, RunSet

P_N3 = 0.0213116411
P_N2 = 1.0 - 3.0 / math.sqrt(11.0)


def fig(*samples: float, **kw: float | int | bool | None) -> Figure:
    if samples:
        n = len(samples)
        mean = sum(samples) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1))
        return Figure(mean=mean, stddev=sd, n=n, samples=samples)
    return Figure(**kw)  # type: ignore[arg-type]


NO_FIGURE = Figure()


def run(key: str, decode: Figure = NO_FIGURE, ttft: Figure = NO_FIGURE, **kw: object) -> RunView:
    base: dict[str, object] = {"config": key, "engine": "e", "method": "M"}
    base |= kw
    return RunView(key=key, decode=decode, ttft=ttft, **base)  # type: ignore[arg-type]


def f4(t: float) -> float:
    """Student's t CDF at 4 degrees of freedom, closed form."""
    s = 1.0 / math.sqrt(1.0 + t * t / 4.0)
    return 0.5 + 0.375 * t * s * (1.0 - t * t * s * s / 12.0)


def runset(*runs: RunView, deltas: tuple[PublishedDelta, ...] = ()) -> RunSet:
    return RunSet(
        source_kind="artifacts", source="s", title="t", runs=runs, published_deltas=deltas
    )


def test_welch_from_summaries_and_samples_by_hand() -> None:
    assert welch_summary(2.0, 1.0, 3, 5.0, 1.0, 3) == pytest.approx(P_N3, rel=1e-8)
    assert welch_summary(2.0, 1.0, 2, 5.0, 1.0, 2) == pytest.approx(P_N2, rel=1e-9)
    assert welch_samples([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(P_N3, rel=1e-8)
    # unequal n and variance (test_stats_reference.py): df = 98/19, p = 0.0457758284
    got = welch_samples([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0, 10.0])
    assert got == pytest.approx(0.0457758284, rel=1e-8)
    # no spread at all: equal means are the same, different means differ exactly
    assert welch_summary(5.0, 0.0, 3, 5.0, 0.0, 3) == 1.0
    assert welch_summary(5.0, 0.0, 3, 6.0, 0.0, 3) == 0.0
    # a spread of exactly 1 in total is a spread (v1 + v2 = 1/2 + 1/2)
    assert welch_summary(2.0, 1.0, 1 + 1, 2.0, 1.0, 2) == pytest.approx(1.0)


def test_raw_p_prefers_samples_then_summaries_then_nothing() -> None:
    a, b = fig(1.0, 2.0, 3.0), fig(4.0, 5.0, 6.0)
    assert raw_p(a, b) == pytest.approx(P_N3, rel=1e-8)
    assert raw_p(fig(1.0, 3.0), fig(4.0, 6.0)) == pytest.approx(
        welch_summary(2.0, math.sqrt(2.0), 2, 5.0, math.sqrt(2.0), 2)
    )
    sa = Figure(mean=2.0, stddev=1.0, n=2)
    sb = Figure(mean=5.0, stddev=1.0, n=2)
    assert raw_p(sa, sb) == pytest.approx(P_N2, rel=1e-9)
    # samples without a summary are enough; one sample is not
    bare = raw_p(Figure(samples=(1.0, 3.0)), Figure(samples=(4.0, 6.0)))
    assert bare == pytest.approx(welch_summary(2.0, math.sqrt(2.0), 2, 5.0, math.sqrt(2.0), 2))
    three = fig(4.0, 5.0, 6.0)
    assert raw_p(Figure(samples=(1.0,)), three) is None
    assert raw_p(three, Figure(samples=(1.0,))) is None
    # one sample on one side: the summaries decide (2, sd 1, n 2 against 5, sd 1, n 2)
    one = Figure(mean=2.0, stddev=1.0, n=2, samples=(2.0,))
    assert raw_p(one, sb) == pytest.approx(P_N2, rel=1e-9)
    assert raw_p(sb, one) == pytest.approx(P_N2, rel=1e-9)
    for broken in (
        {"mean": None},
        {"stddev": None},
        {"n": None},
        {"n": 1},
    ):
        bad = sa.model_copy(update=broken)
        assert raw_p(bad, sb) is None, broken
        assert raw_p(sb, bad) is None, broken


def test_the_basis_names_the_test_and_the_family() -> None:
    a = run("a", decode=fig(4.0, 5.0, 6.0))
    b = run("b", decode=fig(1.0, 2.0, 3.0))
    c = compare(a, b, "decode")
    assert (c.better, c.delta, c.significance) == ("a", 3.0, "significant")
    assert c.p_value == pytest.approx(P_N3, rel=1e-8) and c.p_adjusted is None
    assert c.basis == f"Welch t-test over 3 and 3 iterations, p={P_N3:.3g}"
    assert c.pct == pytest.approx(150.0)  # 5 / 2 - 1
    key = claim_key("decode", a, b)
    fam = Family(raw={key: P_N3, ("x", "y", "z"): 0.5}, adjusted={key: 0.05, ("x", "y", "z"): 1.0})
    held = compare(a, b, "decode", family=fam)
    # an adjusted p of exactly alpha is not below alpha
    assert held.significance == "not_significant" and held.p_adjusted == 0.05
    assert held.basis == f"Welch t-test over 3 and 3 iterations, p={P_N3:.3g}" + (
        ", Holm-adjusted p=0.05 (2 claims)"
    )
    assert fam.significant() == []
    assert Family.of({key: 0.01}).significant() == [key]
    # a family that does not hold this test: the raw p decides
    other = compare(a, b, "decode", family=Family.of({("x", "y", "z"): 0.9}))
    assert other.significance == "significant" and other.p_adjusted is None


def test_summary_basis_and_the_assumed_spread() -> None:
    a = run("a", decode=Figure(mean=5.0, stddev=1.0, n=2))
    b = run("b", decode=Figure(mean=2.0, stddev=1.0, n=2))
    c = compare(a, b, "decode")
    assert c.significance == "not_significant" and c.p_value == pytest.approx(P_N2)
    assert c.basis == f"Welch t-test from mean, stddev and n, p={P_N2:.3g}"
    assumed = a.model_copy(
        update={"decode": Figure(mean=5.0, stddev=1.0, n=2, spread_assumed=True)}
    )
    c2 = compare(assumed, b, "decode")
    assert c2.basis == (
        f"Welch t-test from mean, stddev and n (assumed spread: the source's stated bound), "
        f"p={P_N2:.3g}"
    )
    unknown = compare(run("a", decode=Figure(mean=5.0)), b, "decode")
    assert (unknown.significance, unknown.p_value, unknown.better) == ("unknown", None, "a")
    assert unknown.basis == "no spread known, significance cannot be tested"
    assert unknown.decided is not False  # unknown spread still names a winner


def test_ttft_lower_is_better_and_ties_are_not_significant() -> None:
    fast = run("fast", ttft=fig(49.0, 50.0, 51.0))
    slow = run("slow", ttft=fig(59.0, 60.0, 61.0))
    c = compare(slow, fast, "ttft")
    assert (c.better, c.delta, c.a_mean, c.b_mean) == ("b", 10.0, 60.0, 50.0)
    assert c.pct == pytest.approx(20.0)  # 60 / 50 - 1
    assert c.winner is fast and c.loser is slow
    tie = compare(
        run("x", decode=fig(1.0, 2.0, 3.0)), run("y", decode=fig(3.0, 2.0, 1.0)), "decode"
    )
    assert (tie.better, tie.pct, tie.significance, tie.delta) == (
        None,
        None,
        "not_significant",
        0.0,
    )
    # a loser at zero has no percentage; a gap of exactly 1 still names a winner
    zero = compare(run("x", decode=Figure(mean=1.0)), run("y", decode=Figure(mean=0.0)), "decode")
    assert (zero.better, zero.pct, zero.delta) == ("a", None, 1.0)
    small = compare(run("x", decode=Figure(mean=2.0)), run("y", decode=Figure(mean=1.5)), "decode")
    assert small.better == "a" and small.pct == pytest.approx(100.0 / 3.0)


def test_published_differences_and_orderings() -> None:
    a, b = run("a"), run("b", method="N")
    d = (
        PublishedDelta(metric="ttft", a="a", b="b", delta=-9.0),
        PublishedDelta(metric="decode", a="b", b="a", delta=-4.0),
    )
    c = compare(a, b, "decode", d)
    assert (c.delta, c.better, c.significance, c.p_value, c.pct) == (
        4.0,
        "a",
        "unknown",
        None,
        None,
    )
    assert c.basis == "published difference; the values themselves and their spread are not known"
    t = compare(a, b, "ttft", d)  # a is 9 ms faster
    assert (t.delta, t.better) == (-9.0, "a")
    t2 = compare(b, a, "ttft", d)
    assert (t2.delta, t2.better) == (9.0, "b")
    zero = compare(a, b, "decode", (PublishedDelta(metric="decode", a="a", b="b", delta=0.0),))
    assert zero.better is None and zero.basis == "not comparable: a value is unknown"
    # a bound on one side and a value on the other
    known = run("k", decode=Figure(mean=100.0), ttft=Figure(mean=100.0))
    bound = run("u", decode=Figure(lower_bound=100.0), ttft=Figure(lower_bound=100.0))
    assert compare(known, bound, "decode").better == "b"
    assert compare(known, bound, "ttft").better == "a"
    assert compare(bound, known, "decode").better == "a"
    assert compare(bound, known, "ttft").better == "b"
    assert (
        compare(known, bound, "decode").basis == "published ordering; the other value is not known"
    )
    below = run("v", decode=Figure(lower_bound=99.0))
    assert compare(known, below, "decode").better is None
    assert compare(below, known, "decode").better is None


def test_within_orders_each_pair_winner_first() -> None:
    x = run("x", decode=fig(1.0, 2.0, 3.0), ttft=fig(9.0, 10.0, 11.0), engine="vllm")
    y = run("y", decode=fig(4.0, 5.0, 6.0), ttft=fig(19.0, 20.0, 21.0), engine="vllm", method="N")
    z = run("z", decode=fig(7.0, 8.0, 9.0), ttft=fig(1.0, 2.0, 3.0), engine="sglang")
    w = run("w", decode=fig(10.0, 11.0, 12.0), engine="vllm")  # x's engine and method
    rs = runset(x, y, z, w)
    pairs = within([x, y, z, w], "engine", rs)
    # a method comparison is across methods only: x and w share vLLM and M
    assert [(p.group, p.decode.a.key, p.decode.b.key) for p in pairs] == [
        ("vllm", "y", "x"),
        ("vllm", "w", "y"),
    ]
    assert pairs[0].ttft.a.key == "y" and pairs[0].ttft.better == "b"
    # an engine comparison is across engines only: x and w are both vLLM
    by_method = within([x, y, z, w], "method", rs)
    assert [(p.decode.a.key, p.decode.b.key) for p in by_method] == [("z", "x"), ("w", "z")]
    # two configurations of one engine and method are compared as configurations
    setup = within([x, y, z, w], "setup", rs)
    assert [(p.group, p.decode.a.key, p.decode.b.key) for p in setup] == [("vllm", "w", "x")]


def test_ttft_leader_must_beat_every_other_run() -> None:
    a = run("a", ttft=fig(9.0, 10.0, 11.0), engine="e1")
    b = run("b", ttft=fig(19.0, 20.0, 21.0), engine="e2")
    c = run("c", ttft=fig(29.0, 30.0, 31.0), engine="e3")
    solo = run("s", ttft=fig(1.0, 2.0, 3.0), method="OTHER")
    # one engine: no engine is compared with another, so no leader is named
    same = run("a-twin", ttft=fig(19.0, 20.0, 21.0), engine="e1")
    assert ttft_leaders([a, same], runset(a, same)) == []
    [lead] = ttft_leaders([b, a, c, solo], runset(a, b, c, solo))
    assert lead.method == "M" and lead.run is a
    # 10 and 20 ms apart, sd 1, n 3 each: t = 10 / sqrt(2/3) and 20 / sqrt(2/3), df = 4
    p_b = 2.0 * (1.0 - f4(10.0 / math.sqrt(2.0 / 3.0)))
    p_c = 2.0 * (1.0 - f4(20.0 / math.sqrt(2.0 / 3.0)))
    assert lead.basis == (
        f"Welch t-test over 3 and 3 iterations, p={p_b:.3g}; "
        f"Welch t-test over 3 and 3 iterations, p={p_c:.3g}"
    )
    # the same basis twice is listed once
    twin = run("c2", ttft=fig(19.0, 20.0, 21.0), engine="e4")
    [lead2] = ttft_leaders([a, b, twin], runset(a, b, twin))
    assert lead2.run is a and lead2.basis == f"Welch t-test over 3 and 3 iterations, p={p_b:.3g}"
    # a near tie with the leader: nobody is lower than every other run
    a2 = run("a2", ttft=fig(9.5, 10.5, 11.5), engine="e5")
    [none] = ttft_leaders([a, a2, c], runset(a, a2, c))
    assert none.run is None and none.basis == ""


def test_stability_selection_and_ranking() -> None:
    assert stable(run("a", decode=Figure(mean=100.0, stddev=2.0))) is True  # CV 2 %
    assert stable(run("a", decode=Figure(mean=100.0, stddev=2.01))) is False
    assert stable(run("a", decode=Figure(mean=0.0, stddev=1.0))) is None
    assert stable(run("a", decode=Figure(mean=100.0))) is None
    assert stable(run("a", decode=Figure(stddev=1.0))) is None
    r1 = run("a1", config="a", concurrency=1)
    r4 = run("a4", config="a", concurrency=4)
    b2 = run("b2", config="b", concurrency=2)
    b8 = run("b8", config="b", concurrency=8)
    old = run("b1", config="b", concurrency=1, attempt="first try")
    bad = run("c1", config="c", concurrency=1, valid=False)
    assert single_request([r1, r4, b8, b2, old, bad]) == [r1, b2]
    base = run("n", method="NONE")
    assert speculative([r1, base]) == [r1]
    hi = run("hi", decode=Figure(mean=3.0))
    lo = run("lo", decode=Figure(mean=1.0))
    assert ranking([lo, r1, hi]) == [hi, lo]
    assert ordered_unique(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


def test_admission_cap_from_flags() -> None:
    def info(*flags: str, cap: int | None = None) -> ConfigInfo:
        return ConfigInfo(name="c", flags=flags, admission_cap=cap)

    assert _cap_from_flags(None) is None
    assert _cap_from_flags(info("--max-num-seqs", "8", cap=3)) == 3
    assert _cap_from_flags(info("--port", "80", "--max-num-seqs", "8")) == 8
    assert _cap_from_flags(info("--max-running-requests=12")) == 12
    assert _cap_from_flags(info("--max-num-seqs=x", "--max-running-requests", "5")) == 5
    assert _cap_from_flags(info("--max-num-seqs")) is None  # no value follows
    assert _cap_from_flags(info("--max-num-seqs", "auto")) is None
    assert _cap_from_flags(info("--max-num-seqs=8=9")) is None  # not a number
    assert _cap_from_flags(info("--max-num-seqs-x=4", "--max-num-seqsy", "4")) is None
    assert ALPHA == 0.05


def test_pairs_and_leaders_use_the_published_deltas_and_the_family() -> None:
    # means unknown: only the published differences order the pairs
    a, b = run("a"), run("b", method="N")
    d = (
        PublishedDelta(metric="decode", a="a", b="b", delta=-0.5),
        PublishedDelta(metric="ttft", a="a", b="b", delta=-2.0),
    )
    [p] = within([a, b], "engine", runset(a, b, deltas=d))
    assert (p.decode.a.key, p.decode.better, p.decode.delta) == ("b", "a", 0.5)
    assert (p.ttft.a.key, p.ttft.delta, p.ttft.better) == ("b", 2.0, "b")
    b_elsewhere = run("b", engine="e2")  # the same key on another engine, for the leader
    [lead] = ttft_leaders([a, b_elsewhere], runset(a, b_elsewhere, deltas=d))
    assert lead.run is a
    assert (
        lead.basis == "published difference; the values themselves and their spread are not known"
    )
    # a difference of another metric is not this one's
    only_decode = (PublishedDelta(metric="decode", a="b", b="a", delta=3.0),)
    assert compare(a, b, "ttft", only_decode).better is None
    # with a family: every comparison carries its adjusted p
    x = run("x", decode=fig(1.0, 2.0, 3.0), ttft=fig(19.0, 20.0, 21.0))
    y = run("y", decode=fig(4.0, 5.0, 6.0), ttft=fig(9.0, 10.0, 11.0), engine="e2")
    fam = Family.of({claim_key("decode", x, y): 0.01, claim_key("ttft", x, y): 0.02})
    [q] = within([x, y], "method", runset(x, y), fam)
    assert (q.decode.a.key, q.decode.p_adjusted, q.ttft.p_adjusted) == ("y", 0.02, 0.02)
    # the winner first already: the family still decides
    [q2] = within([y, x], "method", runset(x, y), fam)
    assert (q2.decode.a.key, q2.decode.p_adjusted) == ("y", 0.02)
    lone = run("lone", method="SOLO", ttft=fig(1.0, 2.0, 3.0))
    [held] = ttft_leaders(
        [lone, x, y], runset(lone, x, y), Family.of({claim_key("ttft", x, y): 0.9})
    )
    assert held.method == "M" and held.run is None


def test_small_gaps_and_bounds_mirrored() -> None:
    half = compare(run("x", decode=Figure(mean=1.0)), run("y", decode=Figure(mean=0.5)), "decode")
    assert half.pct == pytest.approx(100.0)  # 1 / 0.5 - 1
    one = compare(run("x", decode=Figure(mean=2.0)), run("y", decode=Figure(mean=1.0)), "decode")
    assert (one.delta, one.significance) == (1.0, "unknown")
    known = run("k", decode=Figure(mean=100.0))
    bound = run("u", decode=Figure(lower_bound=100.0))
    assert (
        compare(bound, known, "decode").basis == "published ordering; the other value is not known"
    )


def test_the_family_holds_each_claim_the_report_makes_once() -> None:
    x = run("x", decode=fig(1.0, 2.0, 3.0), ttft=fig(9.0, 10.0, 11.0), engine="vllm", method="A")
    y = run("y", decode=fig(4.0, 5.0, 6.0), ttft=fig(19.0, 20.0, 21.0), engine="vllm", method="B")
    z = run("z", decode=fig(7.0, 8.0, 9.0), ttft=fig(1.0, 2.0, 3.0), engine="sg", method="A")
    base = run("base", decode=fig(0.0, 1.0, 2.0), engine="vllm", method="NONE")
    c1 = run("s1", config="s", aggregate=fig(99.0, 100.0, 101.0), concurrency=1)
    c2 = run("s2", config="s", aggregate=fig(199.0, 200.0, 201.0), concurrency=2)
    fam = claim_family(runset(x, y, z, base, c1, c2), [x, y, z], [base])
    assert set(fam.raw) == {
        # the ranking's neighbours (z > y > x), within vLLM (x, y), within A (x, z)
        ("decode", "x", "y"),
        ("decode", "y", "z"),
        ("decode", "x", "z"),
        # each speculative run against its own engine's baseline (not z: another engine)
        ("decode", "base", "x"),
        ("decode", "base", "y"),
        # TTFT between every pair
        ("ttft", "x", "y"),
        ("ttft", "x", "z"),
        ("ttft", "y", "z"),
        # the sweep's levels below its peak against it
        ("aggregate", "s1", "s2"),
    }
    assert fam.raw[("decode", "x", "y")] == pytest.approx(P_N3, rel=1e-8)
    # x against the baseline: 1,2,3 against 0,1,2 -> t = 1 / sqrt(2/3), df = 4
    assert fam.raw[("decode", "base", "x")] == pytest.approx(
        2.0 * (1.0 - f4(1.0 / math.sqrt(2.0 / 3.0))), rel=1e-9
    )
    assert fam.raw[("ttft", "x", "y")] == pytest.approx(
        2.0 * (1.0 - f4(10.0 / math.sqrt(2.0 / 3.0))), rel=1e-9
    )
    assert set(fam.adjusted) == set(fam.raw) and fam.size == 9


def test_compare_tests_bare_samples_and_refuses_half_summaries() -> None:
    # samples and a mean, no stddev or n: the samples are tested
    a = run("a", decode=Figure(mean=5.0, samples=(4.0, 6.0)))
    b = run("b", decode=Figure(mean=2.0, samples=(1.0, 3.0)))
    c = compare(a, b, "decode")
    assert c.p_value == pytest.approx(welch_summary(5.0, math.sqrt(2.0), 2, 2.0, math.sqrt(2.0), 2))
    assert c.basis.startswith("Welch t-test over 2 and 2 iterations")
    one = run("one", decode=Figure(mean=5.0, samples=(5.0,)))
    assert compare(one, run("t", decode=fig(1.0, 2.0, 3.0)), "decode").significance == "unknown"
    # a stddev on one side only is no spread to test, whatever n says
    half = run("h", decode=Figure(mean=5.0, n=3))
    full = run("f", decode=Figure(mean=2.0, stddev=1.0, n=3))
    assert compare(half, full, "decode").significance == "unknown"
    assert compare(full, half, "decode").significance == "unknown"
