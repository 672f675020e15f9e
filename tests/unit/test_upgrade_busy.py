"""The benchmark role's upgrade probe (ansible/roles/benchmark/files/upgrade_busy.py).

Ubuntu runs `unattended-upgrade-shutdown --wait-for-signal` all the time: the probe must not take
it for an upgrade (issue #21, blocker 1), and must see a process holding dpkg's lock the way apt
does (fcntl), without taking the lock itself.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

PROBE = Path(__file__).resolve().parents[2] / "ansible/roles/benchmark/files/upgrade_busy.py"


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("upgrade_busy", PROBE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _wait_for(path: Path) -> None:
    for _ in range(100):
        if path.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A process holding an fcntl write lock on tmp/lock, as apt holds dpkg's lock-frontend."""
    lock, ready = tmp_path / "lock", tmp_path / "ready"
    code = (
        "import fcntl, sys, time\n"
        f"f = open({str(lock)!r}, 'a'); fcntl.lockf(f, fcntl.LOCK_EX)\n"
        f"open({str(ready)!r}, 'w').close(); time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        _wait_for(ready)
        yield lock, proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_held_dpkg_style_lock_names_its_holder(
    probe: ModuleType, lock_holder: tuple[Path, int]
) -> None:
    lock, pid = lock_holder
    assert probe.lock_holder(str(lock)) == pid
    # queried with F_GETLK, not taken: asked again, the holder still has it
    assert probe.lock_holder(str(lock)) == pid


def test_a_free_or_absent_lock_is_free(probe: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "lock").touch()
    assert probe.lock_holder(str(tmp_path / "lock")) is None
    assert probe.lock_holder(str(tmp_path / "absent")) is None


@pytest.mark.parametrize(
    ("script", "busy"),
    [("unattended-upgrade-shutdown", False), ("unattended-upgrade", True)],
)
def test_only_unattended_upgrade_itself_counts_as_an_upgrade(
    probe: ModuleType, tmp_path: Path, script: str, busy: bool
) -> None:
    path = tmp_path / script
    path.write_text("import time\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, str(path), "--wait-for-signal"])
    try:
        # the child's /proc cmdline can read empty for a moment after Popen returns (seen on a
        # loaded 2-core machine): wait until the probe sees this very process's command line,
        # so its answer below is about it
        want = [str(path), "--wait-for-signal"]
        deadline = time.monotonic() + 30
        while probe.command_line(proc.pid)[1:] != want and time.monotonic() < deadline:
            time.sleep(0.01)
        assert probe.command_line(proc.pid)[1:] == want
        pids = [pid for pid, _ in probe.upgrade_processes()]
        assert (proc.pid in pids) is busy, pids
    finally:
        proc.kill()
        proc.wait()
