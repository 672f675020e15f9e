"""A test that needs a tool the project installs (make setup's venv, .ci/run's apt packages):
missing in CI (CI=true) the test fails, never skips, so a CI machine that lacks it is red
instead of green with less tested (issue 38: no test skips in CI for lack of a tool it could
install). Elsewhere it skips with how to install the tool."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_tool(what: str, install: str) -> NoReturn:
    """``what`` is missing; ``install`` says how the project installs it."""
    if in_ci():
        pytest.fail(f"{what} is missing (CI=true: a tool the project installs, {install})")
    pytest.skip(f"{what} is missing ({install})")
