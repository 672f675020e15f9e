"""A matrix whose estimate passes 4 hours prints the estimate and needs --yes (issue 47,
class 9): without it, exit 2 naming --yes and the estimate, nothing written. On main 101bc6e a
matrix `specbench plan` estimated at many hours started without a word."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

import bench.commands.matrix as matrix_cmd
from bench.cli import main
from bench.schema import EXPERIMENTS_DIR

pytestmark = pytest.mark.unit


def cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue() + err.getvalue()


def long_experiment(tmp_path: Path) -> Path:
    """The seed experiment at 40 iterations per level: `plan` estimates it at over 8 hours."""
    doc = yaml.safe_load((EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text())
    doc["workload"]["iterations"] = 40
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, text = cli("plan", str(path))
    assert code == 0 and "Estimated wall time: " in text
    hours = int(text.split("Estimated wall time: ")[1].split(" h ")[0])
    assert hours >= 4, text
    return path


class Started(BaseException):  # past main()'s error handling
    """run_matrix was reached (the matrix would start)."""


def _stub(*_: Any, **__: Any) -> Any:
    raise Started


def test_a_long_matrix_needs_yes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = long_experiment(tmp_path)
    monkeypatch.setattr(matrix_cmd, "run_matrix", _stub)
    out = tmp_path / "run"
    argv = ["matrix", str(exp), "--out", str(out), "--launcher", "process", "--allow-unpinned"]
    code, text = cli(*argv)
    assert code == 2 and "--yes: the plan estimates " in text and "over 4 h" in text, text
    assert not out.exists()
    with pytest.raises(Started):
        main([*argv, "--yes"])


def test_a_matrix_under_the_bound_starts_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matrix_cmd, "run_matrix", _stub)
    seed = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"  # about 1 h
    argv = ["matrix", str(seed), "--out", str(tmp_path / "run"), "--launcher", "process"]
    with pytest.raises(Started):
        main([*argv, "--allow-unpinned"])
    # the emulator at a time scale runs that much faster: its estimate is scaled
    long = long_experiment(tmp_path)
    with pytest.raises(Started):
        main(["matrix", str(long), "--out", str(tmp_path / "r2"), "--emulate",
              "--launcher", "process", "--time-scale", "0.01"])  # fmt: skip
