"""`make setup` checks its Python first (issue 29): stock Ubuntu 22.04 has Python 3.10 (and no
venv module), pyproject.toml requires >= 3.11. The Makefile's real targets run in a scratch copy
(no .tools/, no .venv/) with PY pointing at fake interpreters; the check stops them before
anything is built, with make's exit code 2 and what to install."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from needs import missing_tool

REPO = Path(__file__).resolve().parents[2]

FAKE = """#!/bin/sh
# answers the check's two probes as a Python {version} {venv} would
case "$2" in
  *ensurepip*) {venv_rc} ;;
  *version_info*) echo {version} ;;
  *) echo "fake python: unexpected $*" >&2; exit 99 ;;
esac
"""


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    if shutil.which("make") is None:
        missing_tool("make", "apt-get install make")
    for rel in ("Makefile", "pyproject.toml", "uv.lock", "requirements/uv.txt",
                "scripts/check_python.sh"):  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    return tmp_path


def _fake(tmp_path: Path, version: str, venv: bool = True) -> Path:
    path = tmp_path / f"fake-python{version}{'' if venv else '-novenv'}"
    venv_rc = "exit 0" if venv else "echo 'No module named ensurepip' >&2; exit 1"
    path.write_text(FAKE.format(version=version, venv="with venv" if venv else "", venv_rc=venv_rc))
    path.chmod(0o755)
    return path


def _make(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=cwd, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("target", ["setup", "setup-runtime", "setup-pip", "demo"])
def test_python_310_is_refused_before_anything_is_built(scratch: Path, target: str) -> None:
    py = _fake(scratch, "3.10")
    r = _make(scratch, target, f"PY={py}")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"make: {py} is Python 3.10; make setup needs Python >= 3.11" in r.stderr, r.stderr
    assert "sudo apt install python3.11 python3.11-venv && make setup PY=python3.11" in r.stderr
    assert "make setup VENV_PY=3.12" in r.stderr  # or let uv fetch a Python
    assert not (scratch / ".tools").exists() and not (scratch / ".venv").exists()


def test_python_without_venv_names_the_package(scratch: Path) -> None:
    py = _fake(scratch, "3.12", venv=False)
    r = _make(scratch, "setup", f"PY={py}")
    assert r.returncode == 2, r.stderr
    assert "has no venv module" in r.stderr and "sudo apt install python3.12-venv" in r.stderr
    assert not (scratch / ".tools").exists()


def test_a_python_that_does_not_run_is_named(scratch: Path) -> None:
    r = _make(scratch, "setup", "PY=python3.99-missing")
    assert r.returncode == 2, r.stderr
    assert "PY=python3.99-missing does not run a Python" in r.stderr, r.stderr


def test_uv_may_bring_the_venvs_python(scratch: Path) -> None:
    """A 3.10 with venv bootstraps uv; VENV_PY=3.12 is a version uv downloads: the check passes
    (make -n: the commands it would run, the sync with --python 3.12)."""
    boot = _fake(scratch, "3.10")
    ok = subprocess.run(
        ["sh", "scripts/check_python.sh", str(boot), "3.12", "boot"], cwd=scratch,
        capture_output=True, text=True,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    r = _make(scratch, "-n", "setup", f"PY={boot}", "VENV_PY=3.12")
    assert r.returncode == 0, r.stderr
    assert "sync --frozen --python 3.12" in r.stdout, r.stdout
    old = subprocess.run(
        ["sh", "scripts/check_python.sh", str(boot), "3.10", "boot"], cwd=scratch,
        capture_output=True, text=True,
    )  # fmt: skip
    assert old.returncode == 2 and "neither a Python on PATH nor a version >= 3.11" in old.stderr


def test_this_python_passes(scratch: Path) -> None:
    for mode in ("boot", "sync", "pip"):
        r = subprocess.run(
            ["sh", "scripts/check_python.sh", sys.executable, sys.executable, mode],
            cwd=scratch, capture_output=True, text=True,
        )  # fmt: skip
        assert r.returncode == 0, (mode, r.stderr)
