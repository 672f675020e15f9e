"""The test tiers by folder, and how the parallel run groups them (tests/conftest.py)."""

from __future__ import annotations

#: Tests that share one Docker resource run in one pytest-xdist worker (``--dist loadgroup``):
#: the e2e tier's images, containers and Ansible target hosts; the engine tier's image and its
#: one matrix run. Every other test is spread over the workers one by one.
XDIST_GROUPS = {"e2e": "docker-e2e", "infra": "docker-e2e", "engine": "engine"}


def tier_of(nodeid: str) -> str:
    """``tests/unit/test_x.py::t`` -> ``unit`` (tests/infra counts as e2e)."""
    parts = nodeid.split("::", 1)[0].split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    return "e2e" if tier == "infra" else tier
