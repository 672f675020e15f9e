"""CLI commands: report, compare, publish, verify-bundle (the work lives in bench.report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.core import InputError, check_output_dir
from bench.report import publish as do_publish
from bench.report import render_comparison, render_report
from bench.report import verify_bundle as do_verify


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("report")
    def report(
        artifacts_dir: Annotated[
            Path, typer.Argument(help="a matrix run's artifacts folder, or reports/reference")
        ],
        out: Annotated[
            Path | None, typer.Option(help="output folder (default: DIR/report)")
        ] = None,
        reference: Annotated[
            Path | None, typer.Option(help="reference set to show side by side")
        ] = None,
    ) -> None:
        """Render REPORT.md and its charts from artifacts alone (no GPU needed)."""

        if reference is not None and not reference.is_dir():
            raise InputError("--reference", f"no such folder: {reference}")
        check_output_dir(out if out is not None else artifacts_dir / "report", "--out")
        if out is not None:
            # the report goes below or beside the run (default DIR/report), never into the
            # run folder itself or the reference: files its SHA256SUMS does not vouch for
            for src in (artifacts_dir, *([reference] if reference else [])):
                if out.resolve() == src.resolve():
                    raise InputError("--out", f"{out} is the input {src}: give another folder")
        typer.echo(str(render_report(artifacts_dir, out, reference)))

    @app.command("compare")
    def compare(
        run_dirs: Annotated[
            list[Path], typer.Argument(help="two or more artifacts folders of one experiment")
        ],
        out: Annotated[Path, typer.Option(help="output folder for COMPARE.md")],
    ) -> None:
        """Compare one experiment across hosts: decode, TTFT and roofline efficiency per host,
        each against the first with the report's significance rule. Refuses runs of different
        experiments or workloads (exit 2, the differing field named)."""

        # COMPARE.md goes apart from the runs: a file added to a run folder is one its
        # SHA256SUMS does not vouch for (and publish would copy it)
        check_output_dir(out, "--out", inputs=run_dirs)
        typer.echo(str(render_comparison(run_dirs, out)))

    @app.command("publish")
    def publish(
        artifacts_dir: Annotated[Path, typer.Argument(help="a matrix run's artifacts folder")],
        out: Annotated[Path, typer.Option(help="bundle folder to create")],
        tarball: Annotated[bool, typer.Option(help="also write OUT.tar.gz")] = False,
    ) -> None:
        """Write a self-contained bundle (report, charts, artifacts, SHA256SUMS). Refuses
        SIMULATED runs and runs without a valid payload."""

        folder = do_publish(artifacts_dir, out, tarball=tarball)
        typer.echo(str(folder))
        if tarball:
            typer.echo(str(folder.parent / f"{folder.name}.tar.gz"))

    @app.command("verify-bundle")
    def verify_bundle(
        bundle: Annotated[Path, typer.Argument(help="bundle folder or .tar.gz")],
    ) -> None:
        """Check a published bundle: checksums, links, payloads. Exit 1 on any problem."""

        problems = do_verify(bundle)
        for p in problems:
            typer.echo(f"FAIL {p}")
        if problems:
            raise typer.Exit(1)
        typer.echo(f"OK {bundle}")
