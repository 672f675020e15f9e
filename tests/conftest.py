"""Shared test plumbing: tier markers from the folder, and the Docker rule for CI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tiers import schedule_rank, tier_of, xdist_group

TIERS = {"unit", "integration", "e2e", "contract", "infra", "engine"}
REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test is marked by its folder (tests/unit -> unit, ...; tests/infra -> e2e), and
    the tests that share Docker resources get their xdist group. Done as each test is
    collected: pytest-xdist reads the groups in its own pytest_collection_modifyitems, which
    ran before a conftest's (tryfirst or not), so groups added there were never seen."""
    parts = Path(str(item.fspath)).relative_to(REPO_ROOT / "tests").parts
    tier = parts[0] if parts else ""
    if tier in TIERS:
        item.add_marker(getattr(pytest.mark, "e2e" if tier == "infra" else tier))
    group = xdist_group(item.nodeid)
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a parallel run's workers, the groups longest first, then every other test in its
    collection order (tests/tiers.py, GROUP_ORDER; the Makefile passes --no-loadscope-reorder).
    Every worker sorts the same collection the same way, as xdist requires."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        order = {id(item): k for k, item in enumerate(items)}
        items.sort(key=lambda item: (schedule_rank(item.nodeid), order[id(item)]))


def _write_timeline(terminalreporter: Any, reports: list[Any]) -> None:
    """Per worker: busy seconds, and when its last test ended (seconds from the first test's
    start); per group or tier: busy seconds and the workers it ran on. The session ends with its
    last worker: groups there are the ones to split or shorten. In a parallel run's controller,
    xdist has set each worker's report's ``node`` to that worker; without workers: ``main``."""
    spans = [
        (
            str(getattr(getattr(getattr(rep, "node", None), "gateway", None), "id", "main")),
            xdist_group(rep.nodeid) or tier_of(rep.nodeid) or "other",
            float(rep.start),
            float(rep.stop),
        )
        for rep in reports
        if getattr(rep, "stop", 0)
    ]
    if not spans:
        return
    t0 = min(start for _, _, start, _ in spans)
    workers: dict[str, list[float]] = {}
    groups: dict[str, tuple[float, set[str]]] = {}
    for worker, group, start, stop in spans:
        busy, last = workers.get(worker, [0.0, 0.0])
        workers[worker] = [busy + stop - start, max(last, stop - t0)]
        g_busy, g_workers = groups.get(group, (0.0, set()))
        groups[group] = (g_busy + stop - start, g_workers | {worker})
    terminalreporter.write_sep("-", "timeline per worker (seconds from the first test)")
    for worker in sorted(workers):
        busy, last = workers[worker]
        line = f"{worker:<8} busy {busy:7.1f} s, last test ended {last:7.1f} s"
        terminalreporter.write_line(line)
    terminalreporter.write_sep("-", "busy time per xdist group (or tier, for ungrouped tests)")
    for group in sorted(groups, key=lambda g: -groups[g][0]):
        busy, on = groups[group]
        terminalreporter.write_line(f"{group:<14} {busy:8.1f} s  on {', '.join(sorted(on))}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Where the time went, per tier: the sum of its tests' setup, call and teardown times (in
    a parallel run the tiers overlap, so these add up to more than the wall time)."""
    tested = [
        rep
        for reports in terminalreporter.stats.values()
        for rep in reports
        if getattr(rep, "nodeid", None)
        and getattr(rep, "duration", None) is not None
        and getattr(rep, "when", None) is not None
    ]
    _write_timeline(terminalreporter, tested)
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for rep in tested:
        tier = tier_of(rep.nodeid) or "other"
        totals[tier] = totals.get(tier, 0.0) + float(rep.duration)
        if rep.when == "call":
            counts[tier] = counts.get(tier, 0) + 1
    if totals:
        terminalreporter.write_sep("-", "time per tier (sum of test durations)")
        for tier in sorted(totals, key=lambda t: -totals[t]):
            terminalreporter.write_line(
                f"{tier:<12} {totals[tier]:8.1f} s  {counts.get(tier, 0):4d} tests"
            )


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
    _ensure_base_image(client)
    yield client
    client.close()


BASE_IMAGE = os.environ.get("SPECBENCH_BASE_IMAGE", "specbench/base:bookworm")


def _ensure_base_image(client: Any) -> None:
    """Every Docker test starts containers or builds FROM the local base image. When it is
    missing, docker/base/build.sh makes it; the script holds a lock, so a worker that asks while
    another worker (or `.ci/run`'s background build) is building waits for that build and then
    finds the image. The tiers that need no Docker start at once instead of waiting for it."""
    import subprocess

    try:
        client.images.get(BASE_IMAGE)
        return
    except Exception:
        pass
    env = {**os.environ, "BASE_IMAGE_TAG": BASE_IMAGE}
    r = subprocess.run(
        ["bash", str(REPO_ROOT / "docker" / "base" / "build.sh")],
        env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    if r.returncode != 0:
        pytest.fail(f"docker/base/build.sh failed (exit {r.returncode}):\n{r.stderr[-4000:]}")


@pytest.fixture(scope="session")
def emulator_image(docker_client: Any) -> str:
    """The emulator image built offline from this checkout (bench/emulator/image.py), once per
    test process: the e2e tests that run it in containers share the build (each built its own,
    ~40 s of CPU each, the same context every time). The images role's build on a host is its
    own (test_ansible_site.py)."""
    from bench.emulator.image import build_emulator_image

    return build_emulator_image(docker_client, "specbench/emulator:e2e")
