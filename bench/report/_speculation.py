"""The report's sections on what no peer tells its reader (issue 48), computed from the
artifacts: engine overhead at fixed acceptance, the throughput-interactivity frontier, the
accuracy gate, the methods that are not fixed-k lossless, acceptance length both ways with the
per-position profile, and the artifact appendix."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bench.report._accuracy import AccuracySection, accuracy_section
from bench.report._appendix import Appendix, appendix
from bench.report._frontier import FrontierSection, frontier
from bench.report._lossless import lossless
from bench.report._methods import MethodRow, method_rows
from bench.report._model import RunSet, RunView
from bench.report._overhead import OverheadRow, overhead_rows
from bench.report._profile import ProfileRow, profile_rows


@dataclasses.dataclass(frozen=True)
class SpeculationSections:
    overhead: list[OverheadRow]
    frontier: FrontierSection
    accuracy: AccuracySection | None
    methods: list[MethodRow]
    profile: list[ProfileRow]
    appendix: Appendix | None


def speculation_sections(rs: RunSet, ranked: Sequence[RunView]) -> SpeculationSections:
    """Every issue-48 section of ``rs``'s report (``ranked``: the report's decode ranking)."""
    rows_all = lossless(rs.runs, every_method=True)
    overhead = overhead_rows(rs.runs)
    front = frontier(rs.runs)
    acc = accuracy_section(rs.runs, rows_all, rs.workload)
    lossless_rows = [r for r in lossless(rs.runs) if r.baseline]
    return SpeculationSections(
        overhead=overhead,
        frontier=front,
        accuracy=acc,
        methods=method_rows(rs.runs),
        profile=profile_rows(rs.runs),
        appendix=appendix(
            rs,
            ranked,
            lossless_rows,
            acc,
            overhead,
            [p.config for p in front.points],
            front.pareto_configs,
        ),
    )
