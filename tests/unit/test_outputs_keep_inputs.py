"""Outputs never destroy inputs (issue 47, class 5): an output that is an input of the command is
refused before anything is written; every OS error on an output (a name too long, a folder
nothing can be created in) is exit 2 naming the option; `tiny-model` deletes only what it
wrote (its manifest lists its files). The `run` cases are in
tests/integration/test_run_outputs.py (they need a server to measure)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from report_factory import seed_matrix, write_artifacts

from bench.cli import main

pytestmark = pytest.mark.unit


def cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    text = out.getvalue() + err.getvalue()
    assert "internal error" not in text and "Traceback" not in text, text
    return code, text


def test_provenance_never_writes_over_its_hardware_input(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "run", seed_matrix(sweep=False))
    hw = art / "hardware.json"
    before = hw.read_bytes()
    code, text = cli("provenance", "--hardware", str(hw), "--out", str(hw))
    assert code == 2 and "--out" in text and "is the input" in text, text
    assert hw.read_bytes() == before  # main 101bc6e: replaced by the provenance record
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: x\n")
    code, text = cli("provenance", "--experiment", str(exp), "--out", str(exp))
    assert code == 2 and "is the input" in text and exp.read_text() == "name: x\n"


def test_hardware_dump_and_out_are_two_files(tmp_path: Path) -> None:
    f = tmp_path / "hw.json"
    code, text = cli("hardware", "--allow-no-gpu", "--out", str(f), "--dump", str(f))
    assert code == 2 and "--dump" in text and not f.exists()


LONG = "x" * 300


@pytest.mark.parametrize(
    "argv",
    [
        ["hardware", "--allow-no-gpu", "--out", "{tmp}/" + LONG + ".json"],
        ["provenance", "--out", "{tmp}/" + LONG + ".json"],
        ["report", "{run}", "--out", "{tmp}/" + LONG],
        ["compare", "{run}", "{run2}", "--out", "{tmp}/" + LONG],
        ["publish", "{run}", "--out", "{tmp}/" + LONG],
        ["tiny-model", "{tmp}/" + LONG],
        ["demo", "--out", "{tmp}/" + LONG, "--no-progress"],
        ["matrix", "tiny-vllm-cpu.yaml", "--emulate", "--out", "{tmp}/" + LONG],
        ["hardware", "--allow-no-gpu", "--out", "/proc/specbench-hw.json"],
        ["report", "{run}", "--out", "/proc/specbench-report"],
        ["tiny-model", "/proc/specbench-tiny"],
        ["demo", "--out", "/proc/specbench-demo", "--no-progress"],
    ],
    ids=lambda argv: f"{argv[0]} {'long name' if LONG in ' '.join(argv) else '/proc'}",
)
def test_an_output_that_cannot_be_made_is_exit_2_naming_the_option(
    tmp_path: Path, argv: list[str]
) -> None:
    """A name longer than the filesystem takes, or a folder nothing can be created in (/proc
    answers os.access yes to root): main 101bc6e raised 'internal error: OSError' (exit 1)."""
    run = write_artifacts(tmp_path / "run", seed_matrix(simulated=False, sweep=False))
    run2 = write_artifacts(tmp_path / "run2", seed_matrix(simulated=False, sweep=False))
    args = [a.format(tmp=tmp_path, run=run, run2=run2) for a in argv]
    code, text = cli(*args)
    where = "OUT" if argv[0] == "tiny-model" else "--out"
    assert code == 2 and f"{where}: " in text, text
    assert "its filesystem takes" in text or "nothing can be created in" in text, text


def _tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_tiny_model_deletes_only_what_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "models"
    code, text = cli("tiny-model", str(out))
    assert code == 0, text
    manifest = json.loads((out / "target" / "specbench-tiny-model.json").read_text())
    assert sorted(manifest["files"]) == sorted(p.name for p in (out / "target").iterdir())
    notes = out / "target" / "my-notes.txt"
    notes.write_text("mine\n")
    tree = _tree(out)
    code, text = cli("tiny-model", str(out))
    assert code == 2 and "my-notes.txt" in text and "move it away" in text, text
    assert notes.read_text() == "mine\n" and _tree(out) == tree  # main: deleted with target/
    notes.unlink()
    code, text = cli("tiny-model", str(out))  # its own files only: replaced
    assert code == 0, text
