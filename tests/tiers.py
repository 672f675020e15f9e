"""The test tiers by folder, and how the parallel run groups them (tests/conftest.py)."""

from __future__ import annotations

#: Tests that share one Docker resource run in one pytest-xdist worker (``--dist loadgroup``),
#: one group per resource: the engine tier's image and its matrix run; the fresh-host Ansible
#: targets (their own containers, minutes of apt and lock waits); the fleet (three emulated
#: hosts, its own wheelhouse and containers); the rest of the e2e tier
#: (the images it builds, the emulated fleet and site runs). Every other test is spread over
#: the workers one by one.
XDIST_GROUPS = {"e2e": "docker-e2e", "infra": "docker-e2e", "engine": "engine"}
XDIST_FILE_GROUPS = {
    "test_ansible_fresh_host.py": "fresh-host",
    "test_ansible_fleet.py": "fleet",
    # its module fixture runs 87 CLI cases as fresh interpreters (~1-2 min of CPU): spread over
    # the workers one test at a time, each worker ran it again (CI of 2026-12-03: 3 times)
    "test_cli_errors.py": "cli-errors",
    # a fresh copy of the repository, its own venv, wheelhouse and target (~2 min); and a
    # registry on 127.0.0.1 with the images role's real path (~1.5 min): groups of their own,
    # so that they go to whichever worker is free instead of lengthening docker-e2e
    "test_readme_first_run.py": "readme",
    "test_images_registry.py": "registry",
    # issue 47: both start from the demo's run folders (tests/demo_seed.py, ~15 s of demo runs
    # made once per process): one worker makes them once instead of each worker again
    "test_invariants.py": "demo-seeds",
    "test_generative_artifacts.py": "demo-seeds",
    # The engine tier in two lanes (its own phase, two workers): a vLLM CPU server start is
    # ~30 s of Python imports in three processes one after another, about one core of two, and
    # the tier starts thirteen. The tiny matrix (six starts, every test of these two files reads
    # its one run) and the checks that read no run (the kernel dispatch under QEMU, the refused
    # synthetic acceptance, the refused DFlash2 draft: ENGINE_MATRIX_LANE; ~50 s) in one lane;
    # the categories, seed-method and GPTQ runs in the other. With those checks in the second
    # lane it ended 64 s after the first (quiet CI of 0d617d5: 392 s and 456 s), a core idle.
    "test_matrix_vllm_cpu.py": "engine-matrix",
    "test_vllm_cpu.py": "engine-matrix",
    "test_kernel_dispatch.py": "engine-matrix",
    "test_speculation_cpu_build.py": "engine-matrix",
}
#: Engine tests of a file in the "engine" lane that read none of its runs (only the image and
#: the tiny models): in the tiny matrix's lane, which is otherwise the shorter.
ENGINE_MATRIX_LANE = ("test_dflash2_draft_is_refused_on_the_cpu_build",)

#: The fresh-host tests grew to ~20 min of one worker, longer than the fleet: these run in a
#: second group (its own provisioned target, ~3 min more, in another worker). The later stages
#: (disk, GPUs, models, benchmark and its poll, images, check mode); the rest stay in the first.
FRESH_HOST_SECOND = (
    "test_refuses_too_little_disk",
    "test_disk_check_",
    "test_refuses_fewer_than_two_gpus_",
    "test_model_revisions_",
    "test_benchmark_",
    "test_hold_is_released_",
    "test_matrix_poll_",
    "test_each_host_of_a_fleet_",
    "test_gpu_roles_run_in_check_mode",
)

#: The order in which the parallel run hands out the groups (``--no-loadscope-reorder`` keeps
#: the collection order, which tests/conftest.py sorts by this): longest first. A worker takes
#: its next unit when two of its tests are left, so a long group that came late landed behind
#: another on one worker: in a fresh-machine CI run (2026-12-04) the fleet (741 s) and the rest
#: of e2e (381 s) ran one after the other on one worker for 1122 s, while the other two ended at
#: 650 s. The singly scheduled tests come after every group and fill the gaps.
GROUP_ORDER = (
    "fleet",
    "fresh-host-2",
    "fresh-host",
    "docker-e2e",
    "readme",
    "cli-errors",
    "registry",
    "demo-seeds",
    "engine-matrix",
    "engine",
)


def schedule_rank(nodeid: str) -> int:
    """Where a test's unit goes in the parallel run's queue (lower: earlier)."""
    group = xdist_group(nodeid)
    return GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)


def xdist_group(nodeid: str) -> str | None:
    """The xdist group of a test (None: scheduled on its own)."""
    path, _, name = nodeid.partition("::")
    file = path.rsplit("/", 1)[-1]
    group = XDIST_FILE_GROUPS.get(file) or XDIST_GROUPS.get(tier_folder(nodeid))
    if group == "fresh-host" and name.startswith(FRESH_HOST_SECOND):
        return "fresh-host-2"
    if group == "engine" and name.startswith(ENGINE_MATRIX_LANE):
        return "engine-matrix"
    return group


def tier_folder(nodeid: str) -> str:
    """``tests/infra/test_host.py::t`` -> ``infra``."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def tier_of(nodeid: str) -> str:
    """``tests/unit/test_x.py::t`` -> ``unit`` (tests/infra counts as e2e)."""
    tier = tier_folder(nodeid)
    return "e2e" if tier == "infra" else tier
