"""Configurations of the run that left no payload, and why, as the matrix recorded it in
status.json: the report names each one in its summary, so a four-way with two sides missing
never reads as a two-way that was planned (2026-12-07: an H100 run where four of seven
configurations failed rendered a report that did not mention them). The reasons are the run's
own (the matrix scrubbed them and read each server's log when it wrote them); the report reads
artifacts only and never re-reads a log with today's rules."""

from __future__ import annotations

from collections.abc import Sequence

from bench.report._model import ConfigInfo, NotMeasured, RunView, Unreadable
from bench.schema import RunStatus

#: a reason's first line is cut to this many characters
MAX_REASON = 300


def not_measured(
    configs: Sequence[ConfigInfo],
    status: RunStatus | None,
    runs: Sequence[RunView],
    unreadable: Sequence[Unreadable],
) -> tuple[NotMeasured, ...]:
    """Each configuration of the lock with no payload, usable or not (an unusable one is listed
    apart, with its own reason): its state in status.json ("not run" where status.json does
    not name it) and its reasons, first line each."""
    measured = {r.config for r in runs} | {u.config for u in unreadable}
    out: list[NotMeasured] = []
    for cfg in configs:
        if cfg.name in measured:
            continue
        st = status.configurations.get(cfg.name) if status is not None else None
        reasons = [_first_line(r) for r in st.reasons] if st is not None else []
        out.append(
            NotMeasured(
                config=cfg.name,
                engine=cfg.engine,
                method=cfg.method,
                state=st.status if st is not None else "not run",
                reasons=tuple(dict.fromkeys(r for r in reasons if r)),
            )
        )
    return tuple(out)


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    line = line.removesuffix("; last log lines:").strip()
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 3] + "..."
