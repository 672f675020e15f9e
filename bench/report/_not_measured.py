"""Configurations of the run that left no payload, and why (the matrix's status.json): the
report names each one in its summary, so a four-way with two sides missing never reads as a
two-way that was planned (2026-12-07: an H100 run where four of seven configurations failed
rendered a report that did not mention them). The causes are read again from each server's
log by the matrix's own rules (``bench.engines._fatal``), so a folder written by an older
specbench gets today's reading of its logs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.engines._fatal import known_causes
from bench.engines._scrub import scrub
from bench.report._model import ConfigInfo, NotMeasured, RunView, Unreadable
from bench.schema import RunStatus

#: reason lines ``known_causes`` wrote at run time: replaced by its reading of the log now
_CAUSE_PREFIXES = ("the server log names the cause:", "the server raised", "exit code ")
#: a reason's first line is cut to this many characters
MAX_REASON = 300


def not_measured(
    configs: Sequence[ConfigInfo],
    status: RunStatus | None,
    runs: Sequence[RunView],
    unreadable: Sequence[Unreadable],
    logs: Mapping[str, list[str]],
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
        stored = list(st.reasons) if st is not None else []
        text = "\n".join(logs.get(cfg.name, []))
        first = next((r for r in stored if not r.startswith(_CAUSE_PREFIXES)), "")
        reasons = [_first_line(r) for r in stored if not r.startswith(_CAUSE_PREFIXES)]
        reasons += [_first_line(c) for c in known_causes(first, text)]
        out.append(
            NotMeasured(
                config=cfg.name,
                engine=cfg.engine,
                method=cfg.method,
                state=st.status if st is not None else "not run",
                reasons=tuple(dict.fromkeys(scrub(r) for r in reasons if r)),
            )
        )
    return tuple(out)


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    line = line.removesuffix("; last log lines:").strip()
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 3] + "..."
