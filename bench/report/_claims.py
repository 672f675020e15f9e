"""Claims as rules over data: which run is faster, by how much, and whether the gap is outside
the noise. Nothing here knows an engine or a method by name; the report's prose is built from
these results only.

Significance: a two-sided Welch t-test on the per-iteration samples when both runs have them;
from (mean, stddev, n) when only a summary is known (for the reference set that is the seed's
stated bound, labelled as an assumption); "unknown" when no spread is known at all. The report
makes many such claims at once (rankings, engine and method comparisons, speedups, concurrency
peaks), so it decides each at ``ALPHA`` on its Holm-Bonferroni adjusted p over the whole family
(``claim_family``): the chance of even one false "significant" in a report stays below ALPHA.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from bench.core import StrictModel, t_cdf
from bench.report._model import ConfigInfo, Figure, PublishedDelta, RunSet, RunView
from bench.report._text import p_is, pct

ALPHA = 0.05
STABLE_CV = 0.02  # a run whose decode CV is at most 2% is called stable

Metric = Literal["decode", "ttft"]
Significance = Literal["significant", "not_significant", "unknown"]
#: one tested claim: (figure, run key, run key), the keys sorted (the test is symmetric)
TestKey = tuple[str, str, str]
K = TypeVar("K")


def claim_key(figure: str, a: RunView, b: RunView) -> TestKey:
    lo, hi = sorted((a.key, b.key))
    return (figure, lo, hi)


def holm(pvalues: Mapping[K, float]) -> dict[K, float]:
    """Holm-Bonferroni adjusted p-values: with the m raw p-values sorted ascending, the i-th
    (1-based) becomes max over j <= i of min(1, (m - j + 1) * p_(j)). Rejecting where the
    adjusted p < alpha is Holm's step-down procedure (family-wise error rate <= alpha)."""
    m = len(pvalues)
    out: dict[K, float] = {}
    running = 0.0
    for i, (k, p) in enumerate(sorted(pvalues.items(), key=lambda kv: kv[1])):
        running = max(running, min(1.0, (m - i) * p))
        out[k] = running
    return out


@dataclass(frozen=True)
class Family:
    """The report's family of significance claims: each test's raw and Holm-adjusted p."""

    raw: dict[TestKey, float] = field(default_factory=dict)
    adjusted: dict[TestKey, float] = field(default_factory=dict)

    @classmethod
    def of(cls, raw: Mapping[TestKey, float]) -> Family:
        return cls(raw=dict(raw), adjusted=holm(raw))

    @property
    def size(self) -> int:
        return len(self.raw)

    def significant(self) -> list[TestKey]:
        return [k for k, p in self.adjusted.items() if p < ALPHA]


class Comparison(StrictModel):
    """``a`` against ``b`` on one metric. ``better`` names the winner when the data orders them."""

    metric: Metric
    a: RunView
    b: RunView
    a_mean: float | None
    b_mean: float | None
    delta: float | None  # a - b, in the metric's unit
    better: Literal["a", "b"] | None
    pct: float | None  # (winner/loser - 1) * 100 for decode; (loser/winner - 1) * 100 for TTFT
    significance: Significance
    p_value: float | None
    basis: str
    p_adjusted: float | None = None  # Holm-adjusted over the report's family (see Family)

    @property
    def winner(self) -> RunView | None:
        return self.a if self.better == "a" else self.b if self.better == "b" else None

    @property
    def loser(self) -> RunView | None:
        return self.b if self.better == "a" else self.a if self.better == "b" else None

    @property
    def decided(self) -> bool:
        """A winner may be named: significant, or ordered by published data without a spread."""
        return self.better is not None and self.significance != "not_significant"

    @property
    def abs_delta(self) -> float | None:
        return abs(self.delta) if self.delta is not None else None


def welch_summary(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int) -> float:
    """Two-sided Welch p-value from summary statistics (for sets with no raw samples)."""
    v1, v2 = s1 * s1 / n1, s2 * s2 / n2
    if v1 + v2 == 0.0:
        return 0.0 if m1 != m2 else 1.0
    t = (m1 - m2) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
    return min(1.0, max(0.0, 2.0 * (1.0 - t_cdf(abs(t), df))))


def welch_samples(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Welch p-value of raw samples (same test as bench.core.welch, without the CI
    quantile that summarize() computes: the report runs dozens of these)."""
    ma, mb = math.fsum(a) / len(a), math.fsum(b) / len(b)
    sa = math.sqrt(math.fsum((x - ma) ** 2 for x in a) / (len(a) - 1))
    sb = math.sqrt(math.fsum((x - mb) ** 2 for x in b) / (len(b) - 1))
    return welch_summary(ma, sa, len(a), mb, sb, len(b))


def _fig(run: RunView, metric: Metric) -> Figure:
    return run.decode if metric == "decode" else run.ttft


def _published(deltas: Iterable[PublishedDelta], metric: Metric, a: str, b: str) -> float | None:
    for d in deltas:
        if d.metric == metric and (d.a, d.b) == (a, b):
            return d.delta
        if d.metric == metric and (d.a, d.b) == (b, a):
            return -d.delta
    return None


def raw_p(fa: Figure, fb: Figure) -> float | None:
    """The two-sided Welch p-value of two figures, None when no spread is known."""
    if len(fa.samples) >= 2 and len(fb.samples) >= 2:
        return welch_samples(fa.samples, fb.samples)
    if (
        fa.mean is not None
        and fb.mean is not None
        and fa.stddev is not None
        and fb.stddev is not None
        and (fa.n or 0) >= 2
        and (fb.n or 0) >= 2
    ):
        assert fa.n is not None and fb.n is not None
        return welch_summary(fa.mean, fa.stddev, fa.n, fb.mean, fb.stddev, fb.n)
    return None


def _adjusted(
    p: float, key: TestKey | None, family: Family | None
) -> tuple[Significance, float | None, str]:
    """Significance on the Holm-adjusted p when the test is in the family, else on p."""
    if family is not None and key is not None and key in family.adjusted:
        q = family.adjusted[key]
        sig: Significance = "significant" if q < ALPHA else "not_significant"
        return sig, q, f", Holm-adjusted p{p_is(q)} ({family.size} claims)"
    return ("significant" if p < ALPHA else "not_significant"), None, ""


def _test(
    fa: Figure, fb: Figure, key: TestKey | None = None, family: Family | None = None
) -> tuple[Significance, float | None, str]:
    sig, p, basis, _ = _test_adj(fa, fb, key, family)
    return sig, p, basis


def _test_adj(
    fa: Figure, fb: Figure, key: TestKey | None, family: Family | None
) -> tuple[Significance, float | None, str, float | None]:
    if len(fa.samples) >= 2 and len(fb.samples) >= 2:
        p = welch_samples(fa.samples, fb.samples)
        sig, q, adj = _adjusted(p, key, family)
        basis = (
            f"Welch t-test over {len(fa.samples)} and {len(fb.samples)} iterations, p{p_is(p)}"
            + adj
        )
        return sig, p, basis, q
    if (
        fa.mean is not None
        and fb.mean is not None
        and fa.stddev is not None
        and fb.stddev is not None
        and (fa.n or 0) >= 2
        and (fb.n or 0) >= 2
    ):
        assert fa.n is not None and fb.n is not None
        p = welch_summary(fa.mean, fa.stddev, fa.n, fb.mean, fb.stddev, fb.n)
        sig, q, adj = _adjusted(p, key, family)
        assumed = " (assumed spread: the source's stated bound)" if fa.spread_assumed else ""
        basis = f"Welch t-test from mean, stddev and n{assumed}, p{p_is(p)}" + adj
        return sig, p, basis, q
    return "unknown", None, "no spread known, significance cannot be tested", None


def compare(
    a: RunView,
    b: RunView,
    metric: Metric,
    deltas: Iterable[PublishedDelta] = (),
    family: Family | None = None,
) -> Comparison:
    """Order two runs on ``metric`` (decode: higher is better; TTFT: lower is better). With a
    ``family``, significance is decided on the Holm-adjusted p of this test."""
    fa, fb = _fig(a, metric), _fig(b, metric)
    higher_better = metric == "decode"
    delta: float | None = None
    better: Literal["a", "b"] | None = None
    percent: float | None = None
    if fa.mean is not None and fb.mean is not None:
        delta = fa.mean - fb.mean
        if delta != 0:
            a_wins = (delta > 0) == higher_better
            better = "a" if a_wins else "b"
            hi, lo = max(fa.mean, fb.mean), min(fa.mean, fb.mean)
            percent = pct(hi, lo) if lo > 0 else None
        sig, p, basis, q = _test_adj(fa, fb, claim_key(metric, a, b), family)
        if delta == 0:
            sig = "not_significant"
        return _comparison(metric, a, b, fa, fb, delta, better, percent, sig, p, basis, q)
    delta = _published(deltas, metric, a.key, b.key)
    if delta is not None and delta != 0:
        better = "a" if (delta > 0) == higher_better else "b"
        basis = "published difference; the values themselves and their spread are not known"
    elif fa.mean is not None and fb.lower_bound is not None and fb.lower_bound >= fa.mean:
        better = "b" if higher_better else "a"
        basis = "published ordering; the other value is not known"
    elif fb.mean is not None and fa.lower_bound is not None and fa.lower_bound >= fb.mean:
        better = "a" if higher_better else "b"
        basis = "published ordering; the other value is not known"
    else:
        basis = "not comparable: a value is unknown"
    return _comparison(metric, a, b, fa, fb, delta, better, None, "unknown", None, basis, None)


def _comparison(
    metric: Metric,
    a: RunView,
    b: RunView,
    fa: Figure,
    fb: Figure,
    delta: float | None,
    better: Literal["a", "b"] | None,
    percent: float | None,
    sig: Significance,
    p: float | None,
    basis: str,
    q: float | None,
) -> Comparison:
    """One Comparison from what either branch of ``compare`` found."""
    return Comparison(
        metric=metric,
        a=a,
        b=b,
        a_mean=fa.mean,
        b_mean=fb.mean,
        delta=delta,
        better=better,
        pct=percent,
        significance=sig,
        p_value=p,
        basis=basis,
        p_adjusted=q,
    )


# --- selections -------------------------------------------------------------------------------


def single_request(runs: Sequence[RunView]) -> list[RunView]:
    """Valid, current runs at each configuration's lowest measured concurrency (normally 1)."""
    valid = [r for r in runs if r.valid and r.attempt is None]
    lowest: dict[str, int] = {}
    for r in valid:
        lowest[r.config] = min(lowest.get(r.config, r.concurrency), r.concurrency)
    return [r for r in valid if r.concurrency == lowest[r.config]]


def speculative(runs: Sequence[RunView]) -> list[RunView]:
    """The speculative runs the report ranks and compares: a SYNTHETIC ACCEPTANCE control or a
    lossy verifier is named in its own section (issue 48), never averaged into a claim."""
    return [r for r in runs if r.method != "NONE" and r.lossless_method]


def ranking(runs: Sequence[RunView]) -> list[RunView]:
    """Known decode means, highest first; unknown ones are left out."""
    known = [r for r in runs if r.decode.mean is not None]
    return sorted(known, key=lambda r: r.decode.mean or 0.0, reverse=True)


def ordered_unique(values: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


class Pairwise(StrictModel):
    """Comparisons within one engine (across methods), within one method (across engines), or
    between two configurations of one engine and method."""

    group: str  # the shared engine or method
    decode: Comparison
    ttft: Comparison


Grouping = Literal["engine", "method", "setup"]


def _pairs_within(runs: Sequence[RunView], by: Grouping) -> list[tuple[str, RunView, RunView]]:
    """Pairs that share ``by`` and differ in the other: the same engine with two methods
    (``engine``), the same method on two engines (``method``), or two configurations of the
    same engine and method (``setup``, grouped by engine). A method comparison is only ever
    across methods, an engine comparison only across engines."""
    out = []
    key = "engine" if by == "setup" else by
    for g in ordered_unique(getattr(r, key) for r in runs):
        members = [r for r in runs if getattr(r, key) == g]
        for a, b in itertools.combinations(members, 2):
            same_engine, same_method = a.engine == b.engine, a.method == b.method
            if (by == "setup") == (same_engine and same_method):
                out.append((g, a, b))
    return out


def within(
    runs: Sequence[RunView],
    by: Grouping,
    rs: RunSet,
    family: Family | None = None,
) -> list[Pairwise]:
    """Every pair sharing an engine across methods (``by='engine'``), a method across engines
    (``by='method'``), or engine and method across configurations (``by='setup'``), decode
    winner first."""
    out: list[Pairwise] = []
    deltas = rs.published_deltas
    for g, a, b in _pairs_within(runs, by):
        dec = compare(a, b, "decode", deltas, family)
        if dec.better == "b":
            a, b = b, a
            dec = compare(a, b, "decode", deltas, family)
        out.append(Pairwise(group=g, decode=dec, ttft=compare(a, b, "ttft", deltas, family)))
    return out


class TtftLeader(StrictModel):
    method: str
    run: RunView | None  # None: no run is lower than every other in this method
    basis: str


def ttft_leaders(
    runs: Sequence[RunView], rs: RunSet, family: Family | None = None
) -> list[TtftLeader]:
    """Per method run on more than one engine, the run whose TTFT is lower than every other
    run of that method."""
    out: list[TtftLeader] = []
    for m in ordered_unique(r.method for r in runs):
        members = [r for r in runs if r.method == m]
        if len({r.engine for r in members}) < 2:  # an engine comparison needs two engines
            continue
        leader, bases = None, []
        for cand in members:
            comps = [
                compare(cand, o, "ttft", rs.published_deltas, family)
                for o in members
                if o is not cand
            ]
            if all(c.better == "a" and c.decided for c in comps):
                leader, bases = cand, [c.basis for c in comps]
                break
        out.append(TtftLeader(method=m, run=leader, basis="; ".join(ordered_unique(bases))))
    return out


# --- concurrency ------------------------------------------------------------------------------


class ConcurrencyPoint(StrictModel):
    concurrency: int
    per_stream: float | None
    aggregate: float | None
    ttft: float | None
    valid: bool


class ConcurrencySweep(StrictModel):
    config: str
    engine: str
    method: str
    points: list[ConcurrencyPoint]
    levels: list[int]
    peak: int | None  # concurrency with the highest aggregate throughput
    peak_aggregate: float | None
    scales_through: int | None  # highest level whose aggregate is the maximum so far
    admission_cap: int | None
    queued_levels: list[int]
    ttft_growth: tuple[float, float] | None  # TTFT at the peak and at the highest level
    cause: str | None
    # the level with the highest mean, when it differs from ``peak`` only within the noise
    highest_mean_level: int | None = None
    # the largest Holm-adjusted p of the tests that put the levels below the peak under it
    peak_p_adjusted: float | None = None


def _cap_from_flags(info: ConfigInfo | None) -> int | None:
    if info is None:
        return None
    if info.admission_cap is not None:
        return info.admission_cap
    names = ("--max-running-requests", "--max-num-seqs")
    flags = list(info.flags)
    for i, f in enumerate(flags):
        for n in names:
            if f == n and i + 1 < len(flags) and flags[i + 1].isdigit():
                return int(flags[i + 1])
            if f.startswith(n + "=") and f.split("=", 1)[1].isdigit():
                return int(f.split("=", 1)[1])
    return None


def _saturation_point(
    known: list[ConcurrencyPoint],
    top: ConcurrencyPoint | None,
    runs: dict[int, RunView],
    family: Family | None = None,
) -> ConcurrencyPoint | None:
    """The peak as a rule over noise: the lowest level whose aggregate is not significantly
    below the highest mean (Welch over the iterations). Without a spread to test, the level with
    the highest mean."""
    if top is None:
        return None
    best = runs[top.concurrency].aggregate
    for p in known:
        if p is top:
            return top
        key = claim_key("aggregate", runs[p.concurrency], runs[top.concurrency])
        sig, _, _ = _test(runs[p.concurrency].aggregate, best, key, family)
        if sig == "not_significant":
            return p
    return top


def _sweep_runs(rs: RunSet) -> list[tuple[str, list[RunView], list[int]]]:
    """(configuration, its current runs by concurrency, its levels) for every sweep."""
    out = []
    current = [r for r in rs.runs if r.attempt is None and r.lossless_method]
    for name in ordered_unique(r.config for r in current):
        runs = sorted((r for r in current if r.config == name), key=lambda r: r.concurrency)
        info = rs.config_info(name)
        levels = sorted({r.concurrency for r in runs} | set(info.concurrency if info else ()))
        if len(levels) >= 2:
            out.append((name, runs, levels))
    return out


def _points(runs: list[RunView]) -> list[ConcurrencyPoint]:
    return [
        ConcurrencyPoint(
            concurrency=r.concurrency,
            per_stream=r.decode.mean,
            aggregate=r.aggregate.mean,
            ttft=r.ttft.mean,
            valid=r.valid,
        )
        for r in runs
    ]


def _peak_tests(runs: list[RunView]) -> list[tuple[TestKey, Figure, Figure]]:
    """The sweep's peak tests: every valid level below the highest mean against it."""
    known = [r for r in runs if r.valid and r.aggregate.mean is not None]
    if len(known) < 2:
        return []
    top = max(known, key=lambda r: r.aggregate.mean or 0.0)
    out = []
    for r in known:
        if r is top:
            break
        out.append((claim_key("aggregate", r, top), r.aggregate, top.aggregate))
    return out


def _peak_p(
    runs: list[RunView], peak: ConcurrencyPoint | None, family: Family | None
) -> float | None:
    if family is None or peak is None:
        return None
    below = {r.key for r in runs if r.concurrency < peak.concurrency}
    ps = [
        family.adjusted[k]
        for k, _, _ in _peak_tests(runs)
        if k in family.adjusted and (k[1] in below or k[2] in below)
    ]
    return max(ps) if ps else None


def sweeps(rs: RunSet, family: Family | None = None) -> list[ConcurrencySweep]:
    """One sweep per configuration measured (or published) at more than one concurrency."""
    out: list[ConcurrencySweep] = []
    for name, runs, levels in _sweep_runs(rs):
        info = rs.config_info(name)
        fact = next((f for f in rs.concurrency_facts if f.config == name), None)
        pts = _points(runs)
        known = [p for p in pts if p.valid and p.aggregate is not None]
        top = max(known, key=lambda p: p.aggregate or 0.0) if len(known) >= 2 else None
        peak = _saturation_point(known, top, {r.concurrency: r for r in runs}, family)
        peak_c = peak.concurrency if peak else (fact.peak_concurrency if fact else None)
        through = None
        if len(known) >= 2:
            best = -1.0
            for p in known:
                if (p.aggregate or 0.0) >= best:
                    best, through = p.aggregate or 0.0, p.concurrency
                else:
                    break
            if through != known[-1].concurrency:
                through = None
        elif fact and fact.scales_through:
            through = fact.scales_through
        cap = (fact.admission_cap if fact else None) or _cap_from_flags(info)
        cause = fact.cause if fact else None
        if cause is None and info is not None and info.admission_source:
            cause = info.admission_source
        queued = [c for c in levels if cap is not None and c > cap]
        growth = None
        last = known[-1] if known else None
        if peak and last and peak.ttft is not None and last.ttft is not None:
            growth = (peak.ttft, last.ttft) if last.concurrency > peak.concurrency else None
        first = runs[0]
        out.append(
            ConcurrencySweep(
                config=name,
                engine=first.engine,
                method=first.method,
                points=pts,
                levels=levels,
                peak=peak_c,
                peak_aggregate=peak.aggregate if peak else None,
                scales_through=through,
                admission_cap=cap,
                queued_levels=queued,
                ttft_growth=growth,
                cause=cause,
                highest_mean_level=top.concurrency if top and peak and top is not peak else None,
                peak_p_adjusted=_peak_p(runs, peak, family),
            )
        )
    return out


def stable(run: RunView) -> bool | None:
    f = run.decode
    if f.mean is None or f.stddev is None or not f.mean:
        return None
    return f.stddev / f.mean <= STABLE_CV


def claim_family(
    rs: RunSet,
    single: Sequence[RunView],
    baselines: Sequence[RunView],
    extra: Mapping[TestKey, tuple[Figure, Figure]] | None = None,
) -> Family:
    """Every significance test the report states, with a p-value: the decode ranking's
    neighbours, decode and TTFT within each engine and each method, TTFT between every pair
    (the TTFT leaders), each speculative run against its engine's baseline, each sweep's
    levels against its peak, and ``extra`` (the depth sweeps' points against their fastest k).
    One test per pair and figure, however often it is quoted."""
    tests: dict[TestKey, tuple[Figure, Figure]] = dict(extra or {})

    def add(figure: Metric, a: RunView, b: RunView) -> None:
        tests.setdefault(claim_key(figure, a, b), (_fig(a, figure), _fig(b, figure)))

    ranked = ranking(single)
    for a, b in itertools.pairwise(ranked):
        add("decode", a, b)
    for by in ("engine", "method", "setup"):
        for _, a, b in _pairs_within(single, by):
            add("decode", a, b)
    for a, b in itertools.combinations(single, 2):
        add("ttft", a, b)
    for base in baselines:
        for r in single:
            if r.engine == base.engine:
                add("decode", r, base)
    for _, runs, _ in _sweep_runs(rs):
        for key, fa, fb in _peak_tests(runs):
            tests.setdefault(key, (fa, fb))
    raw = {k: p for k, (fa, fb) in tests.items() if (p := raw_p(fa, fb)) is not None}
    return Family.of(raw)
