"""Valid run folders made by the demo (the emulator, SIMULATED), small and quick: the seeds the
invariant tests and the generative tier (issue 47) mutate. Made once per test process, in a
temporary folder removed when the process ends; every test copies the folder it changes."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

from bench.core import sha256_file
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
def second_seed_run() -> Path:
    """``seed_run`` again: another run of the same experiment (another run id, its own
    timings), to swap files with and to compare against."""
    out = _root() / "seed2"
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


def as_real(run: Path, dest: Path) -> Path:
    """A copy of a demo run folder relabelled as a real run, pinned, so that `publish` goes past
    its SIMULATED and UNPINNED refusals to the checks under test (its figures stay the
    emulator's; the folder never leaves the test's temporary directory)."""
    art = copy_of(run, dest)
    for f in sorted((art / "payloads").glob("*.json")):
        doc = json.loads(f.read_text())
        doc["simulated"] = False
        doc["evidence"]["run"]["simulated"] = False
        f.write_text(json.dumps(doc, indent=2) + "\n")
    for name in ("experiment.lock.json", "status.json"):
        doc = json.loads((art / name).read_text())
        doc["simulated"] = False
        for pin in doc.get("pins", []):
            pin["value"] = pin["value"] or "sha256:" + "5" * 64
            pin["source"] = "lock"
        doc["unresolved_pins"] = [] if "unresolved_pins" in doc else doc.get("unresolved_pins")
        if doc["unresolved_pins"] is None:
            del doc["unresolved_pins"]
        (art / name).write_text(json.dumps(doc, indent=2) + "\n")
    write_sums(art)
    return art


def write_sums(root: Path) -> None:
    """SHA256SUMS over every file of a run folder, as the matrix leaves it."""
    lines = [
        f"{sha256_file(f)}  {f.relative_to(root).as_posix()}"
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.name != "SHA256SUMS"
    ]
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")
