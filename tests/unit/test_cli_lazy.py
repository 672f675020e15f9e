"""The CLI imports only the command group a command needs (issue 20: a cold `specbench report`
under a second), and the lazy table names every command the groups register."""

from __future__ import annotations

import subprocess
import sys

import typer

from bench.cli import COMMAND_MODULES, build_app


def test_the_table_names_every_registered_command() -> None:
    app = build_app()
    group = typer.main.get_group(app)
    assert set(group.commands) - {"version"} == set(COMMAND_MODULES)
    for name, module in COMMAND_MODULES.items():
        only = typer.main.get_group(build_app([name, "--help"]))
        assert name in only.commands, (name, module)


def test_report_does_not_import_the_emulator_the_matrix_or_http_clients() -> None:
    code = (
        "import sys; from bench.cli import build_app; build_app(['report', 'x']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('aiohttp', 'httpx', 'docker', 'matplotlib') or m.startswith(('bench.emulator', "
        "'bench.matrix', 'bench.measure'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
