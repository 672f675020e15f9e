"""Acceptance and speedup per prompt category (issue 37): a run of a prompt-set workload
measured each category as its own windows, so each category has its own decode samples and
counter deltas. The speedup of a speculative run over the same engine's baseline at the same
concurrency is computed per category, with a 95% CI on the ratio and the report's own
significance rule: a Welch t-test on the per-iteration samples, decided on the Holm-adjusted p
over the report's whole claim family (these tests are part of it, ``category_tests``).

The ratio's CI: log(a/b) has standard error sqrt(s_a^2/(n_a m_a^2) + s_b^2/(n_b m_b^2)) (the
delta method), with the Welch-Satterthwaite degrees of freedom of those two terms; the interval
is exp(log ratio +- t * se). Unknown (None) with fewer than two samples on either side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from bench.core import StrictModel
from bench.core._stats import t_quantile
from bench.report._claims import (
    ALPHA,
    Family,
    Significance,
    TestKey,
    ordered_unique,
    raw_p,
)
from bench.report._model import CategoryView, Figure, RunSet, RunView


class CategorySpeedup(StrictModel):
    """One speculative run against its engine's baseline, in one category."""

    category: str
    run: RunView
    baseline: RunView
    ratio: float | None
    ci95_low: float | None
    ci95_high: float | None
    p: float | None
    p_adjusted: float | None
    significance: Significance
    acceptance_rate: float | None
    #: the category's draft tokens (0: nothing proposed)
    draft_tokens: int | None = None


class CategoryRow(StrictModel):
    """One run (configuration at one concurrency) across the categories, in column order."""

    run: RunView
    cells: list[CategoryView | None]


class CategorySection(StrictModel):
    categories: list[str]
    prompt_sets: list[str]
    #: enable_thinking as the runs sent it (None: not sent, the template's default)
    thinking: list[bool | None]
    rows: list[CategoryRow]
    speedups: list[CategorySpeedup]
    #: categories whose per-request counts were checked against the counters, and those that
    #: disagreed
    checked: int
    disagreements: list[tuple[RunView, CategoryView]]
    request_sources: list[str]


def test_key(category: str, a: RunView, b: RunView) -> TestKey:
    lo, hi = sorted((a.key, b.key))
    return (f"decode:{category}", lo, hi)


def _current(rs: RunSet) -> list[RunView]:
    return [r for r in rs.runs if r.valid and r.attempt is None and r.categories]


def _baseline(runs: Sequence[RunView], r: RunView) -> RunView | None:
    return next(
        (
            b
            for b in runs
            if b.method == "NONE" and b.engine == r.engine and b.concurrency == r.concurrency
        ),
        None,
    )


def _cell(r: RunView, category: str) -> CategoryView | None:
    return next((c for c in r.categories if c.category == category), None)


def _pairs(rs: RunSet) -> list[tuple[str, RunView, RunView, CategoryView, CategoryView]]:
    runs = _current(rs)
    out = []
    for r in runs:
        if r.method == "NONE":
            continue
        b = _baseline(runs, r)
        if b is None:
            continue
        for c in r.categories:
            bc = _cell(b, c.category)
            if bc is not None:
                out.append((c.category, r, b, c, bc))
    return out


def category_tests(rs: RunSet) -> dict[TestKey, tuple[Figure, Figure]]:
    """Each category's speculative-vs-baseline decode test, for the report's claim family."""
    return {test_key(cat, r, b): (c.decode, bc.decode) for cat, r, b, c, bc in _pairs(rs)}


def ratio_ci(a: Figure, b: Figure) -> tuple[float | None, float | None, float | None]:
    """(a/b, 95% CI low, high) of two figures' means; the CI None without spread."""
    if a.mean is None or b.mean is None or a.mean <= 0 or b.mean <= 0:
        return None, None, None
    ratio = a.mean / b.mean
    if a.stddev is None or b.stddev is None or (a.n or 0) < 2 or (b.n or 0) < 2:
        return ratio, None, None
    assert a.n is not None and b.n is not None
    va = a.stddev**2 / (a.n * a.mean**2)
    vb = b.stddev**2 / (b.n * b.mean**2)
    if va + vb == 0.0:
        return ratio, ratio, ratio
    df = (va + vb) ** 2 / (va * va / (a.n - 1) + vb * vb / (b.n - 1))
    half = t_quantile(0.975, df) * math.sqrt(va + vb)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def category_section(rs: RunSet, family: Family | None) -> CategorySection | None:
    """The report's per-category section; None when no run measured a prompt set."""
    runs = _current(rs)
    if not runs:
        return None
    cats = ordered_unique(c.category for r in runs for c in r.categories)
    ordered = sorted(runs, key=lambda r: (r.concurrency, r.method == "NONE"))
    rows = [CategoryRow(run=r, cells=[_cell(r, c) for c in cats]) for r in ordered]
    speedups = []
    for cat, r, b, c, bc in _pairs(rs):
        ratio, lo, hi = ratio_ci(c.decode, bc.decode)
        p = raw_p(c.decode, bc.decode)
        key = test_key(cat, r, b)
        q = family.adjusted.get(key) if family is not None else None
        decide = q if q is not None else p
        sig: Significance = (
            "unknown" if decide is None else "significant" if decide < ALPHA else "not_significant"
        )
        speedups.append(
            CategorySpeedup(
                category=cat,
                run=r,
                baseline=b,
                ratio=ratio,
                ci95_low=lo,
                ci95_high=hi,
                p=p,
                p_adjusted=q,
                significance=sig,
                acceptance_rate=c.request_rate if c.request_rate is not None else c.acceptance_rate,
                draft_tokens=c.draft_tokens,
            )
        )
    speedups.sort(key=lambda s: (s.run.concurrency, s.run.config, cats.index(s.category)))
    checked = [(r, c) for r in runs for c in r.categories if c.request_agrees is not None]
    return CategorySection(
        categories=cats,
        prompt_sets=ordered_unique(r.prompt_set for r in runs if r.prompt_set),
        thinking=list(dict.fromkeys(r.enable_thinking for r in runs)),
        rows=rows,
        speedups=speedups,
        checked=len(checked),
        disagreements=[(r, c) for r, c in checked if c.request_agrees is False],
        request_sources=ordered_unique(
            c.request_source for r in runs for c in r.categories if c.request_source
        ),
    )
