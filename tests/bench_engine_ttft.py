"""Benchmark (figures, not pass/fail): the client's TTFT against the real engine's own clock.

    .venv/bin/python tests/bench_engine_ttft.py [--only baseline self-draft-k1 ...]
    .venv/bin/python tests/bench_engine_ttft.py --artifacts RUN_DIR   # a finished run's payloads

For every measured window of bench/experiments/tiny-vllm-cpu.yaml on vLLM's CPU build (the
engine tier's run: ``specbench matrix --launcher docker`` on the generated tiny models), the
client's mean TTFT minus the engine's (its TTFT histogram's deltas over the same window): the
HTTP front end (parsing, chat template, tokenizing, the first chunk's way back), plus whatever
the machine's load adds. Printed per concurrency level: min, median, p90 and max over the
windows, next to the machine's CPU count and load average before and after, and the targets the
engine tier once asserted (median <= 10 ms and p90 <= 50 ms per level: met or MISSED). A loaded
2-core machine moves these a lot (issue 50: p90 61.8 ms at c=4 beside other work), so they are
recorded in docs/benchmarks.md with the load, never asserted by a test; the test keeps what no
load changes (the client never below the engine, both clocks in every window).

Needs Docker and the image of docker/vllm-cpu/build.sh (``make test-engine`` builds it); about
5-8 minutes for the whole tiny experiment on 2 cores (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.schema import read_payload

REPO = Path(__file__).resolve().parent.parent
EXPERIMENT = REPO / "bench" / "experiments" / "tiny-vllm-cpu.yaml"
TARGET_MEDIAN_MS, TARGET_P90_MS = 10.0, 50.0


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min), {five:.2f} (5 min)"


def run_tiny(out: Path, only: list[str]) -> float:
    """The tiny experiment (or ``only`` its named configurations) into ``out``; seconds."""
    from bench.engines import load_experiment
    from bench.matrix import MatrixOptions, run_matrix
    from bench.tinymodel import make_tiny_models

    models = out.parent / "models"
    made = make_tiny_models(models, seed=0)
    # the server runs as uid 10001: the mounted folders must be readable by others
    for path in (models, *(getattr(made, m).path for m in ("target", "draft", "chain"))):
        path.chmod(0o755)
    opts = MatrixOptions(
        out=out, only=only, launcher="docker", model_cache=str(models), allow_unpinned=True,
        show_progress=False,
    )  # fmt: skip
    started = time.monotonic()
    run_matrix(load_experiment(EXPERIMENT), opts)
    return time.monotonic() - started


def gaps_by_level(run: Path) -> tuple[dict[int, list[float]], list[str]]:
    """client mean TTFT - server TTFT (ms) per measured window, by concurrency; problems."""
    by_level: dict[int, list[float]] = {}
    problems: list[str] = []
    for f in sorted((run / "payloads").glob("*.json")):
        p = read_payload(f)
        if not p.evidence.validity.valid:
            problems.append(f"{f.name}: invalid, {[r.code for r in p.evidence.validity.reasons]}")
        for it in p.evidence.iterations:
            if it.warmup:
                continue
            client = [r.ttft_ms for r in it.requests if r.ttft_ms is not None]
            if it.server_ttft_ms is None or not client:
                problems.append(f"{f.name} iteration {it.index}: a clock is missing")
                continue
            gap = sum(client) / len(client) - it.server_ttft_ms
            by_level.setdefault(p.engineFlags.concurrency, []).append(gap)
    return by_level, problems


def report(by_level: dict[int, list[float]]) -> None:
    print("client - engine TTFT per measured window (ms)")
    for c, level in sorted(by_level.items()):
        level.sort()
        median, p90 = level[len(level) // 2], level[math.ceil(0.9 * len(level)) - 1]
        met = median <= TARGET_MEDIAN_MS and p90 <= TARGET_P90_MS
        print(
            f"  c={c}: min {level[0]:7.2f}  median {median:7.2f}  p90 {p90:7.2f}  "
            f"max {level[-1]:7.2f}  over {len(level)} windows; target median <= "
            f"{TARGET_MEDIAN_MS:g}, p90 <= {TARGET_P90_MS:g}: {'met' if met else 'MISSED'}"
        )
    every = sorted(g for level in by_level.values() for g in level)
    if every:
        print(f"  never below the engine (> -1 ms): {'yes' if every[0] >= -1.0 else 'NO'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--artifacts", type=Path, help="read a finished run's payloads instead")
    ap.add_argument("--only", nargs="*", default=[], help="configurations (default: all)")
    args = ap.parse_args()
    print(f"# {os.cpu_count()} CPUs; load average before: {load()}")
    if args.artifacts is not None:
        run = args.artifacts
    else:
        tmp = Path(tempfile.mkdtemp(prefix="bench-engine-ttft-"))
        run = tmp / "run"
        took = run_tiny(run, args.only)
        print(f"# the tiny experiment ({', '.join(args.only) or 'all'}) ran in {took:.0f} s: {run}")
    by_level, problems = gaps_by_level(run)
    print(f"# load average after: {load()}")
    for problem in problems:
        print(f"# {problem}")
    report(by_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
