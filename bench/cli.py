"""The ``specbench`` command line: parses, delegates, prints. The work lives in the modules.

Each sub-command group is registered by a module in ``bench.commands``; this file only
assembles them and turns our errors into one-line messages and exit codes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer

from bench import __version__
from bench.commands import emulate, hardware, matrix, preflight, report, run, tiny_model
from bench.core import SpecbenchError

app = typer.Typer(
    name="specbench",
    help="Reproducible speculative-decoding benchmarks of LLM serving engines.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Reproducible speculative-decoding benchmarks of LLM serving engines."""


for _module in (run, emulate, matrix, report, hardware, preflight, tiny_model):
    _module.register(app)


@app.command("version")
def version() -> None:
    """Print the specbench version."""
    typer.echo(__version__)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script; exit code 2 for bad input, 1 for a failed run."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="specbench")
    except SpecbenchError as err:
        typer.echo(f"specbench: error: {err}", err=True)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        typer.echo("specbench: interrupted", err=True)
        sys.exit(130)
    except Exception as err:
        # A bug, not bad input: one line for the user, the traceback only on request.
        if os.environ.get("SPECBENCH_DEBUG") == "1":
            raise
        msg = " ".join(str(err).split())
        typer.echo(
            f"specbench: internal error: {type(err).__name__}: {msg} "
            "(re-run with SPECBENCH_DEBUG=1 for the traceback)",
            err=True,
        )
        sys.exit(1)
