"""A broken image build fails once: the first test errors with the build's log, the others are
skipped pointing at it, and the build is never run again (issue 20). Checked on a real pytest
session in a child process, with a build that fails and counts its calls."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = """
import pytest
from build_once import BuildOnce

BUILD = BuildOnce("the image build")


def broken_build():
    with open("calls.txt", "a") as f:
        f.write("build\\n")
    raise RuntimeError("build.sh failed (132):\\nIllegal instruction (core dumped)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    BUILD.get(item.nodeid, broken_build)


@pytest.fixture(scope="session")
def image():
    return BUILD.value


@pytest.fixture(scope="session", autouse=True)
def report_calls():
    yield
    print(f"\\nBUILD CALLS {len(CALLS)}")
"""

TESTS_FILE = """
def test_a(image): pass
def test_b(image): pass
def test_c(image): pass
"""


def test_a_broken_build_errors_once_and_skips_the_rest(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_tier.py").write_text(textwrap.dedent(TESTS_FILE))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-s", str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1, out
    assert (tmp_path / "calls.txt").read_text() == "build\n"  # built once, never again
    assert out.count("Illegal instruction") == 1, out  # the log printed once
    assert "1 error" in out and "2 skipped" in out, out
    assert "the image build failed, see test_tier.py::test_a" in out, out


def test_tier_of_nodeids() -> None:
    from tiers import tier_of

    assert tier_of("tests/unit/test_x.py::test_a") == "unit"
    assert tier_of("tests/infra/test_host.py::test_b[x]") == "e2e"
    assert tier_of("tests/engine/test_vllm_cpu.py::t@engine") == "engine"
    assert tier_of("test_tier.py::test_a") == ""


def test_xdist_groups() -> None:
    from tiers import xdist_group

    assert xdist_group("tests/e2e/test_ansible_fresh_host.py::test_x[a]") == "fresh-host"
    fresh = "tests/e2e/test_ansible_fresh_host.py::"
    assert xdist_group(fresh + "test_matrix_poll_survives_a_dropped_connection") == "fresh-host-2"
    assert xdist_group(fresh + "test_benchmark_holds_upgrades_x[0]") == "fresh-host-2"
    assert xdist_group(fresh + "test_driver_stage_on_a_ubuntu_like_archive") == "fresh-host"
    assert xdist_group("tests/e2e/test_ansible_site.py::test_y") == "docker-e2e"
    assert xdist_group("tests/e2e/test_ansible_fleet.py::test_f") == "fleet"
    assert xdist_group("tests/infra/test_host.py::test_z") == "docker-e2e"
    # the engine tier's two lanes: the tiny matrix's readers, and the rest
    assert xdist_group("tests/engine/test_vllm_cpu.py::t") == "engine-matrix"
    assert xdist_group("tests/engine/test_matrix_vllm_cpu.py::t[k1]") == "engine-matrix"
    assert xdist_group("tests/engine/test_categories_vllm_cpu.py::t") == "engine"
    assert xdist_group("tests/engine/test_gptq_vllm_cpu.py::t") == "engine"
    assert xdist_group("tests/engine/test_kernel_dispatch.py::t") == "engine-matrix"
    seed = "tests/engine/test_seed_methods_vllm_cpu.py::"
    assert xdist_group(seed + "test_dflash2_draft_is_refused_on_the_cpu_build") == "engine-matrix"
    assert xdist_group(seed + "test_seed_shape_serves_and_loads_the_method[mtp]") == "engine"
    assert xdist_group("tests/unit/test_stats.py::t") is None
    assert xdist_group("tests/integration/test_cli_errors.py::test_bad_input[x]") == "cli-errors"
    assert xdist_group("tests/unit/test_generative_artifacts.py::t") == "demo-seeds"
    assert xdist_group("tests/unit/test_invariants.py::t") == "demo-seeds"


def test_xdist_runs_a_group_in_one_worker(tmp_path: Path) -> None:
    """The parallel run's grouping really holds with the pinned pytest and pytest-xdist (pytest
    9.2 silently broke --dist loadgroup: every test of a group could land on any worker)."""
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n\ndef pytest_itemcollected(item):\n"
        "    item.add_marker(pytest.mark.xdist_group('g'))\n"
    )
    (tmp_path / "test_g.py").write_text(
        "import time\n\n" + "".join(f"def test_{i}():\n    time.sleep(0.2)\n\n" for i in range(4))
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-v", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, check=False,
    )  # fmt: skip
    workers = {line.split("]")[0] for line in done.stdout.splitlines() if "PASSED" in line}
    assert done.returncode == 0 and len(workers) == 1, done.stdout


def test_parallel_run_hands_out_the_longest_groups_first() -> None:
    """The fleet and the fresh-host groups lead the queue and every singly scheduled test follows
    them, and the Makefile keeps that order (xdist otherwise sorts the units by test count)."""
    from tiers import GROUP_ORDER, schedule_rank

    ids = [
        "tests/unit/test_stats.py::t",
        "tests/e2e/test_ansible_site.py::test_y",
        "tests/integration/test_cli_errors.py::test_bad_input[x]",
        "tests/e2e/test_ansible_fresh_host.py::test_driver_stage_on_a_ubuntu_like_archive",
        "tests/e2e/test_ansible_fresh_host.py::test_matrix_poll_survives_a_dropped_connection",
        "tests/e2e/test_ansible_fleet.py::test_f",
    ]
    ranked = sorted(ids, key=schedule_rank)
    assert [n.split("/")[-1].split("::")[0] for n in ranked] == [
        "test_ansible_fleet.py", "test_ansible_fresh_host.py", "test_ansible_fresh_host.py",
        "test_ansible_site.py", "test_cli_errors.py", "test_stats.py",
    ]  # fmt: skip
    assert ranked[1].endswith("dropped_connection")  # fresh-host-2 before fresh-host
    assert schedule_rank(ids[0]) == len(GROUP_ORDER)
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert "--dist loadgroup --no-loadscope-reorder" in makefile
