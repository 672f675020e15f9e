"""The test tiers by folder, and how the parallel run groups them (tests/conftest.py)."""

from __future__ import annotations

#: Tests that share one Docker resource run in one pytest-xdist worker (``--dist loadgroup``),
#: one group per resource: the engine tier's image and its matrix run; the fresh-host Ansible
#: targets (their own containers, minutes of apt and lock waits); the fleet (three emulated
#: hosts, its own wheelhouse and containers); the rest of the e2e tier
#: (the images it builds, the emulated fleet and site runs). Every other test is spread over
#: the workers one by one.
XDIST_GROUPS = {"e2e": "docker-e2e", "infra": "docker-e2e", "engine": "engine"}
XDIST_FILE_GROUPS = {"test_ansible_fresh_host.py": "fresh-host", "test_ansible_fleet.py": "fleet"}


def xdist_group(nodeid: str) -> str | None:
    """The xdist group of a test (None: scheduled on its own)."""
    file = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return XDIST_FILE_GROUPS.get(file) or XDIST_GROUPS.get(tier_folder(nodeid))


def tier_folder(nodeid: str) -> str:
    """``tests/infra/test_host.py::t`` -> ``infra``."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def tier_of(nodeid: str) -> str:
    """``tests/unit/test_x.py::t`` -> ``unit`` (tests/infra counts as e2e)."""
    tier = tier_folder(nodeid)
    return "e2e" if tier == "infra" else tier
