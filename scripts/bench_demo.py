#!/usr/bin/env python3
"""How long a new user waits: `make demo` from a fresh clone, and report renders on its output.

    python3 scripts/bench_demo.py [--runs 3] [--cold-cache] [--repo .]

Each run clones the repository's HEAD into a new temporary folder and times `make demo` there
(setup included: the uv bootstrap, `uv sync --no-dev`, the demo, its report). Then, on the last
run's artifacts, it times `specbench report` in a new process: cold (a new output folder, every
chart drawn) and warm (the same folder again: unchanged charts are not rewritten). Each figure
is printed with the load average before and after, since the machine may be shared. Standard
library only.

--cold-cache gives every run empty uv and pip caches (everything downloaded again); without it
the user's caches are used, as on a machine that has installed any uv project before.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, str, str]:
    before = load()
    t0 = time.perf_counter()
    with log.open("ab") as fh:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {proc.returncode}); see {log}")
    return wall, before, load()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--report-runs", type=int, default=3)
    ap.add_argument("--cold-cache", action="store_true")
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--keep", action="store_true", help="keep the clones")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="specbench-bench-demo-"))
    log = work / "bench.log"
    print(f"clones and log in {work}; {os.cpu_count()} CPUs", flush=True)
    # A new user's shell: no venv or path of ours, and Python writes its bytecode caches (a CI
    # or sandbox shell may set PYTHONDONTWRITEBYTECODE=1: every process then compiles every
    # module again, about 0.16 s of a report render here).
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    if "PYTHONDONTWRITEBYTECODE" in os.environ:
        print("PYTHONDONTWRITEBYTECODE is set here; unset for the timed commands", flush=True)
    demo_walls: list[float] = []
    clone = work
    for i in range(args.runs):
        clone = work / f"clone{i}"
        subprocess.run(
            ["git", "clone", "--quiet", "--no-hardlinks", str(args.repo), str(clone)], check=True
        )
        run_env = dict(env)
        if args.cold_cache:
            run_env["UV_CACHE_DIR"] = str(work / f"uv-cache{i}")
            run_env["PIP_CACHE_DIR"] = str(work / f"pip-cache{i}")
        wall, before, after = timed(["make", "demo"], clone, run_env, log)
        demo_walls.append(wall)
        print(f"make demo, fresh clone, run {i + 1}: {wall:.1f} s (load {before} -> {after})")
        if i + 1 < args.runs and not args.keep:
            shutil.rmtree(clone)
    print(
        f"make demo, fresh clone{', cold caches' if args.cold_cache else ''}: "
        f"median {statistics.median(demo_walls):.1f} s of {len(demo_walls)} "
        f"(min {min(demo_walls):.1f}, max {max(demo_walls):.1f})"
    )

    artifacts = clone / "reports" / "demo" / "artifacts"
    specbench = clone / ".venv" / "bin" / "specbench"
    renv = dict(env)
    cold, before, after = timed(
        [str(specbench), "report", str(artifacts), "--out", str(work / "r-cold")], clone, renv, log
    )
    print(
        f"report render, cold (new process, new output folder): {cold:.2f} s "
        f"(load {before} -> {after})"
    )
    warm: list[float] = []
    for j in range(args.report_runs):
        w, before, after = timed(
            [str(specbench), "report", str(artifacts), "--out", str(work / "r-cold")],
            clone,
            renv,
            log,
        )
        warm.append(w)
        print(f"report render, warm run {j + 1}: {w:.2f} s (load {before} -> {after})")
    print(f"report render, warm: median {statistics.median(warm):.2f} s of {len(warm)}")
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
