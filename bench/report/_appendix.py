"""The artifact appendix (issue 48), as artifact-evaluation committees ask for it: each claim of
the report, the command that reproduces it, the result to expect and how long the command takes
(``specbench plan``'s estimate, recorded by the matrix in plan.json).

A claim's command runs only the configurations the claim needs (``--only``; a SYNTHETIC
ACCEPTANCE control needs its source, a comparison its baseline) and renders their report.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from bench.core import StrictModel
from bench.report._accuracy import AccuracySection
from bench.report._lossless import LosslessRow
from bench.report._model import RunSet, RunView
from bench.report._overhead import OverheadRow

REPRO_OUT = "runs/reproduce"


class AppendixClaim(StrictModel):
    claim: str
    configs: tuple[str, ...]
    command: str
    expected: str
    wall: str


class Appendix(StrictModel):
    experiment: str
    plan_command: str
    basis: str
    claims: tuple[AppendixClaim, ...] = ()


def duration(seconds: float) -> str:
    s = round(seconds)
    h, m = s // 3600, (s % 3600) // 60
    return f"{h} h {m} min" if h else f"{m} min {s % 60} s" if m else f"{s} s"


def _ci(run: RunView) -> str:
    f = run.decode
    if f.mean is None:
        return "decode unknown"
    lo, hi = f.ci95_low, f.ci95_high
    ci = f" (95% CI [{lo:.2f}, {hi:.2f}])" if lo is not None and hi is not None else ""
    return f"{f.mean:.2f} tok/s per stream{ci}"


class _Builder:
    def __init__(self, rs: RunSet) -> None:
        self.rs = rs
        self.experiment = (
            rs.plan.experiment if rs.plan else f"<the experiment file of {rs.experiment}>"
        )
        self.estimates = (
            {e.name: e.start_s + e.measure_s + e.accuracy_s for e in rs.plan.estimates}
            if rs.plan
            else {}
        )
        self.claims: list[AppendixClaim] = []

    def add(self, claim: str, configs: Sequence[str], expected: str) -> None:
        names = tuple(dict.fromkeys(configs))
        argv = ["specbench", "matrix", self.experiment]
        for n in names:
            argv += ["--only", n]
        argv += ["--out", REPRO_OUT]
        command = f"{shlex.join(argv)} && specbench report {REPRO_OUT}"
        known = [self.estimates[n] for n in names if n in self.estimates]
        wall = (
            f"about {duration(sum(known))} (plan ESTIMATE)"
            if len(known) == len(names)
            else "unknown (no plan.json in these artifacts)"
        )
        self.claims.append(
            AppendixClaim(claim=claim, configs=names, command=command, expected=expected, wall=wall)
        )


def _controls_need(rs: RunSet, names: Sequence[str]) -> list[str]:
    """``names`` with each control's source before it (it forces what its source measured)."""
    out: list[str] = []
    for n in names:
        info = next((r for r in rs.runs if r.config == n and r.synthetic is not None), None)
        out += [info.synthetic.of, n] if info is not None and info.synthetic is not None else [n]
    return out


def appendix(
    rs: RunSet,
    ranked: Sequence[RunView],
    lossless_rows: Sequence[LosslessRow],
    accuracy: AccuracySection | None,
    overhead: Sequence[OverheadRow],
    frontier: Sequence[str],
    pareto: Sequence[str],
) -> Appendix | None:
    """The appendix of a run's report (None for a reference set: it has no artifacts)."""
    if rs.source_kind != "artifacts":
        return None
    b = _Builder(rs)
    for r in ranked:
        b.add(f"decode rate of {r.config} at concurrency {r.concurrency}", [r.config], _ci(r))
    for row in lossless_rows:
        if row.baseline:
            b.add(
                f"greedy output of {row.config} against {row.baseline} (c={row.concurrency})",
                [row.config, row.baseline],
                f"verdict {row.verdict}",
            )
    for a in accuracy.rows if accuracy else ():
        needs = _controls_need(rs, [a.config] + ([a.baseline] if a.baseline else []))
        b.add(
            f"accuracy gate of {a.config}", needs, f"{a.correct} of {a.total} correct; {a.verdict}"
        )
    for o in overhead:
        cost = f"{o.step_cost:.2f}" if o.step_cost is not None else "unknown"
        needs = [o.of, o.control] + ([o.baseline] if o.baseline else [])
        expected = f"a speculative step costs {cost} plain steps at acceptance {o.set_al:.2f}"
        b.add(f"engine overhead of {o.of} at fixed acceptance (c={o.concurrency})", needs, expected)
    if pareto:
        b.add(
            "the throughput-interactivity frontier",
            _controls_need(rs, list(pareto)),
            f"Pareto-optimal: {', '.join(pareto)}",
        )
    basis = rs.plan.basis if rs.plan else "no plan.json in these artifacts"
    return Appendix(
        experiment=b.experiment,
        plan_command=shlex.join(["specbench", "plan", b.experiment]),
        basis=basis,
        claims=tuple(b.claims),
    )
