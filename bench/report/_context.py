"""Build the template context: every figure, comparison and verdict the report states, computed
from a ``RunSet`` by the rules in ``bench.report._claims``. The template only arranges them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from bench.core import TOY_MODEL_BANNER, StrictModel
from bench.report._categories import CategorySection, category_section, category_tests
from bench.report._claims import (
    ALPHA,
    Comparison,
    ConcurrencySweep,
    Family,
    Pairwise,
    TtftLeader,
    claim_family,
    compare,
    ordered_unique,
    ranking,
    single_request,
    speculative,
    stable,
    sweeps,
    ttft_leaders,
    within,
)
from bench.report._depth import DepthSweep, depth_sweeps, depth_tests
from bench.report._labels import differing_settings, siblings
from bench.report._lossless import NEAR_TIE_NATS, NEAR_TIE_REASON, LosslessRow, lossless
from bench.report._model import RunSet, RunView, Unreadable
from bench.report._speculation import SpeculationSections, speculation_sections
from bench.report._text import pct
from bench.report._trees import TreeContrast, tree_contrasts


class Ranked(StrictModel):
    rank: int
    run: RunView
    vs_next: Comparison | None


class Speedup(StrictModel):
    engine: str
    baseline: RunView
    run: RunView
    ratio: float | None
    comparison: Comparison


class AfterFix(StrictModel):
    """One run of a configuration on a patched image, with the seed's 'After the fix' evidence
    (tensors loaded, graphs active, acceptance over sampled windows, the valid result)."""

    run: RunView
    patch_sha256: str
    accept_min: float | None
    accept_max: float | None
    accept_windows: int


def after_fix(rs: RunSet) -> list[AfterFix]:
    """Every current run of a patched configuration, in the report's run order."""
    out = []
    for r in rs.runs:
        info = rs.config_info(r.config)
        if r.attempt is not None or info is None or info.patch_sha256 is None:
            continue
        acc = list(r.server_log.accept_lengths) if r.server_log else []
        out.append(
            AfterFix(
                run=r,
                patch_sha256=info.patch_sha256,
                accept_min=min(acc) if acc else None,
                accept_max=max(acc) if acc else None,
                accept_windows=len(acc),
            )
        )
    return out


class SideBySide(StrictModel):
    config: str
    label: str
    ours: float | None
    published: float | None
    diff_pct: float | None


def _dominant(pairs: list[Pairwise], attr: str) -> str | None:
    """The method (``attr='method'``, over ``by_engine``) or engine (over ``by_method``) that
    beats every other one in each group, by a decided decode comparison, if one does. With
    three methods on an engine, the winner need not be decided against the third's pairs."""
    winners = set()
    for g in ordered_unique(p.group for p in pairs):
        group = [p for p in pairs if p.group == g]
        sides = ordered_unique(getattr(r, attr) for p in group for r in (p.decode.a, p.decode.b))
        beats_all = [
            x
            for x in sides
            if all(
                p.decode.decided and getattr(p.decode.winner, attr) == x
                for p in group
                if x in (getattr(p.decode.a, attr), getattr(p.decode.b, attr))
            )
        ]
        if len(beats_all) != 1:
            return None
        winners.add(beats_all[0])
    return winners.pop() if len(winners) == 1 else None


def side_by_side(rs: RunSet, ref: RunSet) -> list[SideBySide]:
    ours = {r.config: r for r in single_request(rs.runs)}
    out = []
    for pr in single_request(ref.runs):
        mine = ours.get(pr.config)
        a = mine.decode.mean if mine else None
        b = pr.decode.mean
        out.append(
            SideBySide(
                config=pr.config,
                label=f"{pr.engine} + {pr.method}",
                ours=a,
                published=b,
                diff_pct=pct(a, b) if a is not None and b else None,
            )
        )
    return out


@dataclasses.dataclass(frozen=True)
class ReportContext:
    """Every name report.md.j2 and its partials use, typed: the template only arranges these.
    ``charts`` is filled in by the renderer once the charts are drawn."""

    rs: RunSet
    simulated: bool
    family: Family
    alpha: float
    single: list[RunView]
    baselines: list[RunView]
    ranked: list[Ranked]
    by_engine: list[Pairwise]
    by_method: list[Pairwise]
    by_setup: list[Pairwise]
    dominant_leads: list[Pairwise]
    leaders: list[TtftLeader]
    ttft_engine: str | None
    dominant_method: str | None
    dominant_engine: str | None
    methods: list[str]
    engines: list[str]
    best: RunView | None
    ttft_best: RunView | None
    best_sweep: ConcurrencySweep | None
    ttft_sweep: ConcurrencySweep | None
    losers: list[tuple[str, list[str]]]
    stability: list[tuple[RunView, bool | None]]
    max_sd: float | None
    ranking_resolved: bool
    invalid: list[RunView]
    #: payloads that could not be read: every summary counts them (issue 39)
    unreadable: list[Unreadable]
    #: unreadable payloads of configurations without speculation (a baseline not measured?)
    unreadable_baselines: list[Unreadable]
    warned: list[RunView]
    after_fix: list[AfterFix]
    superseded: list[RunView]
    acceptance_rows: list[RunView]
    top_acceptance: RunView | None
    sweeps: list[ConcurrencySweep]
    no_sweep: list[RunView]
    speedups: list[Speedup]
    categories: CategorySection | None
    reference: RunSet | None
    side_by_side: list[SideBySide]
    valid_count: int
    lossless: list[LosslessRow]
    near_tie_nats: float
    near_tie_reason: str
    depth: list[DepthSweep]
    toy_banner: str
    trees: list[TreeContrast]
    single_all_valid: Callable[[str, int], RunView | None]
    differing: Callable[[str], list[str]]
    siblings: Callable[[str], list[str]]
    charts: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: issue 48: overhead at fixed acceptance, frontier, accuracy gate, methods, profile, appendix
    spec: SpeculationSections | None = None

    def names(self) -> dict[str, Any]:
        """The template's namespace (shallow: the models stay models)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def build_context(rs: RunSet, reference: RunSet | None = None) -> ReportContext:
    """All computed content of the report, for the template."""
    single_all = single_request(rs.runs)
    single = speculative(single_all)
    baselines = [r for r in single_all if r.method == "NONE"]
    family: Family = claim_family(rs, single, baselines, {**depth_tests(rs), **category_tests(rs)})
    ranked_runs = ranking(single)
    ranked = _ranked(ranked_runs, rs, family)
    by_engine = within(single, "engine", rs, family)
    by_method = within(single, "method", rs, family)
    leaders = ttft_leaders(single, rs, family)
    dominant_method = _dominant(by_engine, "method")
    sw = sweeps(rs, family)
    sweep_by_config = {s.config: s for s in sw}
    best = ranked[0].run if ranked else None
    best_decided = bool(ranked) and (ranked[0].vs_next is None or ranked[0].vs_next.decided)
    ttft_best = _ttft_best(single, rs, family)
    best_sweep = sweep_by_config.get(best.config) if best else None
    return ReportContext(
        rs=rs,
        simulated=rs.simulated,
        family=family,
        alpha=ALPHA,
        single=single,
        baselines=baselines,
        ranked=ranked,
        by_engine=by_engine,
        by_method=by_method,
        by_setup=within(single, "setup", rs, family),
        dominant_leads=[
            p for p in by_engine if p.decode.winner and p.decode.winner.method == dominant_method
        ],
        leaders=leaders,
        ttft_engine=_ttft_engine(leaders),
        dominant_method=dominant_method,
        dominant_engine=_dominant(by_method, "engine"),
        methods=ordered_unique(r.method for r in ranked_runs),
        engines=ordered_unique(r.engine for r in single),
        best=best if best_decided else None,
        ttft_best=ttft_best,
        best_sweep=best_sweep if _scales_best(best_sweep, sw) else None,
        ttft_sweep=sweep_by_config.get(ttft_best.config) if ttft_best else None,
        losers=_losers(single, dominant_method),
        stability=[(r, stable(r)) for r in single],
        max_sd=max((r.decode.stddev for r in single if r.decode.stddev is not None), default=None),
        ranking_resolved=all(x.vs_next is None or x.vs_next.decided for x in ranked),
        invalid=[r for r in rs.runs if not r.valid],
        unreadable=list(rs.unreadable),
        unreadable_baselines=[u for u in rs.unreadable if u.method in (None, "NONE")],
        warned=[r for r in rs.runs if r.valid and any(x.severity == "warning" for x in r.reasons)],
        after_fix=after_fix(rs),
        superseded=[r for r in rs.runs if r.attempt is not None and r.valid],
        acceptance_rows=[r for r in single if r.acceptance_rate is not None or r.acceptance_raw],
        top_acceptance=_top_acceptance(single),
        sweeps=sw,
        no_sweep=[r for r in single if r.config not in sweep_by_config],
        speedups=_speedups(baselines, single, rs, family),
        categories=category_section(rs, family),
        reference=reference,
        side_by_side=side_by_side(rs, reference) if reference is not None else [],
        valid_count=sum(1 for r in rs.runs if r.valid),
        lossless=lossless(rs.runs),
        near_tie_nats=NEAR_TIE_NATS,
        near_tie_reason=NEAR_TIE_REASON,
        depth=depth_sweeps(rs, family),
        toy_banner=TOY_MODEL_BANNER,
        trees=tree_contrasts(rs),
        single_all_valid=lambda config, c: _valid_current(rs, config, c),
        differing=lambda config: differing_settings(rs, config),
        siblings=lambda config: siblings(rs, config),
        spec=speculation_sections(rs, ranked_runs),
    )


def _ranked(ranked_runs: list[RunView], rs: RunSet, family: Family) -> list[Ranked]:
    """The decode ranking, each run compared with the next one down."""
    return [
        Ranked(
            rank=i + 1,
            run=r,
            vs_next=compare(r, ranked_runs[i + 1], "decode", rs.published_deltas, family)
            if i + 1 < len(ranked_runs)
            else None,
        )
        for i, r in enumerate(ranked_runs)
    ]


def _ttft_engine(leaders: list[TtftLeader]) -> str | None:
    """The engine that leads TTFT everywhere, when every leader is known and one engine leads."""
    leader_engines = {lead.run.engine for lead in leaders if lead.run is not None}
    if leaders and all(lead.run for lead in leaders) and len(leader_engines) == 1:
        return leader_engines.pop()
    return None


def _ttft_best(single: list[RunView], rs: RunSet, family: Family) -> RunView | None:
    """The config with the lowest TTFT among those whose TTFT is ordered against all others."""
    ttft_best: RunView | None = None
    for cand in single:
        comps = [
            compare(cand, o, "ttft", rs.published_deltas, family) for o in single if o is not cand
        ]
        if comps and all(c.better == "a" and c.decided for c in comps):
            ttft_best = cand
    return ttft_best


def _scales_best(best_sweep: ConcurrencySweep | None, sw: list[ConcurrencySweep]) -> bool:
    """Whether the best run's configuration scales further than every other sweep peaks."""
    return bool(
        best_sweep
        and best_sweep.scales_through
        and all(s is best_sweep or (s.peak or 0) < (best_sweep.scales_through or 0) for s in sw)
    )


def _losers(single: list[RunView], dominant_method: str | None) -> list[tuple[str, list[str]]]:
    """Each method the dominant one beats, with the engines it ran on."""
    return [
        (m, ordered_unique(r.engine for r in single if r.method == m))
        for m in ordered_unique(r.method for r in single)
        if dominant_method and m != dominant_method
    ]


def _top_acceptance(single: list[RunView]) -> RunView | None:
    """The run with the highest measured acceptance rate."""
    return max(
        (r for r in single if r.acceptance_rate is not None),
        key=lambda r: r.acceptance_rate or 0.0,
        default=None,
    )


def _speedups(
    baselines: list[RunView], single: list[RunView], rs: RunSet, family: Family
) -> list[Speedup]:
    """Each run against the baseline of its engine: the decode comparison and the ratio."""
    speedups = []
    for b in baselines:
        for r in single:
            if r.engine == b.engine:
                c = compare(r, b, "decode", rs.published_deltas, family)
                ratio = (
                    r.decode.mean / b.decode.mean
                    if r.decode.mean is not None and b.decode.mean
                    else None
                )
                speedups.append(
                    Speedup(engine=r.engine, baseline=b, run=r, ratio=ratio, comparison=c)
                )
    return speedups


def _valid_current(rs: RunSet, config: str, concurrency: int) -> RunView | None:
    """The valid, current run of a configuration at one concurrency (after a failed attempt)."""
    same = [r for r in rs.runs if r.valid and not r.attempt and r.concurrency == concurrency]
    exact = next((r for r in same if r.config == config), None)
    if exact is not None:
        return exact
    # A failed configuration kept as its own entry (e.g. "<name>-stock"): its corrected sibling
    # is the valid run of the same engine and method.
    failed = next((r for r in rs.runs if r.config == config), None)
    if failed is None:
        return None
    return next((r for r in same if (r.engine, r.method) == (failed.engine, failed.method)), None)
