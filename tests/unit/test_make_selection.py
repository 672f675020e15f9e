"""``make test`` (what CI runs) selects no ``gpu``-marked test: those need a GPU host and run
only on the device machine or through the verify role (issue 22, item 6)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from _pytest.mark.expression import Expression

REPO = Path(__file__).resolve().parents[2]


def make_test_phases() -> list[str]:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    # the recipe runs its phases one after another: together they are what CI runs
    phases = re.findall(r' -m "([^"]+)" tests', recipe)
    assert phases, recipe
    return phases


def make_test_expression() -> str:
    return " or ".join(f"({p})" for p in make_test_phases())


def collected(expr: str, path: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", expr, path],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode in (0, 5), proc.stdout + proc.stderr  # 5: nothing selected
    return [ln for ln in proc.stdout.splitlines() if "::" in ln]


def test_make_test_selects_no_gpu_test() -> None:
    expr = make_test_expression()
    gpu = collected("gpu", "tests/infra")
    assert len(gpu) >= 8, gpu  # the GPU host checks exist
    selected = collected(expr, "tests/infra")
    assert selected, "make test selects none of tests/infra"
    assert not set(gpu) & set(selected), sorted(set(gpu) & set(selected))


def test_make_test_runs_every_tier() -> None:
    expr = make_test_expression()
    for tier in ("unit", "integration", "contract", "e2e", "engine"):
        assert collected(expr, f"tests/{tier}"), tier


def selects(expr: str, markers: set[str]) -> bool:
    return Expression.compile(expr).evaluate(lambda name, **_: name in markers)


def test_each_test_runs_in_exactly_one_phase() -> None:
    # Every tier with or without `gpu`: a GPU host check runs in no phase, an engine test in the
    # second, anything else in the first (issue 50: no `timing` marker, no quiet phase for an
    # oracle; the Docker seed matrix runs in the first).
    phases = make_test_phases()
    assert len(phases) == 2
    for tier in ("unit", "integration", "e2e", "contract", "engine"):
        for extra in (set(), {"gpu"}):
            markers = {tier, *extra}
            chosen = [k for k, p in enumerate(phases) if selects(p, markers)]
            if "gpu" in markers:
                assert chosen == [], markers
            else:
                assert chosen == ([1] if tier == "engine" else [0]), markers
    assert collected(phases[0], "tests/e2e/test_matrix_docker.py")
