"""The engine image on a CPU without AVX-512 (issue 20): under QEMU's user-mode emulator with a
Haswell CPU model (AVX2, FMA, no AVX-512: QEMU 7.2's TCG has no AVX-512 at all), the image's own
check, ``vllm kernels``, goes through vLLM's run-time dispatch, maps ``_C_AVX2`` and runs one
vectorised op correctly. Importing ``vllm._C`` directly (the image's old check) dies there with
SIGILL, as it did on the AVX2-only EPYC that could not land a submission.

QEMU's user mode does not emulate /proc/cpuinfo: the ``cpuFlags`` it prints are the host's, so
only the library and the ISA label are asserted. Slow (the emulated torch import: about 2-4 min),
so it runs once, in the engine tier's worker."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

QEMU = Path("/usr/bin/qemu-x86_64-static")  # Debian's qemu-user-static (.ci/run installs it)


def test_an_avx2_only_cpu_gets_the_avx2_kernels(vllm_cpu_image: str) -> None:
    if not QEMU.is_file():
        pytest.fail(f"{QEMU} missing: apt-get install qemu-user-static (.ci/run does)")
    docker = shutil.which("docker")
    assert docker is not None
    done = subprocess.run(
        [
            docker, "run", "--rm", "--network", "none",
            "-v", f"{QEMU}:/usr/bin/qemu:ro", "--entrypoint", "/usr/bin/qemu", vllm_cpu_image,
            "-cpu", "Haswell", "/opt/vllm/bin/python", "/usr/local/bin/vllm", "kernels",
        ],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert (found["library"], found["isa"]) == ("_C_AVX2", "AVX2"), found
