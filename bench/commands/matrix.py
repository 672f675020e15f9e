"""CLI commands: ``plan`` (what would run), ``matrix`` (run it), ``demo`` (the whole pipeline on
the emulator). Parsing and printing only; the work is in bench.plan / bench.matrix / bench.demo."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from bench.commands._params import number
from bench.core import (
    EMULATOR_IMAGE,
    MAX_ITERATIONS,
    TIME_SCALE,
    TIMEOUT_S,
    InputError,
    RunError,
    check_output_dir,
    describe_validation_error,
)
from bench.demo import DEMO_TIME_SCALE, demo_banner, run_categories_demo, run_demo
from bench.engines import DEFAULT_MODEL_CACHE, load_pinned_experiment
from bench.matrix import (
    LONG_MATRIX_S,
    MatrixOptions,
    MatrixResult,
    duration,
    render_plan,
    run_matrix,
    wall_time,
)
from bench.schema import Experiment


def plan(
    experiment: Annotated[Path, typer.Argument(help="experiment file (YAML)")],
    only: Annotated[list[str] | None, typer.Option("--only", help="configuration name")] = None,
    model_cache: Annotated[str | None, typer.Option(help="host folder mounted at /models")] = None,
    pins_host: Annotated[
        str | None, typer.Option(help="this host's name in the pins lock (default: hostname)")
    ] = None,
) -> None:
    """Print each configuration's exact server argv and docker run line (no side effects),
    with the pins of the experiment file and its pins lock."""

    pinned = load_pinned_experiment(experiment, pins_host or socket.gethostname())
    typer.echo(render_plan(pinned.experiment, only, model_cache=model_cache or DEFAULT_MODEL_CACHE))


def matrix(
    experiment: Annotated[Path, typer.Argument(help="experiment file (YAML)")],
    out: Annotated[Path, typer.Option("--out", help="artifacts folder")],
    only: Annotated[list[str] | None, typer.Option("--only", help="configuration name")] = None,
    resume: Annotated[bool, typer.Option(help="skip configurations already finished")] = False,
    launcher: Annotated[
        str, typer.Option(help="docker | process (the emulator, or --local-engine)")
    ] = "docker",
    emulate: Annotated[bool, typer.Option(help="run the emulator image instead")] = False,
    local_engine: Annotated[
        bool,
        typer.Option(
            help="with --launcher process: run the engine installed here, not the emulator"
        ),
    ] = False,
    time_scale: Annotated[
        float | None, typer.Option(help="emulator time scale", parser=number(TIME_SCALE))
    ] = None,
    allow_unpinned: Annotated[
        bool, typer.Option(help="run images/models whose pins are 'unresolved' (by tag)")
    ] = False,
    model_cache: Annotated[
        str | None, typer.Option(help="host folder mounted read-only at /models")
    ] = None,
    emulator_image: Annotated[str | None, typer.Option(help="emulator image (--emulate)")] = None,
    ready_timeout: Annotated[
        float | None, typer.Option(help="seconds to wait for ready", parser=number(TIMEOUT_S))
    ] = None,
    iterations: Annotated[
        int | None,
        typer.Option(help="override (labelled deviation)", min=1, max=MAX_ITERATIONS),
    ] = None,
    warmup: Annotated[
        int | None,
        typer.Option(help="override (labelled deviation)", min=0, max=MAX_ITERATIONS),
    ] = None,
    progress: Annotated[bool, typer.Option(help="show the progress bar")] = True,
    pins_host: Annotated[
        str | None,
        typer.Option(
            help="this host's name in the pins lock (a local build's image ID is per host; "
            "default: the hostname)"
        ),
    ] = None,
    pins_lock: Annotated[
        Path | None,
        typer.Option(help="the pins lock (default: <experiment>.lock.yaml beside it)"),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", help="start a matrix whose estimated wall time is over 4 h"),
    ] = False,
) -> None:
    """Run every configuration: one server per configuration, every concurrency level.

    Pins the experiment leaves 'unresolved' are taken from its pins lock (written by the first
    `make provision`); a real run refuses any still unpinned unless --allow-unpinned."""

    if launcher not in ("docker", "process"):
        raise InputError("--launcher", f"must be docker or process, not {launcher!r}")
    # before anything is read or written: a folder that can be made, never an input
    check_output_dir(out, "--out", inputs=[p for p in (experiment, pins_lock) if p is not None])
    if pins_lock is not None and not pins_lock.is_file():
        # a lock the user names must exist: a missing one would silently unpin every pin
        raise InputError(
            "--pins-lock",
            f"no such file: {pins_lock} (leave the option out to use the lock beside the "
            "experiment, which may not exist yet)",
        )
    pinned = load_pinned_experiment(experiment, pins_host or socket.gethostname(), pins_lock)
    try:
        opts = MatrixOptions(
            out=out,
            only=only or [],
            resume=resume,
            launcher="docker" if launcher == "docker" else "process",
            emulate=emulate,
            local_engine=local_engine,
            time_scale=time_scale,
            allow_unpinned=allow_unpinned,
            model_cache=model_cache or DEFAULT_MODEL_CACHE,
            emulator_image=emulator_image or EMULATOR_IMAGE,
            ready_timeout_s=ready_timeout,
            iterations=iterations,
            warmup=warmup,
            show_progress=progress,
        )
    except ValidationError as err:
        raise describe_validation_error("specbench matrix", err) from None
    scale = (opts.time_scale or 1.0) if opts.emulated else None
    _confirm_long(pinned.experiment, only, model_cache, scale, yes)
    result = run_matrix(pinned.experiment, opts, experiment_path=experiment, pinned=pinned)
    _print_outcomes(result)
    if result.failed:
        raise RunError(f"{len(result.failed)} configuration(s) failed: see {out}/status.json")


def _confirm_long(
    exp: Experiment, only: list[str] | None, model_cache: str | None, scale: float | None, yes: bool
) -> None:
    """A matrix `specbench plan` estimates past LONG_MATRIX_S says so, and starts only with
    --yes (exit 2 before anything is written)."""
    cache = model_cache or DEFAULT_MODEL_CACHE
    seconds = wall_time(exp, only, model_cache=cache, time_scale=scale)
    if seconds <= LONG_MATRIX_S:
        return
    line = (
        f"the plan estimates {duration(seconds)} for this matrix (`specbench plan` shows each "
        f"configuration), over {duration(LONG_MATRIX_S)}"
    )
    if not yes:
        raise InputError("--yes", f"{line}: pass --yes to start it")
    typer.echo(f"specbench: {line}; starting it (--yes)", err=True)


def _print_outcomes(result: object) -> None:

    assert isinstance(result, MatrixResult)
    typer.echo(f"run {result.run_id} -> {result.out}")
    for o in result.outcomes:
        verdict = "" if o.valid is None else (" valid" if o.valid else " INVALID")
        if o.expected_invalid and o.valid is False:
            verdict += " (expected)"
        typer.echo(f"  {o.name}: {o.status}{verdict}")
        for r in o.reasons[:3]:
            typer.echo(f"    - {r.splitlines()[0]}")


def demo(
    out: Annotated[Path, typer.Option(help="demo folder")] = Path("reports/demo"),
    time_scale: Annotated[
        float, typer.Option(help="emulator time scale", parser=number(TIME_SCALE))
    ] = DEMO_TIME_SCALE,
    seed_workload: Annotated[
        bool,
        typer.Option(
            "--seed-workload",
            help="the seed's workload (512 output tokens, warmup 2, 5 iterations; minutes)",
        ),
    ] = False,
    progress: Annotated[bool, typer.Option(help="show the progress bar")] = True,
    categories: Annotated[
        bool,
        typer.Option(
            "--categories/--no-categories",
            help="also run the categories experiment (prompt set by category) into "
            "<out>/categories",
        ),
    ] = True,
) -> None:
    """The whole pipeline on the emulator (no Docker, no GPU) -> reports/demo/REPORT.md.

    Everything it writes is SIMULATED."""

    check_output_dir(out, "--out")
    typer.echo(demo_banner(time_scale, seed_workload=seed_workload))
    result, report = run_demo(
        out,
        time_scale=time_scale,
        show_progress=progress,
        workload={} if seed_workload else None,
    )
    _print_outcomes(result)
    typer.echo(f"SIMULATED report: {report}")
    if categories:
        typer.echo("SIMULATED demo, part 2: acceptance and speedup by prompt category")
        result, report = run_categories_demo(
            out / "categories",
            time_scale=time_scale,
            show_progress=progress,
            workload={} if seed_workload else None,
        )
        _print_outcomes(result)
        typer.echo(f"SIMULATED report by prompt category: {report}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("plan")(plan)
    app.command("matrix")(matrix)
    app.command("demo")(demo)
