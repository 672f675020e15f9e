"""Throughput against interactivity (issue 48): every valid run as a point, tokens/s per user
(its per-stream decode mean) against tokens/s per GPU (its aggregate output rate over the
window, divided by the GPUs its server ran on), across the concurrency sweep; the points no
other point beats on both axes are the Pareto frontier, and their configurations are named.

Runs that make no lossless claim (a SYNTHETIC ACCEPTANCE control, a lossy verifier) are left off
the frontier and listed with why: their speed is not the model's.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.core import StrictModel
from bench.report._charts import ChartSpec, Series
from bench.report._model import RunView


class FrontierPoint(StrictModel):
    config: str
    engine: str
    method: str
    concurrency: int
    per_user: float = 0.0
    per_gpu: float = 0.0
    gpus: int = 1
    pareto: bool = False
    labels: tuple[str, ...] = ()


class FrontierSection(StrictModel):
    points: tuple[FrontierPoint, ...] = ()
    pareto_configs: tuple[str, ...] = ()
    left_off: tuple[tuple[str, str], ...] = ()  # (configuration, why)


def point(run: RunView, where: str = "") -> FrontierPoint | None:
    """A valid current run with both figures as a point (``where`` suffixes its name: a host)."""
    per_user, aggregate = run.decode.mean, run.aggregate.mean
    if not run.valid or run.attempt is not None or per_user is None or aggregate is None:
        return None
    gpus = run.tensor_parallel or 1
    labels = tuple(run.speculation.labels) if run.speculation else ()
    return FrontierPoint(
        config=f"{run.config}{where}",
        engine=run.engine,
        method=run.method,
        concurrency=run.concurrency,
        per_user=per_user,
        per_gpu=aggregate / gpus,
        gpus=gpus,
        labels=labels,
    )


def dominated(p: FrontierPoint, others: Sequence[FrontierPoint]) -> bool:
    """Some other point is at least as good on both axes and better on one."""
    return any(
        o is not p
        and o.per_user >= p.per_user
        and o.per_gpu >= p.per_gpu
        and (o.per_user > p.per_user or o.per_gpu > p.per_gpu)
        for o in others
    )


def frontier_of(points: Sequence[FrontierPoint]) -> tuple[FrontierPoint, ...]:
    """``points`` with the Pareto-optimal ones marked, in the order given."""
    return tuple(p.model_copy(update={"pareto": not dominated(p, points)}) for p in points)


def frontier(runs: Sequence[RunView]) -> FrontierSection:
    """The report's frontier over every valid lossless run."""
    pts: list[FrontierPoint] = []
    left: dict[str, str] = {}
    for r in runs:
        p = point(r)
        if p is None:
            continue
        if not r.lossless_method:
            left[r.config] = ", ".join(p.labels) or "not a lossless method"
            continue
        pts.append(p)
    marked = frontier_of(pts)
    names = tuple(dict.fromkeys(p.config for p in marked if p.pareto))
    return FrontierSection(points=marked, pareto_configs=names, left_off=tuple(left.items()))


def frontier_chart(section: FrontierSection, simulated: bool) -> ChartSpec | None:
    """One line per configuration through its concurrency levels (SVG beside the report)."""
    configs = list(dict.fromkeys(p.config for p in section.points))
    series = []
    for name in configs:
        mine = sorted((p for p in section.points if p.config == name), key=lambda p: p.per_user)
        if mine:
            series.append(
                Series(label=name, x=[p.per_user for p in mine], y=[p.per_gpu for p in mine])
            )
    if not series:
        return None
    xs = [x for s in series for x in s.x if x > 0]
    if not xs:
        return None
    lo, hi = min(xs), max(xs)
    # the x axis is log-scaled between its first and last tick: ticks at both ends
    ticks = [lo * (hi / lo) ** (i / 3) for i in range(4)] if hi > lo else [lo]
    title = "Throughput per GPU against tokens/s per user (each point a concurrency level)"
    return ChartSpec(
        role="frontier",
        file="frontier.svg",
        alt="Throughput against interactivity chart",
        title=f"SIMULATED: {title}" if simulated else title,
        kind="lines",
        xlabel="tok/s per user",
        ylabel="tok/s per GPU",
        labels=[f"{t:.0f}" if t >= 10 else f"{t:.2g}" for t in ticks],
        series=series,
    )


def fleet_frontier(hosts: Sequence[tuple[str, Sequence[RunView]]]) -> FrontierSection:
    """``specbench compare``'s frontier: every host's valid lossless runs as points named
    ``<configuration> @ <host>``, the Pareto-optimal ones across the fleet named."""
    pts: list[FrontierPoint] = []
    left: dict[str, str] = {}
    for host, runs in hosts:
        for r in runs:
            p = point(r, f" @ {host}")
            if p is None:
                continue
            if not r.lossless_method:
                left[p.config] = ", ".join(p.labels) or "not a lossless method"
                continue
            pts.append(p)
    marked = frontier_of(pts)
    names = tuple(dict.fromkeys(p.config for p in marked if p.pareto))
    return FrontierSection(points=marked, pareto_configs=names, left_off=tuple(left.items()))
