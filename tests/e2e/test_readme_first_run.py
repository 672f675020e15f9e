"""The README's first run, its own commands verbatim, against a fresh host: to a report.

The commands are read out of README.md's code block under "On real hardware" (so the README and
this test cannot drift) and run one by one in a fresh copy of the repository, as a new user
would: `make setup`, `cp ansible/inventory.example.yml inventory.yml`, `make provision
INVENTORY=inventory.yml`. The host is a fresh Debian minbase container that boots like stock
Ubuntu (tests/e2e/test_ansible_fresh_host.py's Target: unattended-upgrade-shutdown running, empty
apt lists), reached through community.docker's connection.

The one step a user does by hand, "point it at your GPU host", is done by writing inventory.yml.
What the test's inventory sets beyond a user's, each with the reason a user would not need it,
is STAND_INS below: nothing in it is a switch on the README's path (no
benchmark_allow_unpinned, no --allow-unpinned, no *_allow_unresolved), which
test_the_first_run_is_three_commands_with_no_switch checks. The GPU backend is emulated (no GPU
here): the pins a real backend resolves on a first run (registry digests, the local build's
image ID, model commits) are covered stage by stage in test_ansible_fresh_host.py (models,
benchmark) and tests/unit/test_pins_lock.py.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_ansible_fleet import _wheelhouse
from test_ansible_fresh_host import BASE_IMAGE, REPO, Target

PREFIX = "sbreadme-"
WHEELS = "/opt/sbreadme-wheels"
SECTION = "## On real hardware"

#: What the test's inventory sets beyond what a user writes for a real GPU host, and why.
STAND_INS: dict[str, tuple[Any, str]] = {
    "ansible_connection": ("community.docker.docker", "the host is a container, not SSH"),
    "ansible_user": ("root", "the container's only user (a real host: a sudoer)"),
    "ansible_python_interpreter": ("/usr/bin/python3", "minbase has no interpreter discovery"),
    "bench_backend": ("emulated", "no GPU here: the engine emulator stands in for the engines"),
    "bench_launcher": ("process", "no Docker inside the container: the emulator as processes"),
    "bundle_pip_extra_args": (
        ["--no-index", "--find-links", WHEELS],
        "the container reaches no package index: the same pinned wheels, copied in",
    ),
    "verify_enabled": (False, "testinfra over the docker connection (fresh-host test's domain)"),
    "benchmark_only": (["vllm-dflash"], "CI time: one configuration of the seven"),
    "benchmark_iterations": (2, "CI time (a user runs the experiment's 5)"),
    "benchmark_warmup": (0, "CI time (a user runs the experiment's 2)"),
}
#: Switches that, set on the README's path, would hide the bug issue 29 was about.
HIDDEN_SWITCHES = (
    "benchmark_allow_unpinned",
    "allow-unpinned",
    "images_allow_unresolved",
    "models_allow_unresolved",
    "built_image_ids",
)


def readme_first_run() -> list[str]:
    """The commands of the first bash block under "On real hardware", comments stripped."""
    text = (REPO / "README.md").read_text()
    section = text.split(SECTION, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"no bash block under {SECTION!r}"
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    return [c for c in commands if c]


def test_the_first_run_is_three_commands_with_no_switch() -> None:
    assert readme_first_run() == [
        "make setup",
        "cp ansible/inventory.example.yml inventory.yml",
        "make provision INVENTORY=inventory.yml",
    ]
    stand_ins = " ".join(STAND_INS)
    for switch in HIDDEN_SWITCHES:
        assert switch not in stand_ins, switch
        assert not any(switch in c for c in readme_first_run()), switch


def _copy_of_the_repository(dest: Path) -> Path:
    """What a fresh clone has: the tracked files and the new ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _run(cmd: str, cwd: Path, log: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "VIRTUAL_ENV"))}
    started = time.monotonic()
    r = subprocess.run(
        shlex.split(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=1500
    )
    with log.open("a") as f:
        f.write(f"$ {cmd}  ({time.monotonic() - started:.0f} s, exit {r.returncode})\n")
        f.write(r.stdout[-20000:] + r.stderr[-5000:] + "\n")
    print(f"readme: {cmd}: {time.monotonic() - started:.0f} s")
    return r


@pytest.fixture(scope="module")
def first_run(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path]]:
    try:
        docker_client.images.get(BASE_IMAGE)
    except Exception as err:  # CI must fail here, not skip: the image is built by the suite
        pytest.fail(f"{BASE_IMAGE} missing ({err}); build it with docker/base/build.sh")
    tmp = tmp_path_factory.mktemp("readme")
    repo = _copy_of_the_repository(tmp / "repo")
    wheels = _wheelhouse(tmp / "wheels")
    target = Target(tmp / "target", prefix=PREFIX)
    log = tmp / "commands.log"
    try:
        r = subprocess.run(["docker", "cp", str(wheels), f"{target.name}:{WHEELS}"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert r.returncode == 0, r.stderr
        for cmd in readme_first_run():
            if cmd.startswith("make provision"):
                _point_the_inventory_at(repo / "inventory.yml", target)
            r = _run(cmd, repo, log)
            assert r.returncode == 0, f"{cmd} failed:\n{log.read_text()[-6000:]}"
        yield repo, log
    finally:
        target.remove()


def _point_the_inventory_at(inventory: Path, target: Target) -> None:
    """The user's edit of the copied example: one host, gpu1, at the fresh host; the example's
    own host vars kept (become, reboot policy), the stand-ins added."""
    example = yaml.safe_load(inventory.read_text())
    gpu1 = dict(example["all"]["children"]["gpu"]["hosts"]["gpu1"])
    gpu1["ansible_host"] = target.name
    gpu1.update({k: v for k, (v, _) in STAND_INS.items()})
    example["all"]["children"]["gpu"]["hosts"] = {"gpu1": gpu1}
    inventory.write_text(yaml.safe_dump(example))


def test_readme_first_run_reaches_a_report(first_run: tuple[Path, Path]) -> None:
    repo, log = first_run
    reports = sorted((repo / "reports").glob("*/gpu1/REPORT.md"))
    assert len(reports) == 1, f"no report:\n{log.read_text()[-6000:]}"
    report = reports[0].read_text()
    assert report.startswith("> **SIMULATED**")  # the emulated backend, said so
    assert "vLLM + DFlash" in report or "vllm-dflash" in report
    fleet = (reports[0].parents[1] / "FLEET.md").read_text()
    assert "1 of 1 host(s) ok." in fleet and "| gpu1 | ok |" in fleet
    assert (reports[0].parent / "artifacts" / "experiment.lock.json").is_file()


def test_readme_first_run_says_what_it_resolves(first_run: tuple[Path, Path]) -> None:
    """The emulated backend resolves no engine pin; the run still reads the pins lock and passes
    it to the matrix (an empty lock: nothing recorded, nothing refused)."""
    repo, log = first_run
    text = log.read_text()
    assert "TASK [pins : Read the pins this host runs with" in text
    assert not (repo / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.lock.yaml").exists()
    for switch in HIDDEN_SWITCHES:
        assert switch not in (repo / "inventory.yml").read_text(), switch


def test_readme_second_run_resumes_instead_of_measuring_again(
    first_run: tuple[Path, Path],
) -> None:
    """Issue 29: the same command again on the provisioned host does not start another matrix:
    the run is named by what it measures, so it resumes the finished run (payloads untouched)
    and re-renders its report."""
    repo, log = first_run
    (report,) = sorted((repo / "reports").glob("*/gpu1/REPORT.md"))
    folder = report.parent / "artifacts" / "payloads"
    payloads = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert payloads
    cmd = readme_first_run()[-1]
    r = _run(cmd, repo, log)
    assert r.returncode == 0, f"{cmd} failed:\n{log.read_text()[-6000:]}"
    assert "ran on gpu1 before: its finished configurations" in r.stdout
    assert "vllm-dflash: skipped" in r.stdout  # the matrix's outcome line: nothing measured
    assert sorted((repo / "reports").glob("*/gpu1/REPORT.md")) == [report]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == payloads
