"""Resuming and interrupting a matrix run (issues 38 faults 9 and 10, 39 class 7, 42 class 9).

- **Same settings.** A resume measures with the warmup, iterations, emulator time scale and
  launcher the run was started with (its ``experiment.lock.json``): an option the resume leaves
  out is taken from the lock, one it gives differently is refused, with the option to pass.
- **One matrix per folder.** While a matrix writes a folder it holds an exclusive ``flock`` of
  it (the kernel releases it when the process ends, however it ends); a second matrix on the
  same ``--out`` is refused.
- **Interrupted.** Ctrl-C or SIGTERM stops the server in flight; the matrix then says what it
  kept and the command that resumes the run (exit 130).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench.core import InputError, SpecbenchError
from bench.matrix._options import MatrixOptions
from bench.schema import Experiment, RunLock, RunStatus


class Interrupted(SpecbenchError):
    """The matrix was stopped by Ctrl-C or SIGTERM: what was kept, how to resume. Exit 130."""

    exit_code = 130


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _option(name: str, value: object) -> str:
    return f"{_flag(name)} {value:g}" if isinstance(value, float) else f"{_flag(name)} {value}"


def check_resume(old: RunLock, exp: Experiment, opts: MatrixOptions) -> MatrixOptions:
    """The options a resume runs with: each override the run was started with, where the
    resume gives none; InputError naming every option the resume gives otherwise."""
    problems: list[str] = []
    if opts.launcher != old.launcher:
        problems.append(
            f"--launcher {opts.launcher}, but the run was started with --launcher {old.launcher}"
        )
    update: dict[str, object] = {}
    for name in ("warmup", "iterations", "time_scale"):
        given = getattr(opts, name)
        recorded = getattr(old.overrides, name)
        if given is None:
            update[name] = recorded
            continue
        default = getattr(exp.workload, name) if name != "time_scale" else 1.0
        if given == (recorded if recorded is not None else default):
            continue
        if recorded is not None:
            started = f"was started with {_option(name, recorded)}"
        else:
            what = "the emulator's own speed" if name == "time_scale" else "the experiment's"
            started = f"was started without {_flag(name)} ({what}, {default:g})"
        problems.append(f"{_option(name, given)}, but the run {started}")
    if problems:
        fixes = [
            _option(n, getattr(old.overrides, n))
            for n in ("warmup", "iterations", "time_scale")
            if getattr(old.overrides, n) is not None
        ]
        same = " ".join([f"--launcher {old.launcher}", *fixes])
        raise InputError(
            "--resume",
            f"{'; '.join(problems)} (experiment.lock.json in {opts.out}): a resumed run measures "
            f"as it began, or its report would state two workloads. Resume with {same} (or "
            "leave those options out: a resume takes them from the lock), or start a new run "
            "with another --out",
        )
    return opts.model_copy(update=update) if update else opts


@contextlib.contextmanager
def hold_folder(out: Path) -> Iterator[None]:
    """Hold ``out`` for this matrix (an exclusive ``flock`` of the folder itself: no file to
    leave behind, released by the kernel however the process ends); refused (exit 2) while
    another process holds it."""
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(
                "--out",
                f"{out} is being written by another specbench matrix: wait for it to end, or "
                "give another --out",
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def resume_command(out: Path, argv: Sequence[str] | None = None) -> str:
    """The command that resumes this run: this matrix command with ``--resume``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["matrix"]:
        return f"specbench matrix EXPERIMENT --out {shlex.quote(str(out))} --resume"
    if "--resume" not in args:
        args.append("--resume")
    return shlex.join(["specbench", *args])


def interrupted_message(status: RunStatus | None, selected: Sequence[str], out: Path) -> str:
    """What an interrupted matrix kept (its status.json), what it stopped and the command that
    resumes it."""
    states = status.configurations if status is not None else {}
    kept = [f"{n} ({len(c.payloads)} payload(s))" for n, c in states.items() if c.status in (
        "done", "skipped")]  # fmt: skip
    parts = [
        "interrupted; the server in flight was stopped and every finished payload kept. "
        f"Kept in {out}: {', '.join(kept) if kept else 'no finished configuration'}"
    ]
    for name, c in states.items():
        if c.status == "interrupted":
            n = len(c.payloads)
            done = f"its {n} finished level(s) kept" if n else "no level of it had finished"
            parts.append(f"{name} stopped mid-way ({done}; the level in flight is not written)")
    failed = [n for n, c in states.items() if c.status == "failed"]
    if failed:
        parts.append(f"failed: {', '.join(failed)}")
    left = [n for n in selected if n not in states]
    if left:
        parts.append(f"not started: {', '.join(left)}")
    parts.append(f"status.json says which. Resume with: {resume_command(out)}")
    return ". ".join(parts)
