"""The accuracy gate beside greedy equality (issue 48): each configuration's score on the task
with known answers, recomputed from its recorded answers, against its engine's baseline.

The gate is MLPerf's rule for a speculative head (inference_rules.adoc, the Qwen3.6-27B edge
workload): greedy-equivalent output and at least ``min_ratio`` (97 %) of the reference's
accuracy; the reference here is the same engine's baseline. Greedy-equivalent: every answer of
the task is the baseline's (the outputs' sha256 agree), or, where they differ, the greedy-output
section judged this configuration lossless (identical or within numerics) at the same level.
A SYNTHETIC ACCEPTANCE control is scored but never gated: its output is not the model's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from bench.core import StrictModel
from bench.report._lossless import LosslessRow
from bench.report._model import RunView

MIN_RATIO: Final = 0.97  # the default of workload.accuracy.min_ratio (MLPerf's 97 %)


class AccuracyRow(StrictModel):
    config: str
    engine: str
    method: str
    concurrency: int
    task: str
    scorer: str
    correct: int
    total: int
    baseline: str | None = None
    baseline_correct: int | None = None
    baseline_total: int | None = None
    ratio: float | None = None
    same_answers: int | None = None
    greedy: str = ""
    verdict: str = ""
    labels: tuple[str, ...] = ()
    wrong: tuple[str, ...] = ()

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


class AccuracySection(StrictModel):
    rows: tuple[AccuracyRow, ...] = ()
    min_ratio: float = MIN_RATIO
    task: str | None = None
    source: str | None = None
    sha256: str | None = None


def _score(run: RunView) -> tuple[int, int]:
    assert run.accuracy is not None
    return sum(i.correct for i in run.accuracy.items), len(run.accuracy.items)


def _same(run: RunView, base: RunView) -> int:
    assert run.accuracy is not None and base.accuracy is not None
    theirs = {i.id: i.output_sha256 for i in base.accuracy.items}
    return sum(
        1 for i in run.accuracy.items if i.output_sha256 and theirs.get(i.id) == i.output_sha256
    )


def _greedy(run: RunView, same: int, total: int, rows: Sequence[LosslessRow]) -> tuple[str, bool]:
    if same == total:
        return f"all {total} answers identical to the baseline's", True
    row = next(
        (x for x in rows if x.config == run.config and x.concurrency == run.concurrency), None
    )
    ok = row is not None and row.lossless is True
    judged = f"; greedy-output check: {row.verdict}" if row is not None else ""
    return f"{same} of {total} answers identical{judged}", ok


def _verdict(run: RunView, ratio: float | None, greedy_ok: bool, min_ratio: float) -> str:
    if run.synthetic is not None:
        return "not gated: SYNTHETIC ACCEPTANCE (its output is not the model's)"
    if not run.valid:
        return "not gated: the run is invalid (see Correctness issues)"
    if run.method == "NONE":
        return "reference"
    if ratio is None:
        return "not gated: no baseline answered the task"
    fails = [w for w, bad in (("accuracy", ratio < min_ratio), ("greedy", not greedy_ok)) if bad]
    return "PASS" if not fails else f"FAIL ({' and '.join(fails)})"


def _row(
    run: RunView, base: RunView | None, rows: Sequence[LosslessRow], min_ratio: float
) -> AccuracyRow:
    assert run.accuracy is not None
    correct, total = _score(run)
    b_correct, b_total = _score(base) if base is not None else (None, None)
    ratio = None
    if b_correct and b_total and total:
        ratio = (correct / total) / (b_correct / b_total)
    same = _same(run, base) if base is not None else None
    greedy, greedy_ok = (
        _greedy(run, same, total, rows) if same is not None else ("no baseline", False)
    )
    return AccuracyRow(
        config=run.config,
        engine=run.engine,
        method=run.method,
        concurrency=run.concurrency,
        task=run.accuracy.task,
        scorer=run.accuracy.scorer,
        correct=correct,
        total=total,
        baseline=base.config if base is not None else None,
        baseline_correct=b_correct,
        baseline_total=b_total,
        ratio=ratio,
        same_answers=same,
        greedy=greedy if run.method != "NONE" else "-",
        verdict=_verdict(run, ratio, greedy_ok, min_ratio),
        labels=tuple(run.speculation.labels) if run.speculation else (),
        wrong=tuple(i.id for i in run.accuracy.items if not i.correct),
    )


def accuracy_section(
    runs: Sequence[RunView], lossless_rows: Sequence[LosslessRow], workload: dict[str, Any]
) -> AccuracySection | None:
    """The gate over every current run that answered the task (None: no task was asked)."""
    answered = [r for r in runs if r.attempt is None and r.accuracy is not None]
    if not answered:
        return None
    spec = workload.get("accuracy") if isinstance(workload.get("accuracy"), dict) else {}
    min_ratio = float(spec.get("min_ratio", MIN_RATIO)) if spec else MIN_RATIO
    rows = []
    for run in answered:
        base = next((b for b in answered if b.engine == run.engine and b.method == "NONE"), None)
        rows.append(_row(run, base, lossless_rows, min_ratio))
    first = answered[0].accuracy
    assert first is not None
    return AccuracySection(
        rows=tuple(rows), min_ratio=min_ratio, task=first.task, source=first.source,
        sha256=first.sha256,
    )  # fmt: skip
