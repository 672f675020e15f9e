"""uv.lock is the one source of the Python environment: the pip files are its exports, the uv
that installs it is the one the dev group pins, and nothing still names the old constraints."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
EXPORTS = {
    "requirements/runtime.txt": ["--no-dev"],
    "requirements/dev.txt": [],
}


def _uv() -> str:
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.is_file() else shutil.which("uv")
    assert found, "uv is not installed here: `make setup` installs it (dev group)"
    return found


def _run_uv(*args: str) -> str:
    env = {**os.environ, "UV_NO_PROGRESS": "1"}
    proc = subprocess.run(
        [_uv(), *args], cwd=REPO, capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _pins(text: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, flags=re.M))


def test_lock_matches_pyproject() -> None:
    _run_uv("lock", "--check", "--offline")


@pytest.mark.parametrize("path", sorted(EXPORTS))
def test_pip_files_are_the_locks_export(path: str) -> None:
    want = _run_uv("export", "--frozen", "--quiet", "--no-emit-project", *EXPORTS[path])
    # the export's header names its own command line; the pins and hashes are what count
    got = (REPO / path).read_text()
    body = [ln for ln in got.splitlines() if not ln.startswith("#")]
    assert body == [ln for ln in want.splitlines() if not ln.startswith("#")], (
        f"{path} is stale: run `make lock`"
    )
    assert "--hash=sha256:" in got


def test_runtime_export_has_no_dev_tools() -> None:
    runtime = _pins((REPO / "requirements/runtime.txt").read_text())
    dev = _pins((REPO / "requirements/dev.txt").read_text())
    for tool in ("pytest", "ruff", "mypy", "ansible", "ansible-lint", "uv"):
        assert tool in dev
        assert tool not in runtime
    assert "pydantic" in runtime


def test_bootstrap_uv_is_the_dev_groups_uv() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    dev_pins = [d for d in pyproject["dependency-groups"]["dev"] if d.startswith("uv==")]
    assert len(dev_pins) == 1
    boot = _pins((REPO / "requirements/uv.txt").read_text())
    assert f"uv=={boot['uv']}" == dev_pins[0]
    assert "--hash=sha256:" in (REPO / "requirements/uv.txt").read_text()


def test_lock_pins_what_the_emulator_image_installs() -> None:
    from bench.emulator.image import RUNTIME_REQUIREMENTS, locked_versions

    pins = locked_versions(REPO / "uv.lock")
    assert "specbench" not in pins
    for req in RUNTIME_REQUIREMENTS:
        assert req in pins


def test_nothing_installs_from_the_old_constraints_file() -> None:
    assert not (REPO / "constraints.txt").exists()
    for rel in (
        "Makefile",
        ".ci/run",
        "ansible/roles/bundle/tasks/main.yml",
        "ansible/roles/bundle/defaults/main.yml",
        "bench/emulator/image.py",
    ):
        assert "constraints.txt" not in (REPO / rel).read_text(), rel
