"""Valid run folders made by the demo (the emulator, SIMULATED), small and quick: the seeds the
invariant tests and the generative tier (issue 47) mutate. Made once per test process, in a
temporary folder removed when the process ends; every test copies the folder it changes."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from bench.demo import run_categories_demo, run_demo

#: a short workload: two measured iterations of 16 tokens, no logprob probes
WORKLOAD = {"max_tokens": 16, "warmup": 0, "iterations": 2, "logprob_probes": 0}
#: the emulator slowed enough that a loaded 2-core machine still times every chunk apart
TIME_SCALE = 0.02


@functools.cache
def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="specbench-demo-seed-"))
    atexit.register(shutil.rmtree, root, True)
    return root


@functools.cache
def seed_run() -> Path:
    """The seed experiment's vLLM and SGLang MTP with their baselines, at concurrency 1 and 2:
    the artifacts folder."""
    out = _root() / "seed"
    run_demo(
        out,
        time_scale=TIME_SCALE,
        only=["vllm-baseline", "vllm-mtp", "sglang-baseline", "sglang-mtp"],
        show_progress=False,
        workload={**WORKLOAD, "concurrency": [1, 2]},
    )
    return out / "artifacts"


@functools.cache
def categories_run() -> Path:
    """The categories experiment's SGLang MTP (per-request counts) and its baseline."""
    out = _root() / "categories"
    run_categories_demo(
        out,
        time_scale=TIME_SCALE,
        only=["sglang-baseline", "sglang-mtp"],
        show_progress=False,
        workload={**WORKLOAD, "concurrency": [1]},
    )
    return out / "artifacts"


def copy_of(run: Path, dest: Path) -> Path:
    """A copy of a seed run folder to change."""
    shutil.copytree(run, dest)
    return dest
