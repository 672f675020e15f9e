"""One progress bar for long work: the iterations of one ``specbench run`` or of a whole matrix.

It is a ``ProgressSink`` (the measurement loop tells it when an iteration starts and ends) and
draws only then: no render thread competes for the GIL while streams are being timed.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from bench.schema import IterationRecord


class ProgressBar:
    """Description, bar, done/total, and (``eta``) elapsed and remaining time."""

    def __init__(
        self,
        total: int,
        *,
        enabled: bool = True,
        eta: bool = False,
        transient: bool = False,
        log_iterations: bool = False,
    ) -> None:
        self.total = total
        self.enabled = enabled
        self.eta = eta
        self.transient = transient
        self.log_iterations = log_iterations
        self.label = ""
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            # rich loads only where a bar is drawn: its import cost stays off the other paths
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                ProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            columns: list[ProgressColumn] = [
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
            ]
            if self.eta:
                columns += [
                    TextColumn("elapsed"),
                    TimeElapsedColumn(),
                    TextColumn("left"),
                    TimeRemainingColumn(),
                ]
            self._progress = Progress(
                *columns, transient=self.transient, auto_refresh=False
            ).__enter__()
            self._task = self._progress.add_task("starting", total=self.total)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.__exit__(exc_type, exc, tb)

    def say(self, text: str) -> None:
        """What is being worked on (a configuration and level)."""
        self.label = text
        self._update(text)

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)
            self._progress.refresh()

    def log(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text)

    def iteration_started(self, index: int, total: int, warmup: bool) -> None:
        kind = "warmup" if warmup else "iteration"
        step = f"{kind} {index + 1}/{total}"
        self._update(f"{self.label} | {step}" if self.label else step)

    def iteration_finished(self, record: IterationRecord) -> None:
        if self.log_iterations:
            rate = record.per_stream_mean_tok_s
            note = (
                f"{rate:.2f} tok/s" if rate is not None else "INVALID: " + "; ".join(record.reasons)
            )
            self.log(
                f"  iteration {record.index + 1}{' (warmup)' if record.warmup else ''}: {note}"
            )
        self.advance()

    def _update(self, description: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=description)
            self._progress.refresh()
