"""Benchmark (figures, not pass/fail): does `specbench compare` see a known difference between
hosts on this machine, with its load? The fleet test's statistical claim, measured.

    .venv/bin/python tests/bench_compare.py [--iterations 5] [--levels 1 2 4 8 16]

Three emulated hosts as the Ansible fleet test runs them (tests/e2e/test_ansible_fleet.py), here
as three local matrices side by side on this machine's cores: the seed's vllm-dflash
configuration at time scale 0.25 on A and C and 1.0 on B (B's steps take four times A's), five
measured iterations a level, then `specbench compare a b c`. Printed per level: B's and C's
decode against A's (ratio, Holm-adjusted p, the verdict), next to the machine's CPU count and
load. The expected: B significantly slower everywhere, C 'not significant'. A loaded machine
adds the same stalls to every host's streams and narrows the gap (a CI run under load 6-8 once
found a 2x slower B at p = 0.061), so this is recorded with its load in docs/benchmarks.md and
not asserted; the fleet test asserts only that each verdict is the one its figures give.
Without the emulated load time (the profile's own speed otherwise): about 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from emulator_profiles import without_load_time

from bench.report import compare_hosts
from bench.schema import EXPERIMENTS_DIR

CONFIG = "vllm-dflash"
SCALES = {"a": 0.25, "b": 1.0, "c": 0.25}  # the fleet test's


def experiment(folder: Path, iterations: int, levels: list[int]) -> Path:
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    data["configurations"] = [c for c in data["configurations"] if c["name"] == CONFIG]
    (cfg,) = data["configurations"]
    cfg["concurrency"] = levels
    without_load_time(cfg, folder)
    data["workload"].update(warmup=0, iterations=iterations)
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    exp = experiment(tmp, args.iterations, args.levels)
    print(f"# {os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f} (1 min)")
    started = time.monotonic()
    procs = {}
    for host, scale in SCALES.items():
        argv = [sys.executable, "-m", "bench", "matrix", str(exp), "--out", str(tmp / host)]
        argv += ["--launcher", "process", "--time-scale", str(scale), "--no-progress"]
        procs[host] = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
    for host, proc in procs.items():
        _, err = proc.communicate()
        if proc.returncode != 0:
            print(f"host {host}: matrix exited {proc.returncode}:\n{err[-2000:]}")
            return 1
    print(
        f"# three matrices ({CONFIG}, {args.iterations} iterations, levels {args.levels}) in "
        f"{time.monotonic() - started:.0f} s; load average after: {os.getloadavg()[0]:.2f}"
    )
    expected = {"b": "significant", "c": "not_significant"}
    met = True
    for other in ("b", "c"):
        cmp = compare_hosts([tmp / "a", tmp / other])
        for miss in cmp.missing:
            print(f"  missing: {miss}")
        for row in cmp.rows:
            ref, cell = row.cells
            v = cell.decode_vs_first
            if v is None or ref.run is None or cell.run is None:
                print(f"  {other} c={row.concurrency}: no comparison")
                met = False
                continue
            a_mean, o_mean = ref.run.decode.mean or 0.0, cell.run.decode.mean or 0.0
            ok = v.significance == expected[other]
            met = met and ok
            print(
                f"  {other}/a c={row.concurrency:<2} decode {o_mean:7.1f} / {a_mean:7.1f} tok/s "
                f"= {o_mean / a_mean:5.2f}; p {v.p_value or 0:.3g}, Holm {v.p_adjusted or 0:.3g}:"
                f" {v.significance} (expected {expected[other]}{'' if ok else ': MISSED'})"
            )
    print(f"expected verdicts at every level: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
