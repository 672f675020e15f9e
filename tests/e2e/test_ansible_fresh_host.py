"""site.yml's first stages against a FRESH Debian bookworm container used as the target host.

The target is a container from the local debootstrap image (specbench/base:bookworm: minbase +
python3; no python3-debian, pciutils, gnupg, sudo or systemd), reached through community.docker's
`docker` connection plugin, not this machine. It reaches only the Debian mirror (the default
bridge network does here; set SPECBENCH_E2E_TARGET_NETWORK=host where it does not), so the vendor
repositories (Docker, NVIDIA) are replaced by a repository on that mirror, configured through the
same deb822_repository path, and the GPU checks run against fakes put on the container's PATH.

- Without the prerequisites the repository step fails for want of python3-debian: what the
  playbook did before the prerequisites role (issue #12, item 1).
- With them: preflight + prerequisites pass on the fresh host, and a second run changes nothing.
- Each preflight refusal shows its message: Secure Boot with a DKMS driver, a kernel outside the
  DKMS range, an image tag the registry lacks, an apt version madison does not list, too little
  disk, fewer than two GPUs (lspci and nvidia-smi).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "ansible"
BASE_IMAGE = os.environ.get("SPECBENCH_BASE_IMAGE", "specbench/base:bookworm")
NETWORK = os.environ.get("SPECBENCH_E2E_TARGET_NETWORK", "bridge")
PREFIX = "sbans-fresh-"


def _docker(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


# What a stock Ubuntu server runs from boot: unattended-upgrades.service's
# `/usr/bin/python3 /usr/share/unattended-upgrades/unattended-upgrade-shutdown --wait-for-signal`
# (it waits for shutdown and upgrades nothing), and at first boot apt-daily-upgrade's catch-up
# `unattended-upgrade`, which holds dpkg's locks (fcntl, as apt and dpkg take them) for minutes.
UU_SHUTDOWN = "/usr/share/unattended-upgrades/unattended-upgrade-shutdown"
UU_SHUTDOWN_PY = """#!/usr/bin/python3
import signal
signal.pause()
"""
UU_RUN = "/usr/bin/unattended-upgrade"
UU_RUN_PY = """#!/usr/bin/python3
import fcntl, sys, time
locks = [open(p, "a") for p in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")]
for f in locks:
    fcntl.lockf(f, fcntl.LOCK_EX)
time.sleep(float(sys.argv[1]))
with open("/tmp/sbans-uu-end", "w") as out:
    out.write(repr(time.time()))
"""
# Long enough that apt, reaching its install after preflight and an `apt-get update`, waits
# more than apt's default 60 s lock timeout for it.
FIRST_BOOT_UPGRADE_S = 100


def _boot_script(upgrade_s: int) -> str:
    """The container's command: the Ubuntu processes above, then sleep."""
    lines = []
    for path, body in ((UU_SHUTDOWN, UU_SHUTDOWN_PY), (UU_RUN, UU_RUN_PY)):
        lines += [f"mkdir -p {Path(path).parent}", f"cat > {path} <<'EOF'", body + "EOF",
                  f"chmod 0755 {path}"]  # fmt: skip
    lines.append(f"{UU_SHUTDOWN} --wait-for-signal &")
    if upgrade_s:
        lines.append(f"{UU_RUN} {upgrade_s} &")
    lines.append("exec sleep infinity")
    return "\n".join(lines)


#: Module execution as the user's SSH connection does it (ansible.cfg, [ssh_connection]
#: pipelining): one `docker exec` a task instead of three or four (a temporary folder, the
#: module's upload, its run). Measured on an idempotent preflight+prerequisites run: 12 s of
#: the machine's CPU instead of 18 (docs/ci-timing.md). Not for the runs in which a host
#: vanishes (Target.spawn: the poll and lost-controller tests): pipelined, community.docker's
#: connection reports a vanished container as a failed task where SSH, pipelined or not,
#: reports an unreachable host.
PIPELINED = {"ANSIBLE_PIPELINING": "True"}


class Target:
    """One fresh container that boots like stock Ubuntu, and the playbook runs made against it."""

    def __init__(self, tmp: Path, prefix: str = PREFIX, upgrade_s: int = 0) -> None:
        self.name = prefix + secrets.token_hex(4)
        self.tmp = tmp
        r = _docker(
            "run", "-d", "--name", self.name, "--network", NETWORK,
            "--label", "specbench.test=ansible-fresh-host", BASE_IMAGE,
            "sh", "-c", _boot_script(upgrade_s),
        )  # fmt: skip
        assert r.returncode == 0, f"cannot start {BASE_IMAGE}: {r.stderr}"
        self.mirror = self._mirror()

    def _mirror(self) -> str:
        # the image's sources.list is the mirror debootstrap used (docker/base/build.sh)
        out = self.sh("cat /etc/apt/sources.list 2>/dev/null").stdout.split()
        return out[1] if len(out) > 1 and out[0] == "deb" else "http://deb.debian.org/debian"

    def sh(self, cmd: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return _docker("exec", "-i", self.name, "sh", "-c", cmd, stdin=stdin)

    def fake(self, tool: str, script: str) -> None:
        """Put a fake `tool` first on the target's PATH (/usr/local/bin)."""
        r = self.sh(f"cat > /usr/local/bin/{tool} && chmod 0755 /usr/local/bin/{tool}", script)
        assert r.returncode == 0, r.stderr

    def clear_fakes(self) -> None:
        self.sh("rm -f /usr/local/bin/*")

    def remove(self) -> None:
        _docker("rm", "-f", self.name)

    def inventory_host(self) -> dict[str, Any]:
        return {
            "ansible_connection": "community.docker.docker",
            "ansible_host": self.name,
            "ansible_user": "root",
            "ansible_python_interpreter": "/usr/bin/python3",
        }

    def run(
        self,
        name: str,
        tags: str,
        extravars: dict[str, Any],
        skip: str = "",
        check: bool = False,
        hosts: dict[str, dict[str, Any]] | None = None,
        pipelined: bool = True,
    ) -> Any:
        """One playbook run against this target (host `fresh`), or against `hosts` (a fleet:
        inventory name -> host vars, see inventory_host); pipelined (PIPELINED) unless told
        not (tests/bench_ansible_pipelining.py)."""
        import ansible_runner

        bindir = str(Path(sys.executable).parent)
        private = self.tmp / "runner" / f"{name}-{secrets.token_hex(3)}"
        private.mkdir(parents=True)
        return ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(ANSIBLE),
            playbook="site.yml",
            inventory={"all": {"hosts": hosts or {"fresh": self.inventory_host()}}},
            extravars=extravars,
            cmdline=f"--tags {tags}"
            + (f" --skip-tags {skip}" if skip else "")
            + (" --check" if check else ""),
            envvars={
                "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
                "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg"),
                # facts gathered once per container (about 3 s a run over `docker exec`); the
                # checks under test read the host with commands, not facts
                "ANSIBLE_CACHE_PLUGIN": "jsonfile",
                "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.tmp / "facts"),
                "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "3600",
                **(PIPELINED if pipelined else {}),
            },
            quiet=True,
            timeout=600,
        )

    def spawn(self, name: str, tags: str, extravars: dict[str, Any], skip: str = "") -> Any:
        """ansible-playbook as a process of its own session, for a test to kill mid-run (a lost
        controller): ansible_runner.run cannot be killed from outside."""
        bindir = Path(sys.executable).parent
        private = self.tmp / "spawn" / f"{name}-{secrets.token_hex(3)}"
        private.mkdir(parents=True)
        inventory = {"all": {"hosts": {"fresh": self.inventory_host()}}}
        (private / "inventory.json").write_text(json.dumps(inventory))
        (private / "extravars.json").write_text(json.dumps(extravars))
        argv = [str(bindir / "ansible-playbook"), "-i", str(private / "inventory.json"),
                "-e", f"@{private / 'extravars.json'}", "--tags", tags,
                *(["--skip-tags", skip] if skip else []), str(ANSIBLE / "site.yml")]  # fmt: skip
        env = {
            **os.environ,
            "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
            "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg"),
        }
        with open(private / "stdout", "w") as out:
            return subprocess.Popen(
                argv, cwd=ANSIBLE, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip


def _base_vars(t: Target, tmp: Path) -> dict[str, Any]:
    """The real backend, with what a container cannot have switched to stand-ins."""
    return {
        "bench_backend": "real",
        "specbench_home": "/opt/specbench",
        "bundle_stage_dir": str(tmp / "stage"),
        # a Debian container stands in for the Ubuntu host
        "preflight_supported_os": {"Ubuntu": ["22.04", "24.04"], "Debian": ["12"]},
        "preflight_min_free_disk_gb": 1,
        # the images and models still to download count nothing here (their own test below)
        "preflight_image_disk_gb": 0,
        "preflight_model_disk_gb": 0,
        "preflight_min_ram_gb": 1,
        "preflight_check_connectivity": False,
        # the GPU, driver and image checks have their own tests below, with fakes
        "preflight_require_gpus": False,
        "preflight_check_driver": False,
        "preflight_check_images": False,
        # the shipped experiment's pins are unresolved: what preflight says of them has its own
        # test below; the pins lock a run records them in is the test's own, not the repository's
        "preflight_check_unresolved": False,
        "pins_lock_file": str(tmp / "pins.lock.yaml"),
        # no route to download.docker.com / nvidia.github.io from here: the vendor repositories
        # are replaced by one on the Debian mirror, through the same deb822_repository path
        "nvidia_driver_manage": False,
        "docker_manage_packages": False,
        "nvidia_container_toolkit_manage": False,
        "prerequisites_vendor_repositories": False,
        "prerequisites_extra_repositories": [
            {
                "name": "specbench-e2e-updates",
                "uris": t.mirror,
                "suites": ["bookworm-updates"],
                "components": ["main"],
                "signed_by": "/usr/share/keyrings/debian-archive-keyring.gpg",
            }
        ],
        "prerequisites_extra_pins": [{"package": "python3-debian", "version": "0.1.49*"}],
    }


# site.yml's summary play fails the run when a host failed (after writing the summary): not a
# failure of its own.
RESCUE_TASK = "Fail the run when a host failed (after the summary is written)."


def _failures(r: Any) -> list[str]:
    out = []
    for e in r.events:
        if e.get("event") == "runner_on_failed" and not e["event_data"].get("ignore_errors"):
            if e["event_data"].get("task") == RESCUE_TASK:
                continue
            d = e["event_data"]
            out.append(f"{d.get('task')}: {json.dumps(d.get('res', {}))[:2000]}")
    return out


def is_ignored_failure(event: dict[str, Any]) -> bool:
    return bool(
        event.get("event") == "runner_on_failed" and event["event_data"].get("ignore_errors")
    )


def ignored_failure(data: dict[str, Any]) -> str:
    """A failure check mode ignored, with its command: 'task: msg (cmd: argv)'."""
    res = data.get("res", {})
    cmd = res.get("cmd")
    argv = " ".join(map(str, cmd)) if isinstance(cmd, list) else cmd
    return f"{data.get('task')}: {res.get('msg')}" + (f" (cmd: {argv})" if argv else "")


def _stdout(r: Any) -> str:
    return (Path(r.config.artifact_dir) / "stdout").read_text()


def _changed_tasks(r: Any) -> list[str]:
    return sorted(
        e["event_data"]["task"]
        for e in r.events
        if e.get("event") == "runner_on_ok" and e["event_data"].get("res", {}).get("changed")
    )


@pytest.fixture(scope="module")
def make_target(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Target]]:
    try:
        docker_client.images.get(BASE_IMAGE)
    except Exception as err:  # CI must fail here, not skip: the image is built by the suite
        pytest.fail(f"{BASE_IMAGE} missing ({err}); build it with docker/base/build.sh")
    made: list[Target] = []

    def make(upgrade_s: int = 0) -> Target:
        t = Target(tmp_path_factory.mktemp("fresh-host"), upgrade_s=upgrade_s)
        made.append(t)
        return t

    yield make
    for t in made:
        t.remove()


@pytest.fixture(scope="module")
def provisioned(make_target: Callable[..., Target]) -> Iterator[tuple[Target, Any]]:
    """A fresh target after one preflight + prerequisites run, started while the first boot's
    unattended-upgrade holds dpkg's lock (apt's default 60 s lock timeout does not outlast it)."""
    t = make_target(upgrade_s=FIRST_BOOT_UPGRADE_S)
    assert t.sh("python3 -c 'import debian'").returncode != 0, "the image is not fresh"
    assert t.sh("ls /var/lib/apt/lists/*_Packages*").returncode != 0, "apt lists are not empty"
    first = t.run("first", "preflight,prerequisites", _base_vars(t, t.tmp))
    assert first.rc == 0, "\n".join(_failures(first)) or _stdout(first)[-4000:]
    yield t, first


def test_without_prerequisites_the_repository_step_fails(
    make_target: Callable[..., Target],
) -> None:
    """The playbook before the prerequisites role: deb822_repository on a fresh host."""
    t = make_target()
    extravars = {**_base_vars(t, t.tmp), "prerequisites_packages": ["ca-certificates"]}
    r = t.run("no-prereqs", "prerequisites", extravars)
    assert r.rc != 0
    failures = _failures(r)
    assert failures and failures[0].startswith("Ensure your own apt repositories")
    assert "python3-debian" in failures[0]


def test_fresh_host_passes_with_prerequisites(provisioned: tuple[Target, Any]) -> None:
    t, first = provisioned
    # the first install started while the first boot's upgrade held dpkg's lock, and waited
    # longer than apt's default 60 s for it
    uu_end = float(t.sh("cat /tmp/sbans-uu-end").stdout or "inf")
    task = "Ensure python3-apt is installed, waiting for dpkg's lock."
    install = {
        e["event"]: datetime.fromisoformat(e["created"]).timestamp()
        for e in first.events
        if e["event_data"].get("task") == task
    }
    assert install["runner_on_start"] + 60 < uu_end < install["runner_on_ok"], (install, uu_end)
    assert t.sh("python3 -c 'import debian, apt'").returncode == 0
    assert t.sh("command -v lspci && command -v gpg && command -v curl").returncode == 0
    src = t.sh("cat /etc/apt/sources.list.d/specbench-e2e-updates.sources").stdout
    assert "Suites: bookworm-updates" in src
    changed = _changed_tasks(first)
    assert any(c.startswith("Ensure the packages later tasks rely on") for c in changed), changed
    ran = {e["event_data"].get("task") for e in first.events if e.get("event") == "runner_on_ok"}
    assert "Check that every pinned version is listed." in ran


def test_second_run_changes_nothing(provisioned: tuple[Target, Any]) -> None:
    t, _ = provisioned
    r = t.run("second", "preflight,prerequisites", _base_vars(t, t.tmp))
    assert r.rc == 0, "\n".join(_failures(r))
    assert r.stats["changed"] == {}, f"changed on the second run: {_changed_tasks(r)}"


# ---- preflight refusals, one at a time, with fakes on the target's PATH ----------------------

FAKE_UNAME = """#!/bin/sh
if [ "$1" = "-r" ]; then echo "{kernel}"; else exec /usr/bin/uname "$@"; fi
"""
FAKE_MOKUTIL = """#!/bin/sh
[ "$1" = "--sb-state" ] && echo "SecureBoot {state}"
"""
FAKE_APT_CACHE = """#!/bin/sh
if [ "$1" = madison ]; then
  case "$2" in
{cases}
  esac
  exit 0
fi
exec /usr/bin/apt-cache "$@"
"""
FAKE_LSPCI = """#!/bin/sh
{lines}
"""
LSPCI_3090 = 'echo "{slot} 0300: 10de:2204 (rev a1)"'
FAKE_SMI = """#!/bin/sh
case "$*" in
  *driver_version*) echo "580.95.05";;
  *) echo "NVIDIA GeForce RTX 3090, 24576";;
esac
"""
FAKE_DOCKER = """#!/bin/sh
if [ "$1" = manifest ] && [ "$2" = inspect ]; then
  case "$3" in
    vllm/vllm-openai:*) echo "no such manifest: docker.io/$3" >&2; exit 1;;
    *) echo '{"schemaVersion": 2}'; exit 0;;
  esac
fi
exit 1
"""


@pytest.fixture
def target(provisioned: tuple[Target, Any]) -> Iterator[Target]:
    t, _ = provisioned
    t.clear_fakes()
    yield t
    t.clear_fakes()


def _refusal(t: Target, tags: str, extra: dict[str, Any]) -> str:
    """Run with `extra` and return the message of the one failure it must end with."""
    return _refusal_tags(t, tags, "", {**_base_vars(t, t.tmp), **extra})


def _refusal_tags(t: Target, tags: str, skip: str, extravars: dict[str, Any]) -> str:
    r = t.run("refusal", tags, extravars, skip=skip)
    failures = _failures(r)
    assert r.rc != 0 and failures, _stdout(r)[-3000:]
    assert len(failures) == 1, failures
    return failures[0]


def test_refuses_dkms_under_secure_boot(target: Target) -> None:
    target.fake("mokutil", FAKE_MOKUTIL.format(state="enabled"))
    target.fake("uname", FAKE_UNAME.format(kernel="6.8.0-85-generic"))
    msg = _refusal(target, "preflight", {"preflight_check_driver": True})
    assert "Secure Boot is enabled (SecureBoot enabled)" in msg
    assert "mokutil --import" in msg and "linux-modules-nvidia-580-server-open-" in msg
    # the MOK advice can be followed before the first DKMS install (issue #21: MOK.der does not
    # exist until a key is made)
    assert "update-secureboot-policy --new-key" in msg and "MOK.der does not exist" in msg


def test_prebuilt_modules_pass_under_secure_boot(target: Target) -> None:
    kernel = "6.8.0-85-generic"
    target.fake("mokutil", FAKE_MOKUTIL.format(state="enabled"))
    target.fake("uname", FAKE_UNAME.format(kernel=kernel))
    pkg = f"linux-modules-nvidia-580-server-open-{kernel}"
    src = "http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 Packages"
    case = f'    {pkg}) echo " {pkg} | 6.8.0-85.85+1 | {src}";;'
    target.fake("apt-cache", FAKE_APT_CACHE.format(cases=case))
    r = target.run(
        "prebuilt", "preflight", {**_base_vars(target, target.tmp), "preflight_check_driver": True}
    )
    assert r.rc == 0, "\n".join(_failures(r))
    assert "Driver path: prebuilt (kernel 6.8.0-85-generic, Secure Boot on" in _stdout(r)


def test_auto_keeps_the_path_an_earlier_install_recorded(target: Target) -> None:
    """Prebuilt modules now listed, but DKMS is installed: no switch behind the user's back."""
    kernel = "6.8.0-85-generic"
    target.fake("uname", FAKE_UNAME.format(kernel=kernel))
    pkg = f"linux-modules-nvidia-580-server-open-{kernel}"
    target.fake("apt-cache", FAKE_APT_CACHE.format(cases=f'    {pkg}) echo " {pkg} | 1 | x";;'))
    record = '{"schema": "specbench.nvidia-driver/1", "path": "dkms"}'
    target.sh("mkdir -p /var/lib/specbench && cat > /var/lib/specbench/nvidia-driver.json", record)
    try:
        extra = {**_base_vars(target, target.tmp), "preflight_check_driver": True}
        r = target.run("recorded", "preflight", extra)
    finally:
        target.sh("rm -rf /var/lib/specbench")
    assert r.rc == 0, "\n".join(_failures(r))
    assert "Driver path: dkms (as recorded by an earlier install) (kernel 6.8.0-85-generic" in (
        _stdout(r)
    )


# ---- a local apt archive standing in for Ubuntu's, on 127.0.0.1 in the target -----------------

# Ubuntu's archive keeps only the newest build of a driver branch (noble's
# nvidia-graphics-drivers-580-server at 580.173.02 in -updates), and the prebuilt module package
# for a kernel depends on nvidia-kernel-common-580-server at its build; NVIDIA's CUDA repository
# keeps several builds, and nvidia-headless-580-open depends on nvidia-dkms-580-open (= its build)
# and so on down the set (issue #21's read of both archives' indices; the builds' revision
# suffixes here are illustrative). Dummies: control files only, no files, no maintainer scripts.
UBUNTU_BUILD = "580.173.02-0ubuntu0.24.04.1"
NVIDIA_BUILDS = ("580.95.05-0ubuntu1", "580.105.08-0ubuntu1")
ARCHIVE_KERNEL = "6.8.0-85-generic"
# Issue 29: the modules of an older kernel stay in the archive, built against an older build
# (Depends: nvidia-kernel-common-580-server (= that build)), and so does that build; the newest
# userspace is newer, so on that kernel the newest userspace and its module do not resolve.
UBUNTU_OLD_BUILD = "580.126.09-0ubuntu0.24.04.2"
OLD_KERNEL = "6.8.0-79-generic"


def _ubuntu_side(v: str) -> list[dict[str, str]]:
    return [
        {"Package": "nvidia-kernel-common-580-server", "Version": v},
        {"Package": "libnvidia-compute-580-server", "Version": v},
        {"Package": "nvidia-headless-no-dkms-580-server-open", "Version": v,
         "Depends": f"nvidia-kernel-common-580-server (= {v}),"
                    f" libnvidia-compute-580-server (= {v})"},
        {"Package": "nvidia-utils-580-server", "Version": v,
         "Depends": f"libnvidia-compute-580-server (= {v})"},
    ]  # fmt: skip


def _nvidia_side(v: str) -> list[dict[str, str]]:
    return [
        {
            "Package": "nvidia-headless-580-open",
            "Version": v,
            "Depends": f"nvidia-dkms-580-open (= {v}), libnvidia-compute-580 (= {v})",
        },
        {"Package": "nvidia-dkms-580-open", "Version": v,
         "Depends": f"nvidia-kernel-common-580 (= {v})"},
        {"Package": "nvidia-kernel-common-580", "Version": v},
        {"Package": "libnvidia-compute-580", "Version": v},
        {"Package": "nvidia-utils-580", "Version": v, "Depends": f"libnvidia-compute-580 (= {v})"},
    ]  # fmt: skip


ARCHIVE_PACKAGES: list[dict[str, str]] = [
    {
        "Package": f"linux-modules-nvidia-580-server-open-{ARCHIVE_KERNEL}",
        "Version": "6.8.0-85.85+1",
        # one build: linux-restricted-modules' (<= build-1), (>= build)
        "Depends": "nvidia-kernel-common-580-server (<= 580.173.02-1),"
        " nvidia-kernel-common-580-server (>= 580.173.02)",
    },
    # linux-restricted-modules' meta package of the kernel flavour ("Extra drivers for
    # nvidia-580-server-open for the generic flavour", packages.ubuntu.com/noble/
    # linux-modules-nvidia-580-server-open-generic; -generic-hwe-24.04 for the HWE kernel): it
    # depends on the modules of the flavour's current kernel, so it follows kernel updates
    {
        "Package": "linux-modules-nvidia-580-server-open-generic",
        "Version": "6.8.0-85.85+1",
        "Depends": f"linux-modules-nvidia-580-server-open-{ARCHIVE_KERNEL} (= 6.8.0-85.85+1)",
    },
    {
        "Package": f"linux-modules-nvidia-580-server-open-{OLD_KERNEL}",
        "Version": "6.8.0-79.79+1",
        "Depends": f"nvidia-kernel-common-580-server (= {UBUNTU_OLD_BUILD})",
    },
    *(p for v in (UBUNTU_BUILD, UBUNTU_OLD_BUILD) for p in _ubuntu_side(v)),
    *(p for v in NVIDIA_BUILDS for p in _nvidia_side(v)),
]
ARCHIVE_DIR = "/srv/sbans-archive"
ARCHIVE_PORT = "18080"
ARCHIVE_SOURCE = "/etc/apt/sources.list.d/sbans-archive.sources"
# Builds the dummies with dpkg-deb, writes Packages and a Release listing its hash (a flat
# repository, trusted=yes), then serves the folder on 127.0.0.1.
BUILD_ARCHIVE_PY = """
import hashlib, json, os, subprocess, sys
root, port, packages = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
os.makedirs(root, exist_ok=True)
stanzas = []
for p in packages:
    fields = {**p, "Architecture": "all", "Maintainer": "specbench tests <t@localhost>",
              "Description": "specbench test dummy"}
    control = "".join(f"{k}: {v}\\n" for k, v in fields.items())
    src = f"/tmp/sbans-pkg/{p['Package']}"
    os.makedirs(f"{src}/DEBIAN", exist_ok=True)
    with open(f"{src}/DEBIAN/control", "w") as f:
        f.write(control)
    deb = f"{p['Package']}_{p['Version']}_all.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "--build", src, f"{root}/{deb}"], check=True,
                   capture_output=True)
    data = open(f"{root}/{deb}", "rb").read()
    stanzas.append(control + f"Filename: ./{deb}\\nSize: {len(data)}\\n"
                   f"SHA256: {hashlib.sha256(data).hexdigest()}\\n")
index = "\\n".join(stanzas).encode()
open(f"{root}/Packages", "wb").write(index)
open(f"{root}/Release", "w").write(
    "Origin: sbans\\nSuite: ./\\nSHA256:\\n"
    f" {hashlib.sha256(index).hexdigest()} {len(index)} Packages\\n")
with open("/etc/apt/sources.list.d/sbans-archive.sources", "w") as f:
    f.write(f"Types: deb\\nURIs: http://127.0.0.1:{port}/\\nSuites: ./\\nTrusted: yes\\n")
"""


@pytest.fixture
def local_archive(target: Target) -> Iterator[Target]:
    """The archive above served on 127.0.0.1 in the target, the target's lists emptied."""
    port = ARCHIVE_PORT
    assert target.sh("cat > /tmp/sbans-archive.py", BUILD_ARCHIVE_PY).returncode == 0
    r = target.sh(
        f"python3 /tmp/sbans-archive.py {ARCHIVE_DIR} {port}", json.dumps(ARCHIVE_PACKAGES)
    )
    assert r.returncode == 0, r.stderr
    _docker("exec", "-d", target.name, "python3", "-m", "http.server", "--bind", "127.0.0.1",
            "--directory", ARCHIVE_DIR, port)  # fmt: skip
    target.sh("rm -rf /var/lib/apt/lists/*")
    try:
        yield target
    finally:
        target.sh(
            f"rm -rf {ARCHIVE_DIR} {ARCHIVE_SOURCE} /tmp/sbans-pkg /tmp/sbans-archive.py"
            " /etc/apt/preferences.d/specbench-nvidia-driver; "
            "for c in /proc/[0-9]*/cmdline; do grep -qs '[h]ttp.server' $c || continue; "
            "p=${c#/proc/}; kill ${p%/cmdline}; done"
        )


def _said(r: Any, task: str = "Say which driver install path was chosen.") -> str:
    """The messages of a debug task, unwrapped."""
    return "\n".join(
        e["event_data"]["res"].get("msg", "")
        for e in r.events
        if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == task
    )


def test_driver_stage_on_a_ubuntu_like_archive(local_archive: Target) -> None:
    """Empty lists at the start; the pin is the branch, an exact build is the user's choice.

    1. Default: the prebuilt modules are found only after an `apt-get update` (before it, auto
       picked DKMS and Secure Boot refused it); the userspace is held at the build the running
       kernel's module was built against, here the newest, which passes the pin check.
    2. An exact build other than the one the running kernel's prebuilt module was built against
       is refused by preflight, saying why and what to do.
    3. DKMS from NVIDIA's side with an exact build: the preferences file holds the whole set, so
       apt resolves the exact-version dependencies to that build (without it, it cannot).
    """
    t = local_archive
    t.fake("uname", FAKE_UNAME.format(kernel=ARCHIVE_KERNEL))
    t.fake("mokutil", FAKE_MOKUTIL.format(state="enabled"))
    extra = {
        **_base_vars(t, t.tmp),
        "preflight_check_driver": True,
        "nvidia_driver_manage": True,
        "nvidia_driver_os": "Ubuntu",
    }
    r = t.run("archive", "preflight,prerequisites", extra)
    assert f"Driver path: prebuilt (kernel {ARCHIVE_KERNEL}, Secure Boot on" in _stdout(r)
    assert r.rc == 0, "\n".join(_failures(r))
    assert "userspace build 580.173.02, the one linux-modules-nvidia-580-server-open-" in _said(r)
    prefs = "/etc/apt/preferences.d/specbench-nvidia-driver"
    assert "Pin: version 580.173.02-*" in t.sh(f"cat {prefs}").stdout
    # apt itself resolves the prebuilt set the archive serves (nothing is installed)
    sim = t.sh(
        "apt-get install --simulate -q"
        f" linux-modules-nvidia-580-server-open-{ARCHIVE_KERNEL}"
        " nvidia-headless-no-dkms-580-server-open"
    )
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert f"Inst nvidia-kernel-common-580-server ({UBUNTU_BUILD}" in sim.stdout

    msg = _refusal_tags(t, "preflight,prerequisites", "",
                        {**extra, "nvidia_driver_version": "580.95.05"})  # fmt: skip
    assert msg.startswith("Check that the prebuilt modules' driver build is new enough"), msg
    assert "were built against driver 580.173.02" in msg
    assert "nvidia_driver_version is 580.95.05. Unset nvidia_driver_version" in msg
    assert "nvidia_driver_install_path=dkms" in msg and "Nothing has been installed yet" in msg

    t.fake("mokutil", FAKE_MOKUTIL.format(state="disabled"))
    old = NVIDIA_BUILDS[0]
    dkms = {**extra, "nvidia_driver_install_path": "dkms", "nvidia_driver_version": "580.95.05"}
    r = t.run("archive-dkms", "preflight,prerequisites", dkms)
    assert r.rc == 0, "\n".join(_failures(r))
    assert "Pin: version 580.95.05-*" in t.sh(f"cat {prefs}").stdout
    sim = t.sh("apt-get install --simulate -q nvidia-headless-580-open nvidia-utils-580")
    assert sim.returncode == 0, sim.stdout + sim.stderr
    inst = [line for line in sim.stdout.splitlines() if line.startswith("Inst ")]
    assert len(inst) == 5 and all(f"({old} " in line for line in inst), inst
    # what the old top-level-only pin met: the dependencies resolve to the newest build
    t.sh(f"rm -f {prefs}")
    sim = t.sh(
        f"apt-get install --simulate -q nvidia-headless-580-open={old} nvidia-utils-580={old}"
    )
    assert sim.returncode != 0, sim.stdout
    assert f"Depends: nvidia-dkms-580-open (= {old})" in sim.stdout + sim.stderr


def test_prebuilt_userspace_is_the_build_of_an_older_kernels_module(
    local_archive: Target,
) -> None:
    """Issue 29: on a kernel older than the newest, Canonical's module package depends on an
    older nvidia-kernel-common-580-server build than the newest userspace; taking the newest,
    apt stopped on unmet dependencies. Preflight reads the build from the module's Depends and
    the userspace is held at it; an older build the archive no longer serves is refused."""
    t = local_archive
    t.fake("uname", FAKE_UNAME.format(kernel=OLD_KERNEL))
    t.fake("mokutil", FAKE_MOKUTIL.format(state="enabled"))
    module = f"linux-modules-nvidia-580-server-open-{OLD_KERNEL}"
    userspace = f"{module} nvidia-headless-no-dkms-580-server-open nvidia-utils-580-server"
    extra = {
        **_base_vars(t, t.tmp),
        "preflight_check_driver": True,
        "nvidia_driver_manage": True,
        "nvidia_driver_os": "Ubuntu",
    }
    r = t.run("archive-old-kernel", "preflight,prerequisites", extra)
    assert r.rc == 0, "\n".join(_failures(r))
    assert f"Driver path: prebuilt (kernel {OLD_KERNEL}, Secure Boot on" in _stdout(r)
    assert f"userspace build 580.126.09, the one {module} 6.8.0-79.79+1 was built" in _said(r)
    prefs = "/etc/apt/preferences.d/specbench-nvidia-driver"
    assert "Pin: version 580.126.09-*" in t.sh(f"cat {prefs}").stdout
    sim = t.sh(f"apt-get install --simulate -q {userspace}")
    assert sim.returncode == 0, sim.stdout + sim.stderr
    inst = [line for line in sim.stdout.splitlines() if line.startswith("Inst ")]
    assert len(inst) == 5, inst
    assert all(f"({UBUNTU_OLD_BUILD} " in line for line in inst if module not in line), inst
    # the newest kernel's meta cannot go with it (the role warns instead of installing it)
    meta = t.sh("apt-get install --simulate -q linux-modules-nvidia-580-server-open-generic")
    assert meta.returncode != 0, meta.stdout
    # what the play met before: the newest userspace with the older kernel's module
    t.sh(f"rm -f {prefs}")
    sim = t.sh(f"apt-get install --simulate -q {userspace}")
    assert sim.returncode != 0, sim.stdout
    assert f"Depends: nvidia-kernel-common-580-server (= {UBUNTU_OLD_BUILD})" in sim.stdout

    # that older build gone from the archive (Ubuntu's -updates keeps only the newest): refused
    served = [p for p in ARCHIVE_PACKAGES if p not in _ubuntu_side(UBUNTU_OLD_BUILD)]
    r = t.sh(f"python3 /tmp/sbans-archive.py {ARCHIVE_DIR} {ARCHIVE_PORT}", json.dumps(served))
    assert r.returncode == 0, r.stderr
    msg = _refusal_tags(t, "preflight", "", extra)
    assert msg.startswith("Check that the prebuilt modules' driver build can be installed"), msg
    assert "were built against driver 580.126.09, which the archive no longer serves" in msg
    assert "(nvidia-kernel-common-580-server: 580.173.02)" in msg
    assert "sudo apt-get install linux-generic" in msg and "Nothing has been installed" in msg


def test_prebuilt_driver_module_follows_later_kernels(local_archive: Target) -> None:
    """Issue #21: the prebuilt path installed the module package of the running kernel only, so
    a kernel unattended-upgrades installed later booted without a module. The flavour's meta
    package (listed in the archive) is installed too, and not held. Check mode: apt resolves
    the dummy archive, nothing is installed."""
    t = local_archive
    t.fake("uname", FAKE_UNAME.format(kernel=ARCHIVE_KERNEL))
    t.fake("mokutil", FAKE_MOKUTIL.format(state="disabled"))
    extra = {
        **_base_vars(t, t.tmp),
        "preflight_check_driver": True,
        "nvidia_driver_manage": True,
        "nvidia_driver_os": "Ubuntu",
        "prerequisites_check_pins": False,
    }
    r = t.run("follow", "driver", extra, check=True)
    assert r.rc == 0, "\n".join(_failures(r)) or _stdout(r)[-3000:]
    task = "Ensure the driver module follows later kernels of this flavour (prebuilt path)."
    done = [e["event_data"] for e in r.events if e["event_data"].get("task") == task
            and e.get("event") in ("runner_on_ok", "runner_on_failed")]  # fmt: skip
    assert len(done) == 1 and done[0]["res"].get("changed"), done
    assert not done[0]["res"].get("failed"), done[0]["res"]
    assert "linux-modules-nvidia-580-server-open-generic" in json.dumps(done[0]["res"])
    ran = {e["event_data"].get("task") for e in r.events if e.get("event") == "runner_on_ok"}
    assert "Say that a later kernel would boot without the driver module (prebuilt path)." not in (
        ran
    )


# dpkg-query(1) answering for the driver packages given (name -> version), real for the rest
FAKE_DPKG_QUERY = """#!/bin/sh
[ "$1" = -W ] || exec /usr/bin/dpkg-query "$@"
case "$2" in
  *Status-Abbrev*) printf '{abbrev}';;
  *) shift 2; for p; do case "$p" in {names}) printf '%s\\t%s\\n' "$p" "{version}";; esac; done;;
esac
"""


def _fake_dpkg(t: Target, version: str, *names: str) -> None:
    abbrev = "".join(f"ii |{n}|{version}\\n" for n in names)
    t.fake("dpkg-query", FAKE_DPKG_QUERY.format(abbrev=abbrev, names="|".join(names),
                                                version=version))  # fmt: skip


def test_driver_already_on_the_host(target: Target) -> None:
    """Issue 29: a .run install is refused with `sudo nvidia-uninstall`; ubuntu-drivers' 570
    packages are refused with the purge command; a loaded non-server 580 that meets the floor is
    kept and recorded, not swapped for its -server twin (the driver stage in check mode installs
    nothing and checks the loaded build against it)."""
    t = target
    t.fake("uname", FAKE_UNAME.format(kernel=ARCHIVE_KERNEL))
    t.fake("mokutil", FAKE_MOKUTIL.format(state="disabled"))
    t.fake("nvidia-uninstall", "#!/bin/sh\nexit 0\n")
    extra = {
        **_base_vars(t, t.tmp),
        "preflight_check_driver": True,
        "preflight_refresh_lists": False,
    }
    msg = _refusal(t, "preflight", extra)
    assert "NVIDIA's .run installer put a driver on this host" in msg, msg
    assert "`sudo nvidia-uninstall`, reboot, then run the playbook again" in msg

    t.clear_fakes()
    t.fake("uname", FAKE_UNAME.format(kernel=ARCHIVE_KERNEL))
    t.fake("mokutil", FAKE_MOKUTIL.format(state="disabled"))
    ubuntu_drivers = (
        "nvidia-driver-570",
        "nvidia-utils-570",
        f"linux-modules-nvidia-570-{ARCHIVE_KERNEL}",
    )
    _fake_dpkg(t, "570.195.03-0ubuntu0.24.04.1", *ubuntu_drivers, "nvidia-container-toolkit")
    msg = _refusal(t, "preflight", extra)
    assert "Driver packages of another branch are installed (nvidia-driver-570," in msg, msg
    assert "nvidia-container-toolkit" not in msg
    assert (
        "`sudo apt-get purge --allow-change-held-packages nvidia-driver-570 nvidia-utils-570"
        f" linux-modules-nvidia-570-{ARCHIVE_KERNEL}`" in msg
    )

    _fake_dpkg(t, "580.95.05-0ubuntu1", "nvidia-driver-580-open", "nvidia-utils-580")
    t.fake("nvidia-smi", FAKE_SMI)
    kept = {**extra, "nvidia_driver_manage": True, "nvidia_driver_os": "Ubuntu",
            "prerequisites_check_pins": False}  # fmt: skip
    r = t.run("kept", "driver", kept, check=True)
    assert r.rc == 0, "\n".join(_failures(r)) or _stdout(r)[-3000:]
    said = _said(r, "Say that the driver already on the host is kept.")
    assert "Driver kept: 580.95.05 is loaded from nvidia-driver-580-open, nvidia-utils-580" in said
    assert "Driver path: kept" in _said(r)
    skipped = {
        e["event_data"].get("task") for e in r.events if e.get("event") == "runner_on_skipped"
    }
    assert "Ensure the pinned driver packages are installed." in skipped
    assert "Ensure the driver packages are held at the pin." in skipped
    ran = {e["event_data"].get("task") for e in r.events if e.get("event") == "runner_on_ok"}
    assert "Check that every GPU runs the driver build installed." in ran
    # an older one is not kept: refused before anything is installed, with what to do
    _fake_dpkg(t, "580.65.06-0ubuntu1", "nvidia-driver-580-open", "nvidia-utils-580")
    t.fake("nvidia-smi", FAKE_SMI.replace("580.95.05", "580.65.06"))
    msg = _refusal(t, "preflight", extra)
    assert "A 580 driver this play did not install is on the host" in msg, msg
    assert "the loaded driver is 580.65.06, the oldest build accepted is 580.95.05" in msg, msg
    assert "sudo apt-get install --only-upgrade nvidia-driver-580-open nvidia-utils-580" in msg


def test_refuses_a_kernel_outside_the_dkms_range(target: Target) -> None:
    target.fake("uname", FAKE_UNAME.format(kernel="6.17.9-061709-generic"))
    target.fake("mokutil", FAKE_MOKUTIL.format(state="disabled"))
    msg = _refusal(target, "preflight", {"preflight_check_driver": True})
    assert "Kernel 6.17.9-061709-generic is outside the range" in msg
    assert "5.15 <=" in msg and "< 6.15" in msg and "linux-generic" in msg


def test_refuses_an_image_tag_the_registry_lacks(target: Target) -> None:
    target.fake("docker", FAKE_DOCKER)
    msg = _refusal(target, "preflight", {"preflight_check_images": True})
    assert "The registry does not have vllm/vllm-openai:v0.33.0: no such manifest" in msg
    assert "lmsysorg/sglang" not in msg.split("The run would")[0]


def test_refuses_an_apt_version_madison_does_not_list(target: Target) -> None:
    src = "https://download.docker.com/linux/debian bookworm/stable amd64 Packages"
    case = f'    docker-ce) echo " docker-ce | 5:28.5.0-1~debian.12~bookworm | {src}";;'
    target.fake("apt-cache", FAKE_APT_CACHE.format(cases=case))
    msg = _refusal(target, "prerequisites", {"docker_manage_packages": True})
    assert "apt-cache madison does not list these pinned versions" in msg
    assert "docker-ce=5:28.5.1-* (listed: 5:28.5.0-1~debian.12~bookworm)" in msg
    assert "containerd.io=1.7.28-* (listed: none" in msg


def test_lists_unresolved_pins_before_anything_changes(target: Target) -> None:
    """Issue 29: the shipped experiment's unresolved pins are named by preflight before anything
    changes, as what this first run resolves into the pins lock (no switch); with pins_frozen
    (a controller that must resolve nothing new) they are refused instead."""
    import yaml

    experiment = yaml.safe_load(
        (REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    experiment["models"]["target"]["revision"] = "0" * 40  # a pinned one is not listed
    extra = {**_base_vars(target, target.tmp), "preflight_check_unresolved": True,
             "experiment": experiment}  # fmt: skip
    r = target.run("pins-first", "preflight", extra)
    assert r.rc == 0, "\n".join(_failures(r))
    said = [
        e["event_data"]["res"].get("msg", "")
        for e in r.events
        if e.get("event") == "runner_on_ok"
        and e["event_data"].get("task")
        == "Say which pins this first run resolves (recorded in the pins lock)."
    ]
    assert len(said) == 1, _stdout(r)[-3000:]
    msg = said[0]
    assert "vllm/vllm-openai:v0.33.0 (digest)" in msg
    assert "specbench/sglang:0.5.19-66da4a94e4dc (image ID)" in msg
    assert "lmsysorg/sglang:v0.5.19 (base digest)" in msg
    assert "z-lab/Qwen3.8-27B-DFlash2 (revision)" in msg and "btbtyler09" not in msg
    assert f"recorded in {target.tmp / 'pins.lock.yaml'} on the controller" in msg
    msg = _refusal(target, "preflight", {**extra, "pins_frozen": True})
    assert "leave 5 pin(s) unresolved for fresh" in msg, msg
    assert "Nothing has been changed on the host yet" in msg


def test_refuses_too_little_disk(target: Target) -> None:
    msg = _refusal(target, "preflight", {"preflight_min_free_disk_gb": 1000000})
    assert "GiB free on the filesystem of / (Docker's data root /var/lib/docker" in msg
    assert "1000000 GiB are needed: 1000000 GiB kept free + 3 image(s) to pull or build" in msg


FAKE_DOCKER_PRESENT = """#!/bin/sh
case "$1 $2" in
  "info --format") echo "{root}";;
  "image inspect") echo "sha256:{id}";;
  *) exit 1;;
esac
"""
# df(1) that puts one folder on a filesystem of its own with 1 MiB free
FAKE_DF = """#!/bin/sh
for last; do :; done
case "$last" in
  {root}*) echo "Filesystem 1024-blocks Used Available Capacity Mounted on"
           echo "/dev/sbans 1048576 1047552 1024 100% {root}";;
  *) exec /usr/bin/df "$@";;
esac
"""


def test_disk_check_counts_only_what_is_still_to_come(target: Target) -> None:
    """Issue #21: the free-disk check ran in full on every run, so the mandatory second run was
    refused once images and models took the space; Docker's data root was never looked at.

    Sizes are chosen from the container's real free space: a fresh host's images and models do
    not fit, the headroom alone does."""
    import yaml

    experiment = yaml.safe_load(
        (REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    free_kb = int(target.sh("df -P -k / | tail -n 1").stdout.split()[3])
    extra = {
        "preflight_min_free_disk_gb": 1,
        "preflight_image_disk_gb": free_kb // 1048576 // 2 + 1,
        "preflight_model_disk_gb": 1,
    }
    msg = _refusal(target, "preflight", extra)
    assert "GiB free on the filesystem of / (Docker's data root /var/lib/docker, the models" in msg
    assert "3 image(s) to pull or build" in msg
    assert "vllm/vllm-openai:v0.33.0, lmsysorg/sglang:v0.5.19, specbench/sglang:" in msg
    assert "2 model(s) to download x 1 GiB (btbtyler09/Qwen3.8-27B-GPTQ-4bit, z-lab/" in msg

    # a second run: every image and model on the host, the same disk: only the headroom counts
    root = "/srv/sbans-docker-root"
    target.fake("docker", FAKE_DOCKER_PRESENT.format(root=root, id="c" * 64))
    models = "/opt/specbench/models"
    for m in experiment["models"].values():
        folder = f"{models}/{Path(m['path']).name}"
        target.sh(f"mkdir -p {folder} && echo {m['revision']} > {folder}/.specbench-revision")
    target.sh(f"mkdir -p {root}")
    try:
        r = target.run("disk-present", "preflight", {**_base_vars(target, target.tmp), **extra})
        assert r.rc == 0, "\n".join(_failures(r))
        said = [
            e["event_data"]["res"].get("msg", "")
            for e in r.events
            if e.get("event") == "runner_on_ok"
            and e["event_data"].get("task") == "Say what the disk check counted."
        ]
        assert len(said) == 1 and "needs 1 (1 GiB kept free);" in said[0], said
        # Docker's data root on a filesystem of its own, too small even for the headroom
        target.fake("df", FAKE_DF.format(root=root))
        msg = _refusal(target, "preflight", extra)
        assert f"Only 0.0 GiB free on the filesystem of {root} (Docker's data root {root});" in msg
        assert "the models folder" not in msg
    finally:
        target.sh(f"rm -rf {models} {root}")


# Ubuntu's default layout: / on ubuntu-vg/ubuntu-lv, half the volume group unallocated. df(1)
# puts the folder on that volume (1 MiB free, 2 GiB once lvextend ran), findmnt and lvs name it.
LV = "/dev/mapper/ubuntu--vg-ubuntu--lv"
FAKE_DF_LVM = """#!/bin/sh
for last; do :; done
case "$last" in
  {root}*) avail=1024; [ -e /tmp/sbans-lvextended ] && avail=2097152
           echo "Filesystem 1024-blocks Used Available Capacity Mounted on"
           echo "{lv} 1048576 1047552 $avail 100% {root}";;
  *) exec /usr/bin/df "$@";;
esac
"""
FAKE_FINDMNT = """#!/bin/sh
for last; do :; done
case "$last" in {root}) echo "{lv}";; *) exec /usr/bin/findmnt "$@";; esac
"""
FAKE_LVS = """#!/bin/sh
echo "$*" >> /tmp/sbans-lvs.log
echo "  100.00g"
"""
FAKE_LVEXTEND = """#!/bin/sh
echo "$*" >> /tmp/sbans-lvextend.log
touch /tmp/sbans-lvextended
"""


def test_disk_check_on_lvm_offers_lvextend(target: Target) -> None:
    """Issue 29: Docker's data root on an LVM volume whose group has free extents: the refusal
    gives `lvextend -r -l +100%FREE <lv>`; with -e preflight_extend_lvm=true preflight runs it
    and measures again."""
    root = "/srv/sbans-lvm"
    target.fake("docker", FAKE_DOCKER_PRESENT.format(root=root, id="c" * 64))
    target.fake("df", FAKE_DF_LVM.format(root=root, lv=LV))
    target.fake("findmnt", FAKE_FINDMNT.format(root=root, lv=LV))
    target.fake("lvs", FAKE_LVS)
    target.fake("lvextend", FAKE_LVEXTEND)
    target.sh(f"mkdir -p {root}")
    try:
        msg = _refusal(target, "preflight", {})
        assert f"Only 0.0 GiB free on the filesystem of {root} (Docker's data root {root})" in msg
        assert f"It is the LVM logical volume {LV}, whose volume group has 100.0 GiB" in msg, msg
        assert f"`sudo lvextend -r -l +100%FREE {LV}` grows it" in msg
        assert "-e preflight_extend_lvm=true" in msg
        assert (
            target.sh("cat /tmp/sbans-lvs.log").stdout
            == f"--noheadings --units g -o vg_free {LV}\n"
        )
        assert target.sh("test -e /tmp/sbans-lvextend.log").returncode != 0
        extra = {**_base_vars(target, target.tmp), "preflight_extend_lvm": True}
        r = target.run("lvextend", "preflight", extra)
        assert r.rc == 0, "\n".join(_failures(r))
        assert target.sh("cat /tmp/sbans-lvextend.log").stdout == f"-r -l +100%FREE {LV}\n"
        assert f"{root} 2.0 GiB free, needs 1" in _said(r, "Say what the disk check counted.")
    finally:
        target.sh(f"rm -rf {root} /tmp/sbans-lv*")


def test_refuses_fewer_than_two_gpus_on_the_pci_bus(target: Target) -> None:
    target.fake("lspci", FAKE_LSPCI.format(lines=LSPCI_3090.format(slot="01:00.0")))
    msg = _refusal(target, "preflight", {"preflight_require_gpus": True})
    assert "Found 1 GPU(s) with PCI id 10de:2204, expected 2" in msg


def test_refuses_fewer_than_two_gpus_in_nvidia_smi(target: Target) -> None:
    lines = "\n".join(LSPCI_3090.format(slot=s) for s in ("01:00.0", "02:00.0"))
    target.fake("lspci", FAKE_LSPCI.format(lines=lines))
    target.fake("nvidia-smi", FAKE_SMI)
    msg = _refusal(target, "preflight", {"preflight_require_gpus": True})
    assert "nvidia-smi reports" in msg and "expected 2 x" in msg


# ---- pins that can be resolved, and the benchmark's hold on upgrades --------------------------

# Stands in for the bundle's python running fetch_model.py: "resolves" a ref to sha1(repo id);
# a dataset's file (--repo-type dataset) "hashes" to sha256(repo@revision:file).
FAKE_VENV_PYTHON = """#!/bin/sh
echo "$@" >> /tmp/sbans-fetch.log
repo=""; rev=""; ref=""; kind=model; file=""; url=""; sha=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repo-id) repo="$2"; shift;; --revision) rev="$2"; shift;; --resolve-ref) ref="$2"; shift;;
    --repo-type) kind="$2"; shift;; --file) file="$2"; shift;;
    --url) url="$2"; shift;; --sha256) sha="$2"; shift;;
  esac
  shift
done
if [ -n "$url" ]; then
  # as fetch_model.py --url answers: the file's sha256 (the pinned one, as served)
  [ "$sha" != unresolved ] || sha=$(printf %s "$url" | sha256sum | cut -c1-64)
  printf '{"changed": true, "url": "%s", "file": "%s", "sha256": "%s"}\\n' \\
    "$url" "${url##*/}" "$sha"
  exit 0
fi
if [ "$rev" = unresolved ]; then
  [ -n "$ref" ] || { echo "unresolved without --resolve-ref" >&2; exit 1; }
  rev=$(printf %s "$repo@$ref" | sha1sum | cut -c1-40)
fi
if [ "$kind" = dataset ]; then
  sha=$(printf %s "$repo@$rev:$file" | sha256sum | cut -c1-64)
  printf '{"changed": true, "revision": "%s", "file": "%s", "sha256": "%s"}\\n' \\
    "$rev" "$file" "$sha"
  exit 0
fi
echo "{\\"changed\\": true, \\"revision\\": \\"$rev\\", \\"files\\": 1, \\"verified\\": true}"
"""
FAKE_SPECBENCH = """#!/bin/sh
if grep -qs 'Unattended-Upgrade "0"' /etc/apt/apt.conf.d/99specbench-hold; then
  echo held $(date +%s.%N) > /tmp/sbans-matrix-ran
else
  echo not-held $(date +%s.%N) > /tmp/sbans-matrix-ran
fi
exit {rc}
"""
FAKE_SNAP = """#!/bin/sh
echo "$*" >> /tmp/sbans-snap.log
"""
LOCAL_ID = "sha256:" + "b" * 64
FAKE_DOCKER_INSPECT = f"""#!/bin/sh
if [ "$1" = image ] && [ "$2" = inspect ]; then echo "{LOCAL_ID}"; exit 0; fi
exit 1
"""


def _models_vars(t: Target, **extra: Any) -> dict[str, Any]:
    return {
        **_base_vars(t, t.tmp),
        "models_venv": "/opt/sbans-venv",
        "models_checkpoint_preflight": False,
        "models_poll_s": 1,
        **extra,
    }


def _fake_venv(t: Target, tool: str, script: str) -> None:
    r = t.sh(
        f"mkdir -p /opt/sbans-venv/bin && cat > /opt/sbans-venv/bin/{tool}"
        f" && chmod 0755 /opt/sbans-venv/bin/{tool}",
        script,
    )
    assert r.returncode == 0, r.stderr


def test_model_revisions_resolve_once_into_the_pins_lock(target: Target) -> None:
    """Issue 29: a first run (no switch) resolves each model's branch to a commit and records it
    in the pins lock on the controller; the next run downloads exactly that commit, resolving
    nothing, and a lock that no longer matches the experiment is refused with the fix. Issue 37:
    the experiment's prompt set is a pinned dataset, fetched and recorded the same way (its one
    file into models_dir/datasets/<name>, its commit and the file's sha256 in the lock)."""
    import hashlib

    import yaml

    from bench.schema import read_lock

    _fake_venv(target, "python", FAKE_VENV_PYTHON)
    target.sh("rm -f /tmp/sbans-fetch.log")
    with_dataset = yaml.safe_load(
        (REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    with_dataset["workload"]["prompt_set"] = {
        "name": "hub-prompts",
        "dataset": {"hf_id": "org/prompts", "revision": "unresolved", "file": "data/p.jsonl",
                    "sha256": "unresolved"},
    }  # fmt: skip
    accuracy = with_dataset["workload"]["accuracy"]
    task, url = accuracy["name"], accuracy["source"]["url"]
    accuracy["source"]["sha256"] = "unresolved"
    extra = {**_models_vars(target), "experiment": with_dataset}
    lock_file = target.tmp / "pins.lock.yaml"
    lock_file.unlink(missing_ok=True)
    r = target.run("models-resolve", "models", extra, skip="preflight,prerequisites,bundle,verify")
    assert r.rc == 0, "\n".join(_failures(r))
    lock = read_lock(lock_file, "qwen38-27b-gptq-2x3090")
    for key, hf_id in [("target", "btbtyler09/Qwen3.8-27B-GPTQ-4bit"),
                       ("dflash-draft", "z-lab/Qwen3.8-27B-DFlash2")]:  # fmt: skip
        want = hashlib.sha1(f"{hf_id}@main".encode()).hexdigest()
        assert (lock.models[key].hf_id, lock.models[key].revision) == (hf_id, want)
    assert "--resolve-ref main" in target.sh("cat /tmp/sbans-fetch.log").stdout
    rev = hashlib.sha1(b"org/prompts@main").hexdigest()
    sha = hashlib.sha256(f"org/prompts@{rev}:data/p.jsonl".encode()).hexdigest()
    entry = lock.datasets["hub-prompts"]
    assert (entry.hf_id, entry.file, entry.revision, entry.sha256) == (
        "org/prompts", "data/p.jsonl", rev, sha,
    )  # fmt: skip
    fetched = target.sh("grep -- '--repo-type dataset' /tmp/sbans-fetch.log").stdout
    assert "--dest /opt/specbench/models/datasets/hub-prompts" in fetched
    assert "--resolve-ref main" in fetched and "--sha256 unresolved" in fetched
    # the seed's accuracy task (issue 48; its sha256 left unresolved here, as the dataset's):
    # its file fetched by URL beside the weights, the sha256 it was served with recorded
    by_url = target.sh("grep -- '--url ' /tmp/sbans-fetch.log").stdout
    assert f"--url {url} --sha256 unresolved" in by_url
    assert f"--dest /opt/specbench/models/datasets/{task}" in by_url
    url_sha = hashlib.sha256(url.encode()).hexdigest()  # what the fake helper serves
    assert (lock.urls[task].url, lock.urls[task].sha256) == (url, url_sha)
    # the second run: pinned to the lock, nothing resolved, the lock unchanged
    target.sh("rm -f /tmp/sbans-fetch.log")
    before = lock_file.read_text()
    r = target.run("models-again", "models", extra, skip="preflight,prerequisites,bundle,verify")
    assert r.rc == 0, "\n".join(_failures(r))
    fetched = target.sh("cat /tmp/sbans-fetch.log").stdout
    assert "--resolve-ref" not in fetched and lock.models["target"].revision in fetched
    assert f"--revision {rev}" in fetched and f"--sha256 {sha}" in fetched  # the dataset's pins
    assert f"--url {url} --sha256 {url_sha}" in fetched  # the accuracy file's, from the lock
    assert lock_file.read_text() == before
    assert "Record the model and dataset commits in the pins lock." not in _changed_tasks(r)
    # the experiment now names another repository for the target: the lock entry is stale
    experiment = {**with_dataset, "models": {**with_dataset["models"]}}
    experiment["models"]["target"] = {**with_dataset["models"]["target"]}
    experiment["models"]["target"]["hf_id"] = "someone/Other-27B-GPTQ"
    msg = _refusal_tags(target, "models", "preflight,prerequisites,bundle,verify",
                        {**extra, "experiment": experiment})  # fmt: skip
    assert msg.startswith("Read the pins this host runs with"), msg
    assert "resolved for btbtyler09/Qwen3.8-27B-GPTQ-4bit" in msg
    assert "specbench pins forget <experiment> --model target" in msg


def _write_pins_lock(t: Target, image_ids: dict[str, str]) -> None:
    """The pins lock a first run left on the controller: each host's image ID of the local
    build (the fake docker's)."""
    from bench.schema import PinsLock, write_lock

    entry = {"image": "specbench/sglang:0.5.19-66da4a94e4dc", "image_ids": image_ids}
    lock = {"experiment": "qwen38-27b-gptq-2x3090", "images": {"sglang": entry}} if image_ids \
        else {"experiment": "qwen38-27b-gptq-2x3090"}  # fmt: skip
    write_lock(t.tmp / "pins.lock.yaml", PinsLock.model_validate(lock))


def _bench_vars(t: Target, lock_ids: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    _write_pins_lock(t, {"fresh": LOCAL_ID} if lock_ids is None else lock_ids)
    return {
        **_base_vars(t, t.tmp),
        "benchmark_venv": "/opt/sbans-venv",
        "benchmark_run_id": "fresh",
        # --tags bench also runs the fleet summary play: keep its FLEET.md out of the repository
        "report_controller_dir": str(t.tmp / "reports"),
        "benchmark_poll_s": 1,
        # unattended-upgrade-shutdown runs all the time: a wait that mistakes it for an upgrade
        # fails here after 30 s instead of the real 30 min
        "benchmark_upgrade_wait_s": 30,
        "benchmark_upgrade_poll_s": 2,
        **extra,
    }


BENCH_SKIP = "preflight,prerequisites,bundle,images,models,verify"


@pytest.mark.parametrize("matrix_rc", [0, 1])
def test_benchmark_holds_upgrades_for_the_run_and_releases_them(
    target: Target, matrix_rc: int
) -> None:
    target.sh("rm -f /tmp/sbans-matrix-ran /tmp/sbans-snap.log /tmp/sbans-uu-end")
    _fake_venv(target, "specbench", FAKE_SPECBENCH.format(rc=matrix_rc))
    target.fake("snap", FAKE_SNAP)
    target.fake("docker", FAKE_DOCKER_INSPECT)
    assert target.sh("grep -qs '[w]ait-for-signal' /proc/[0-9]*/cmdline").returncode == 0
    # an unattended upgrade under way when the run starts: the matrix waits for it, and only it
    _docker("exec", "-d", target.name, UU_RUN, "6")
    r = target.run("bench", "bench", _bench_vars(target), skip=BENCH_SKIP)
    assert (r.rc == 0) == (matrix_rc == 0), "\n".join(_failures(r))
    ran = target.sh("cat /tmp/sbans-matrix-ran").stdout.split()
    assert ran[0] == "held"
    assert float(ran[1]) > float(target.sh("cat /tmp/sbans-uu-end").stdout), "did not wait"
    # released after the run, also when the matrix failed
    assert target.sh("test -e /etc/apt/apt.conf.d/99specbench-hold").returncode != 0
    snap = target.sh("cat /tmp/sbans-snap.log").stdout.splitlines()
    assert snap == ["refresh --hold=49h", "refresh --unhold"]


def test_benchmark_refuses_while_another_matrix_holds_the_host(target: Target) -> None:
    """One matrix per host (issue #21): a second one, from another controller or a resume while
    the first still runs, stops before it touches the upgrade hold or the GPUs."""
    target.sh("rm -f /tmp/sbans-matrix-ran")
    _fake_venv(target, "specbench", FAKE_SPECBENCH.format(rc=0))
    target.fake("docker", FAKE_DOCKER_INSPECT)
    lock = "/opt/specbench/reports/.matrix.lock"
    target.sh("mkdir -p /opt/specbench/reports")
    # --close: the lock is flock's own, so killing flock below frees it (without, the sleep
    # kept it and the next test's matrix was refused)
    _docker("exec", "-d", target.name, "flock", "--close", lock, "sleep", "120")
    try:
        msg = _refusal_tags(target, "bench", BENCH_SKIP, _bench_vars(target))
    finally:
        target.sh(
            "for c in /proc/[0-9]*/cmdline; do grep -qs '[m]atrix.lock' $c || continue; "
            "p=${c#/proc/}; kill ${p%/cmdline}; done"
        )
    assert msg.startswith("Stop when another matrix holds the host."), msg
    assert f"({lock} is locked)" in msg
    assert target.sh("test -e /tmp/sbans-matrix-ran").returncode != 0, "the matrix ran"
    assert target.sh("test -e /etc/apt/apt.conf.d/99specbench-hold").returncode != 0


# A matrix that runs until the test releases it: the test decides when it ends, after the
# event it waits for (the controller killed mid-poll, the host back), never a guessed moment.
FAKE_SPECBENCH_HELD = """#!/bin/sh
date +%s.%N > /tmp/sbans-matrix-started
while [ ! -e /tmp/sbans-matrix-release ]; do sleep 0.2; done
date +%s.%N > /tmp/sbans-matrix-ended
"""
MATRIX_FILES = "/tmp/sbans-matrix-started /tmp/sbans-matrix-ended /tmp/sbans-matrix-release"
#: the controller's line for an answered poll of the running matrix (tasks/poll.yml's label)
POLLED = re.compile(r"ok: \[fresh\] => \(item=matrix running for \d+:\d\d:\d\d\)")


def _release_matrix(t: Target) -> None:
    t.sh("touch /tmp/sbans-matrix-release")


def _until(what: str, done: Any, within_s: float = 240, poll_s: float = 0.5) -> None:
    """Wait for an event: ``done()`` true (a hang guard, not a timing bound)."""
    deadline = time.monotonic() + within_s
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(poll_s)


def test_hold_is_released_on_the_host_when_the_controller_is_lost(target: Target) -> None:
    """Issue #21: the controller (ansible-playbook and its connections) is killed while it polls
    the matrix; the matrix runs on, and when it ends the host itself releases the apt and snap
    holds (before, only the controller released them: they stayed for good)."""
    hold = "/etc/apt/apt.conf.d/99specbench-hold"
    target.sh(f"rm -f {MATRIX_FILES} /tmp/sbans-snap.log")
    _fake_venv(target, "specbench", FAKE_SPECBENCH_HELD)
    target.fake("snap", FAKE_SNAP)
    target.fake("docker", FAKE_DOCKER_INSPECT)
    proc = target.spawn("lost", "bench", _bench_vars(target, benchmark_run_id="lost"), BENCH_SKIP)
    try:

        def polled() -> bool:
            if proc.poll() is not None:
                out = (target.tmp / "spawn").glob("lost-*/stdout")
                pytest.fail("the playbook ended before it polled the matrix:\n"
                            + "".join(p.read_text()[-3000:] for p in out))  # fmt: skip
            return bool(POLLED.search(_spawn_out(target, "lost")))

        # the matrix runs, and the controller has shown a poll of it: it is mid-poll
        started = "test -e /tmp/sbans-matrix-started"
        _until(
            "the controller never polled the running matrix",
            lambda: polled() and target.sh(started).returncode == 0,
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the controller is gone, mid-poll
        proc.wait(timeout=30)
    assert target.sh("test -e /tmp/sbans-matrix-started").returncode == 0
    assert target.sh("test -e /tmp/sbans-matrix-ended").returncode != 0, "the matrix ended early"
    assert target.sh(f"test -e {hold}").returncode == 0, "no hold while the matrix runs"
    _release_matrix(target)  # now the matrix ends, with no controller left to release anything
    _until(
        "the matrix did not run on without the controller",
        lambda: target.sh("test -e /tmp/sbans-matrix-ended").returncode == 0,
        within_s=90,
    )
    _until(
        "the apt hold stayed on the host",
        lambda: target.sh(f"test -e {hold}").returncode != 0,
        within_s=90,
    )
    snap = target.sh("cat /tmp/sbans-snap.log").stdout.splitlines()
    assert snap == ["refresh --hold=49h", "refresh --unhold"], snap
    # and the host's lock is free again: the next run (a resume) is not refused
    lock = "/opt/specbench/reports/.matrix.lock"
    assert target.sh(f"flock --nonblock {lock} true").returncode == 0


@contextmanager
def _unreachable(t: Target) -> Iterator[None]:
    """The controller cannot reach `t` inside: the container is renamed, so community.docker's
    connection (`docker exec <name>`) fails as SSH does when the route is gone; Ansible calls the
    host UNREACHABLE ("Failed to create temporary directory"), and the host and its matrix run on.
    (`docker pause` gives the same error, but freezes the matrix too.)"""
    away = t.name + "-away"
    r = _docker("rename", t.name, away)
    assert r.returncode == 0, r.stderr
    try:
        yield
    finally:
        r = _docker("rename", away, t.name)
        assert r.returncode == 0, r.stderr


WAITING = "TASK [benchmark : Wait for the host to answer again (the matrix runs on"


def _drop_mid_poll(t: Target, run_id: str, lost_after_s: int, drop_s: float) -> tuple[int, str]:
    """The emulated run (process launcher) with a fake matrix that runs until released, polled
    every second; while it runs, the host is unreachable. With drop_s, until the controller has
    seen a poll go unanswered and is waiting for the host (an event in its output), and drop_s
    seconds more of that wait; then the host answers again and the matrix is released, so the
    polls resume and see it end. With drop_s 0, until the playbook ends (the matrix is left
    running: the caller releases it). Returns the playbook's exit status and output."""
    t.sh(f"rm -f {MATRIX_FILES} /tmp/sbans-snap.log")
    _fake_venv(t, "specbench", FAKE_SPECBENCH_HELD)
    t.fake("snap", FAKE_SNAP)
    extra = _bench_vars(
        t, benchmark_run_id=run_id, bench_backend="emulated", bench_launcher="process",
        benchmark_hold_upgrades=True, benchmark_lost_after_s=lost_after_s,
    )  # fmt: skip
    proc = t.spawn(run_id, "bench", extra, BENCH_SKIP)

    def running() -> bool:
        assert proc.poll() is None, (
            "the playbook ended before its poll:\n" + _spawn_out(t, run_id)[-3000:]
        )
        return True

    try:
        # Answered polls first: the controller is past the task that started the matrix (its
        # own execs, the temp folder's removal among them, run after the matrix has started; a
        # host lost there leaves the play with neither rescue nor always, and under load that
        # took longer than a fixed 2 s) and has shown a healthy poll of the running matrix.
        started = "test -e /tmp/sbans-matrix-started"
        _until("the matrix never started", lambda: running() and t.sh(started).returncode == 0)
        _until(
            "the poll never ran",
            lambda: running() and bool(POLLED.search(_spawn_out(t, run_id))),
        )
        with _unreachable(t):
            if drop_s:
                _until(
                    "the controller never waited for the host",
                    lambda: running() and WAITING in _spawn_out(t, run_id),
                )
                time.sleep(drop_s)  # the host stays away while the controller waits for it
            else:
                proc.wait(timeout=120)
        if drop_s:
            _release_matrix(t)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.returncode, _spawn_out(t, run_id)


def _spawn_out(t: Target, run_id: str) -> str:
    return "".join(p.read_text() for p in (t.tmp / "spawn").glob(f"{run_id}-*/stdout"))


def _fleet_row(t: Target, run_id: str) -> dict[str, Any]:
    path = t.tmp / "reports" / run_id / "fleet.json"
    printed = _spawn_out(t, run_id)[-4000:]
    assert path.exists(), f"no fleet summary; the playbook printed:\n{printed}"
    fleet = json.loads(path.read_text())
    (row,) = fleet["hosts"]
    return dict(row)


def test_matrix_poll_survives_a_dropped_connection(target: Target) -> None:
    """Issue #21: the host is unreachable while the matrix runs, from an unanswered poll until
    the controller has waited for it a while; the drop is shown (ansible-core's own poll retried
    it silently, -vvvv only), the poll resumes when the host answers again, the host ends ok
    with its benchmark done, and the hold is released."""
    rc, out = _drop_mid_poll(target, "drop", lost_after_s=60, drop_s=3)
    assert rc == 0, out[-4000:]
    assert out.count("UNREACHABLE!") == 1, out[-4000:]  # one drop: one unanswered poll shown
    # a healthy poll looks healthy (issue 29): no "FAILED - RETRYING" while the matrix runs
    assert "FAILED - RETRYING" not in out, out[-4000:]
    assert re.search(r"ok: \[fresh\] => \(item=matrix ended for \d+:\d\d:\d\d\)", out), out[-4000:]
    assert WAITING in out
    assert target.sh("test -e /tmp/sbans-matrix-ended").returncode == 0, "the poll did not wait"
    row = _fleet_row(target, "drop")
    assert row["status"] == "ok" and row["run"] == "drop", row
    assert "benchmark done" in row["why"], row
    assert target.sh("test -e /etc/apt/apt.conf.d/99specbench-hold").returncode != 0
    snap = target.sh("cat /tmp/sbans-snap.log").stdout.splitlines()
    assert snap == ["refresh --hold=1h", "refresh --unhold"], snap


def test_matrix_poll_gives_up_on_a_host_lost_past_the_bound(target: Target) -> None:
    """Unreachable for longer than benchmark_lost_after_s: the host fails, and FLEET.md says the
    connection was lost (never ok with 'no benchmark in this run'); the matrix runs on there and
    the host releases the hold when it ends. (ansible-core's own poll waited for the host until
    the async timeout, 30 min here, 48 h on a real run, holding the whole fleet.)"""
    try:
        rc, out = _drop_mid_poll(target, "drop-lost", lost_after_s=4, drop_s=0)
        assert rc != 0, out[-4000:]
        # the matrix is still held running: the controller gave up on a running matrix
        assert target.sh("test -e /tmp/sbans-matrix-ended").returncode != 0, "gave up after the end"
        row = _fleet_row(target, "drop-lost")
        assert row["status"] == "failed", row
        assert row["task"] == "Stop when the host stays unreachable.", row
        want = "connection lost: fresh did not answer the matrix's poll for "
        assert row["why"].startswith(want + "benchmark_lost_after_s=4 s"), row
        md = (target.tmp / "reports" / "drop-lost" / "FLEET.md").read_text()
        assert "| fresh | failed |" in md and "connection lost" in md, md
        _release_matrix(target)  # the matrix ends on the host, no controller watching
        _until(
            "the apt hold stayed on the host",
            lambda: target.sh("test -e /etc/apt/apt.conf.d/99specbench-hold").returncode != 0,
            within_s=90,
        )
        assert target.sh("test -e /tmp/sbans-matrix-ended").returncode == 0
        lock = "/opt/specbench/reports/.matrix.lock"
        assert target.sh(f"flock --nonblock {lock} true").returncode == 0
    finally:
        # the matrix runs on there: the next test of this target must not find its lock taken
        _release_matrix(target)
        _wait_for_matrix_end(target, 90)


def _wait_for_matrix_end(t: Target, within_s: float) -> None:
    """Until the host's matrix lock is free (a matrix that outlived its controller has ended)."""
    deadline = time.monotonic() + within_s
    lock = "/opt/specbench/reports/.matrix.lock"
    while t.sh(f"flock --nonblock {lock} true").returncode != 0 and time.monotonic() < deadline:
        time.sleep(1)


def test_benchmark_refuses_a_local_image_whose_id_is_not_the_pin(target: Target) -> None:
    import yaml

    target.sh("rm -f /tmp/sbans-matrix-ran")
    _fake_venv(target, "specbench", FAKE_SPECBENCH.format(rc=0))
    target.fake("docker", FAKE_DOCKER_INSPECT)
    experiment = yaml.safe_load(
        (REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    pinned = "sha256:" + "a" * 64
    experiment["images"]["sglang"]["digest"] = pinned  # the experiment's own pin, no lock entry
    extra = _bench_vars(target, lock_ids={}, experiment=experiment)
    msg = _refusal_tags(target, "bench", BENCH_SKIP, extra)
    image = experiment["images"]["sglang"]["image"]
    assert f"{image} is {LOCAL_ID}, pinned {pinned}" in msg
    assert "specbench pins forget" in msg and "--host fresh" in msg
    assert target.sh("test -e /tmp/sbans-matrix-ran").returncode != 0, "the matrix ran"
    # the same pin in the lock (this host's entry) is refused alike
    msg = _refusal_tags(target, "bench", BENCH_SKIP, _bench_vars(target, {"fresh": pinned}))
    assert f"{image} is {LOCAL_ID}, pinned {pinned}" in msg


FAKE_SPECBENCH_ARGV = """#!/bin/sh
echo "$@" > /tmp/sbans-matrix-argv
"""


def test_each_host_of_a_fleet_is_checked_against_its_own_built_image_id(
    target: Target, make_target: Callable[..., Target]
) -> None:
    """Issue #21/#29: every host's build of the patched image has its own ID, kept per host in
    the pins lock; each host's matrix gets the lock and its own name (--pins-host), and a host
    without its own entry is refused before the matrix."""
    from bench.schema import read_lock

    b = make_target()
    b_id = "sha256:" + "d" * 64
    for t, image_id in ((target, LOCAL_ID), (b, b_id)):
        t.sh("rm -f /tmp/sbans-matrix-argv")
        _fake_venv(t, "specbench", FAKE_SPECBENCH_ARGV)
        t.fake("docker", FAKE_DOCKER_INSPECT.replace(LOCAL_ID, image_id))
    hosts = {"a": target.inventory_host(), "b": b.inventory_host()}
    extra = _bench_vars(target, {"a": LOCAL_ID, "b": b_id}, benchmark_hold_upgrades=False)
    r = target.run("built-ids", "bench", extra, skip=BENCH_SKIP, hosts=hosts)
    assert r.rc == 0, "\n".join(_failures(r))
    for t, name, image_id in ((target, "a", LOCAL_ID), (b, "b", b_id)):
        argv = t.sh("cat /tmp/sbans-matrix-argv").stdout.split()
        assert argv[argv.index("--pins-host") + 1] == name, argv
        copied = argv[argv.index("--pins-lock") + 1]
        assert copied.startswith("/opt/specbench/reports/fresh/"), copied
        t.sh(f"cat {copied}")
        local = target.tmp / f"lock-{name}.yaml"
        local.write_text(t.sh(f"cat {copied}").stdout)
        assert (
            read_lock(local, "qwen38-27b-gptq-2x3090").images["sglang"].image_ids[name] == image_id
        )
    # without its own ID in the lock, b is refused before the matrix
    b.sh("rm -f /tmp/sbans-matrix-argv")
    extra = _bench_vars(target, {"a": LOCAL_ID}, benchmark_hold_upgrades=False)
    r = target.run("built-ids-shared", "bench", extra, skip=BENCH_SKIP, hosts=hosts)
    failures = _failures(r)
    assert len(failures) == 1 and "has no pinned image ID" in failures[0], failures
    assert b.sh("test -e /tmp/sbans-matrix-argv").returncode != 0, "the matrix ran on b"


def test_gpu_roles_run_in_check_mode_on_the_fresh_host(target: Target) -> None:
    """Driver, Docker and toolkit tasks rendered and run in --check (their packages are not
    reachable from here: installs fail and are ignored in check mode, as on a first --check)."""
    target.fake("uname", FAKE_UNAME.format(kernel="6.8.0-85-generic"))
    target.fake("mokutil", FAKE_MOKUTIL.format(state="disabled"))
    extra = {
        **_base_vars(target, target.tmp),
        "preflight_check_driver": True,
        "nvidia_driver_manage": True,
        "docker_manage_packages": True,
        "nvidia_container_toolkit_manage": True,
        "nvidia_driver_os": "Ubuntu",
        "nvidia_container_toolkit_os": "Ubuntu",
        "prerequisites_check_pins": False,
    }
    r = target.run("gpu-check", "driver,docker,toolkit", extra, check=True)
    assert r.rc == 0, "\n".join(_failures(r)) or _stdout(r)[-3000:]
    ran = {
        e["event_data"].get("task")
        for e in r.events
        if e.get("event") in ("runner_on_ok", "runner_on_failed")
    }
    for task in (
        "Ensure the pinned driver packages are installed.",
        "Ensure the record says which path and versions are installed.",
        "Ensure the pinned Docker packages are installed.",
        "Ensure the four toolkit packages are installed at the pinned version.",
    ):
        assert task in ran, sorted(t for t in ran if t)
    assert "Driver path: dkms (kernel 6.8.0-85-generic, Secure Boot off" in _stdout(r)
    # what check mode may ignore here: packages this container cannot reach, no systemd, no GPU
    allowed = (
        "No package matching",
        "One or more items failed",  # the holds of those packages
        'executable "systemctl"',
        "Could not find the requested service docker",
        # no GPU: nvidia-smi is absent (Ansible's generic "Error executing command." is allowed
        # for this one command only, never for any command)
        "Error executing command. (cmd: nvidia-smi ",
    )
    ignored = [ignored_failure(e["event_data"]) for e in r.events if is_ignored_failure(e)]
    outside = [i for i in ignored if not any(a in i for a in allowed)]
    assert ignored and outside == [], outside
