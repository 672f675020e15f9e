"""The two plain `apt-get update` calls (preflight's refresh before it looks for the prebuilt
modules, prerequisites' python3-apt bootstrap) wait for apt's lists lock (issue 29).

apt's `DPkg::Lock::Timeout` covers dpkg's lock only; `apt-get update` takes
`/var/lib/apt/lists/lock`, which a stock Ubuntu host's apt-daily.service holds at first boot, and
gives up at once on it. The tasks' own shell (rendered from the roles' YAML with Ansible's
templar) runs here against a fake `apt-get` on PATH that names that lock a few times.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "ansible" / "roles"
TASKS = {
    "preflight": (
        ROLES / "preflight/tasks/driver.yml",
        "Refresh the package lists before looking for the prebuilt modules.",
        "preflight_apt_lock_timeout_s",
    ),
    "prerequisites": (
        ROLES / "prerequisites/tasks/main.yml",
        "Ensure python3-apt is installed, waiting for dpkg's lock.",
        "prerequisites_apt_lock_timeout_s",
    ),
}
LOCKED = "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 967 (apt-get)"
FAKE_APT_GET = """#!/bin/sh
echo "$*" >> "{log}"
if [ "$1" = update ]; then
  n=$(cat "{count}" 2>/dev/null || echo 0); echo $((n + 1)) > "{count}"
  if [ "$n" -lt "{locked}" ]; then echo "{msg}" >&2; exit 100; fi
fi
echo "done: $1"
"""


def _script(role: str, timeout_s: int) -> str:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    path, name, var = TASKS[role]
    (task,) = [t for t in yaml.safe_load(path.read_text()) if t.get("name") == name]
    argv = task["ansible.builtin.command"]["argv"]
    assert argv[:2] == ["sh", "-c"], argv
    templar = Templar(loader=DataLoader(), variables={var: timeout_s})
    script: str = templar.template(trust_as_template(argv[2]))
    return script


def _run(
    tmp_path: Path, role: str, timeout_s: int, locked: int, msg: str = LOCKED
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log, count = tmp_path / "calls.log", tmp_path / "count"
    fake = bin_dir / "apt-get"
    fake.write_text(FAKE_APT_GET.format(log=log, count=count, locked=locked, msg=msg))
    fake.chmod(0o755)
    sleep = bin_dir / "sleep"  # the 5 s between tries, shortened
    sleep.write_text("#!/bin/sh\nexec /bin/sleep 0.2\n")
    sleep.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    r = subprocess.run(
        ["sh", "-c", _script(role, timeout_s)], env=env, capture_output=True, text=True, timeout=60
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return r, calls


@pytest.mark.parametrize("role", sorted(TASKS))
def test_apt_get_update_waits_for_the_lists_lock(tmp_path: Path, role: str) -> None:
    r, calls = _run(tmp_path, role, timeout_s=60, locked=3)
    assert r.returncode == 0, r.stderr
    updates = [c for c in calls if c.startswith("update")]
    assert len(updates) == 4, calls  # three refusals, then the update
    assert all("DPkg::Lock::Timeout=60" in c for c in calls), calls
    assert r.stderr.count("waiting for apt's lists lock") == 3, r.stderr
    if role == "prerequisites":
        assert calls[-1].startswith("install -y -q --no-install-recommends"), calls
        assert calls[-1].endswith("python3-apt"), calls


@pytest.mark.parametrize("role", sorted(TASKS))
def test_a_lists_lock_held_past_the_timeout_fails_with_apts_message(
    tmp_path: Path, role: str
) -> None:
    r, calls = _run(tmp_path, role, timeout_s=1, locked=1000)
    assert r.returncode == 100, (r.stdout, r.stderr)
    assert LOCKED in r.stderr
    assert not [c for c in calls if c.startswith("install")], calls


@pytest.mark.parametrize("role", sorted(TASKS))
def test_another_apt_failure_is_not_retried(tmp_path: Path, role: str) -> None:
    msg = "E: The repository 'http://x jammy Release' does not have a Release file."
    r, calls = _run(tmp_path, role, timeout_s=60, locked=1000, msg=msg)
    assert r.returncode == 100 and msg in r.stderr, r.stderr
    assert calls == [calls[0]] and calls[0].startswith("update"), calls
