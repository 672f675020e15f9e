"""The ``specbench`` command line: parses, delegates, prints. The work lives in the modules.

Each sub-command group is registered by a module in ``bench.commands``; this file only
assembles them and turns our errors into one-line messages and exit codes. A command imports
only its own group's module: ``specbench report`` never loads the emulator, the matrix or the
HTTP clients (half of a cold report's time was importing them); ``--help`` loads every group.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Final

import typer

from bench import __version__
from bench.core import SpecbenchError

#: command name -> the ``bench.commands`` module that registers it (a unit test holds this
#: table to what the modules really register)
COMMAND_MODULES: Final = {
    "run": "run", "validate": "run", "schema": "run",
    "emulate": "emulate",
    "plan": "matrix", "matrix": "matrix", "demo": "matrix",
    "report": "report", "compare": "report", "publish": "report", "verify-bundle": "report",
    "hardware": "hardware", "provenance": "hardware", "telemetry-sample": "hardware",
    "roofline": "hardware", "probe": "hardware",
    "preflight": "preflight",
    "tiny-model": "tiny_model",
    "pins": "pins",
}  # fmt: skip


def build_app(argv: Sequence[str] | None = None) -> typer.Typer:
    """The typer app with the command groups ``argv`` needs (every group when it names none)."""
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

    @app.command("version")
    def version() -> None:
        """Print the specbench version."""
        typer.echo(__version__)

    first = next((a for a in argv or () if not a.startswith("-")), None)
    groups = [COMMAND_MODULES[first]] if first in COMMAND_MODULES else COMMAND_MODULES.values()
    for group in dict.fromkeys(groups):
        importlib.import_module(f"bench.commands.{group}").register(app)
    return app


def __getattr__(name: str) -> typer.Typer:
    """``bench.cli.app``: the app with every command group (tests introspect it)."""
    if name == "app":
        return build_app()
    raise AttributeError(name)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script. Exit codes: 0 done (``run``: a valid payload);
    1 a run that is invalid (payload written) or could not proceed, or a bug; 2 the user's
    input (a file, an option, a value; nothing listening at ``--base-url``); 3 a server
    condition (``ServerError``: HTTP 429/503 after the retries its Retry-After allowed, 5xx,
    answers that are not what they claim, a stall, before anything was measured);
    130 interrupted."""
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        build_app(args)(args=args, prog_name="specbench")
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
