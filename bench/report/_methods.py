"""Methods that break the fixed-k lossless comparison, named (issue 48): every configuration
whose engine verified lossily, forced its acceptance, or chose its depth itself, with what its
flags and its engine's own log said, and what the report leaves it out of."""

from __future__ import annotations

from collections.abc import Sequence

from bench.core import StrictModel
from bench.report._model import RunView


class MethodRow(StrictModel):
    config: str
    engine: str
    method: str
    verification: str
    labels: tuple[str, ...]
    from_config: tuple[str, ...] = ()
    from_log: tuple[str, ...] = ()
    excluded_from: tuple[str, ...] = ()


def _excluded(run: RunView) -> tuple[str, ...]:
    out: list[str] = []
    if not run.lossless_method:
        out += [
            "the ranking and every comparison",
            "the concurrency sweeps",
            "the greedy-output (lossless) claims",
            "the throughput-interactivity frontier",
        ]
    if not run.fixed_depth or not run.lossless_method:
        out.append("the depth sweep's best k")
    return tuple(out)


def method_rows(runs: Sequence[RunView]) -> list[MethodRow]:
    """One row per configuration that is not fixed-k lossless, in the runs' order."""
    seen: dict[str, MethodRow] = {}
    for r in runs:
        sp = r.speculation
        if sp is None or (sp.lossless and sp.fixed_depth) or r.config in seen:
            continue
        seen[r.config] = MethodRow(
            config=r.config,
            engine=r.engine,
            method=r.method,
            verification=sp.verification,
            labels=tuple(sp.labels),
            from_config=tuple(sp.from_config),
            from_log=tuple(line[:300] for line in sp.from_log),
            excluded_from=_excluded(r),
        )
    return list(seen.values())
