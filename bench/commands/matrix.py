"""CLI commands: ``plan`` (what would run), ``matrix`` (run it), ``demo`` (the whole pipeline on
the emulator). Parsing and printing only; the work is in bench.plan / bench.matrix / bench.demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def plan(
    experiment: Annotated[Path, typer.Argument(help="experiment file (YAML)")],
    only: Annotated[list[str] | None, typer.Option("--only", help="configuration name")] = None,
    model_cache: Annotated[str | None, typer.Option(help="host folder mounted at /models")] = None,
) -> None:
    """Print each configuration's exact server argv and docker run line (no side effects)."""
    from bench.engines.base import DEFAULT_MODEL_CACHE
    from bench.experiment import load_experiment
    from bench.plan import render_plan

    exp = load_experiment(experiment)
    typer.echo(render_plan(exp, only, model_cache=model_cache or DEFAULT_MODEL_CACHE))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("plan")(plan)
