"""The speculative-depth section: for each swept configuration (engine x method x concurrency),
decode and TTFT against k, acceptance per position, and the best k chosen by a rule over data.

Rule: the best k is the smallest k whose decode rate is not significantly below the best mean
(two-sided Welch test on the per-iteration samples, Holm-adjusted within the report's family of
claims, alpha 0.05): deeper speculation that buys nothing measurable costs draft work and memory
for nothing.

Explanation the reader can check: with a_i accepted draft tokens at position i over d drafts
(verification steps), position i is accepted with probability p_i = a_i / d, and each step
yields E = 1 + sum_i p_i tokens (the target's own token plus the accepted drafts). The measured
decode rate r then implies a step time of E / r: the knee is where E stops growing faster than
the step time.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from bench.core import StrictModel
from bench.report._claims import Family, TestKey, claim_key, welch_samples
from bench.report._model import Figure, RunSet, RunView

ALPHA = 0.05


class DepthPoint(StrictModel):
    k: int
    run: RunView
    per_position: tuple[float, ...] = Field(description="p_i = accepted at position i / drafts")
    tokens_per_step: float | None = Field(description="E = 1 + sum p_i, from the counters")
    step_ms: float | None = Field(description="E / measured decode rate, per stream")
    p_vs_best: float | None = None


class DepthSweep(StrictModel):
    group: str
    engine: str
    method: str
    concurrency: int
    points: tuple[DepthPoint, ...]
    best_k: int | None
    fastest_k: int | None
    declared_k: int | None = Field(description="the k the swept configuration declares")
    references: tuple[tuple[int, str], ...] = Field(
        default=(), description="published depths (k, source) to compare the best k with"
    )
    per_position_exported: bool
    holm: bool = Field(default=False, description="p values are Holm-adjusted in the family")


def expected_tokens_per_step(accepted_per_position: Sequence[int], drafts: int) -> float | None:
    """E = 1 + sum_i a_i / d; None without drafts or per-position counters."""
    if drafts <= 0 or not accepted_per_position:
        return None
    return 1.0 + sum(a / drafts for a in accepted_per_position)


def best_k(points: Sequence[DepthPoint]) -> tuple[int | None, int | None]:
    """(smallest k not significantly below the fastest, the fastest k) over known decode means."""
    known = [p for p in points if p.run.decode.mean is not None]
    if not known:
        return None, None
    fastest = max(known, key=lambda p: p.run.decode.mean or 0.0)
    for p in sorted(known, key=lambda p: p.k):
        if p is fastest or p.p_vs_best is None or p.p_vs_best >= ALPHA:
            return p.k, fastest.k
    return fastest.k, fastest.k


def _point(run: RunView) -> DepthPoint:
    drafts = run.drafts or 0
    per_pos = tuple(a / drafts for a in run.accepted_per_position) if drafts else ()
    tps = expected_tokens_per_step(run.accepted_per_position, drafts)
    rate = run.decode.mean
    step = 1000.0 * tps / rate if tps is not None and rate else None
    return DepthPoint(
        k=run.spec_tokens or 0, run=run, per_position=per_pos, tokens_per_step=tps, step_ms=step
    )


def _fastest(points: Sequence[DepthPoint]) -> DepthPoint | None:
    known = [p for p in points if p.run.decode.mean is not None]
    return max(known, key=lambda p: p.run.decode.mean or 0.0) if known else None


def _with_p(points: list[DepthPoint], family: Family | None) -> list[DepthPoint]:
    """Each point's p against the fastest k: Holm-adjusted within the report's family when one
    is given, else the raw Welch p."""
    fastest = _fastest(points)
    if fastest is None:
        return points
    out = []
    for p in points:
        pv = None
        if p is not fastest and len(p.run.decode.samples) >= 2:
            if family is not None:
                pv = family.adjusted.get(claim_key("decode", p.run, fastest.run))
            elif len(fastest.run.decode.samples) >= 2:
                pv = welch_samples(p.run.decode.samples, fastest.run.decode.samples)
        out.append(p.model_copy(update={"p_vs_best": pv}))
    return out


def _declared_k(rs: RunSet, configs: Sequence[str]) -> int | None:
    """The k the swept configuration declared: the point recorded without a depth deviation
    (bench.engines.at_depth records one wherever k differs), else that deviation's seed value."""
    for name in configs:
        info = rs.config_info(name)
        if info is None:
            continue
        devs = [d for d in info.deviations if d.get("flag") == "speculative tokens"]
        if not devs:
            return info.spec_tokens
        seed = devs[0].get("seed")
        if isinstance(seed, str) and seed.isdigit():
            return int(seed)
    return None


def _groups(rs: RunSet) -> list[tuple[str, int, list[RunView]]]:
    """(swept configuration, concurrency, its valid current runs) in the runs' order."""
    group_of = {c.name: c.depth_of for c in rs.configs if c.depth_of}
    # a lossy verifier or an adaptive depth is no point of a fixed-k sweep (issue 48): named
    # in the report's methods section, never the best k
    runs = [
        r
        for r in rs.runs
        if r.valid
        and r.attempt is None
        and r.config in group_of
        and r.fixed_depth
        and r.lossless_method
    ]
    keys = list(dict.fromkeys((group_of[r.config], r.concurrency) for r in runs))
    return [
        (g, c, [r for r in runs if group_of[r.config] == g and r.concurrency == c]) for g, c in keys
    ]


def depth_tests(rs: RunSet) -> dict[TestKey, tuple[Figure, Figure]]:
    """The depth section's tests (each k's decode against the fastest k's), for the family."""
    tests: dict[TestKey, tuple[Figure, Figure]] = {}
    for _, _, mine in _groups(rs):
        points = [_point(r) for r in mine]
        fastest = _fastest(points)
        if fastest is None:
            continue
        for p in points:
            if p is not fastest:
                tests[claim_key("decode", p.run, fastest.run)] = (p.run.decode, fastest.run.decode)
    return tests


def depth_sweeps(rs: RunSet, family: Family | None = None) -> list[DepthSweep]:
    """One sweep per depth-swept configuration and concurrency level, from valid current runs."""
    out: list[DepthSweep] = []
    for group, c, mine in _groups(rs):
        points = _with_p(sorted((_point(r) for r in mine), key=lambda p: p.k), family)
        chosen, fastest = best_k(points)
        declared = _declared_k(rs, [r.config for r in mine])
        info = rs.config_info(mine[0].config)
        out.append(
            DepthSweep(
                group=group,
                engine=mine[0].engine,
                method=mine[0].method,
                concurrency=c,
                points=tuple(points),
                best_k=chosen,
                fastest_k=fastest,
                declared_k=declared,
                references=info.depth_references if info is not None else (),
                per_position_exported=any(p.per_position for p in points),
                holm=family is not None,
            )
        )
    return out
