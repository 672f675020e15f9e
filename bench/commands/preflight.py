"""CLI command: preflight (the model files against the pinned engines' rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.engines import load_experiment
from bench.matrix import check_models_dir, render_text


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("preflight")
    def preflight(
        experiment: Annotated[Path, typer.Argument(help="experiment file (YAML)")],
        models_dir: Annotated[
            Path,
            typer.Option(
                "--models-dir",
                help="host folder mounted at /models (one sub-folder per model)",
            ),
        ],
        as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    ) -> None:
        """Check the downloaded checkpoints against the pinned engines' rules.

        Exit 0: nothing blocks the run; 1: at least one error; 2: bad input."""

        report = check_models_dir(load_experiment(experiment), models_dir)
        if as_json:
            typer.echo(report.model_dump_json(indent=2))
        else:
            typer.echo(render_text(report))
        if not report.ok:
            raise typer.Exit(code=report.exit_code)
