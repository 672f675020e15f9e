"""Shared test plumbing: tier markers from the folder, and the Docker rule for CI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TIERS = {"unit", "integration", "e2e", "contract", "infra", "engine"}
REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test is marked by its folder (tests/unit -> unit, ...; tests/infra -> e2e)."""
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO_ROOT / "tests").parts
        tier = parts[0] if parts else ""
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, "e2e" if tier == "infra" else tier))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A client of a reachable Docker engine. In CI an unreachable engine fails the test;
    elsewhere it skips it with the reason."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as err:
        msg = f"Docker engine unreachable: {err}"
        if in_ci():
            pytest.fail(msg + " (CI=true: Docker tests must not be skipped)")
        pytest.skip(msg)
    yield client
    client.close()
