"""ansible-lint (production profile, ansible/.ansible-lint) and --syntax-check pass on site.yml."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "ansible"
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "NO_COLOR": "1"}


@pytest.mark.parametrize("inventory", ["inventory.example.yml", "inventory.emulated.yml"])
def test_syntax_check(inventory: str) -> None:
    r = subprocess.run(
        [BIN / "ansible-playbook", "-i", inventory, "site.yml", "--syntax-check"],
        cwd=ANSIBLE,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_ansible_lint_production_profile() -> None:
    assert "profile: production" in (ANSIBLE / ".ansible-lint").read_text()
    r = subprocess.run(
        [BIN / "ansible-lint", "--offline", "--nocolor"],
        cwd=ANSIBLE,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]


def test_example_inventory_holds_only_gpu_hosts() -> None:
    import yaml

    example = yaml.safe_load((ANSIBLE / "inventory.example.yml").read_text())
    assert list(example["all"]["children"]) == ["gpu"]
    emulated = yaml.safe_load((ANSIBLE / "inventory.emulated.yml").read_text())
    hosts = emulated["all"]["children"]["emulated"]["hosts"]
    assert hosts["localhost"]["bench_backend"] == "emulated"
