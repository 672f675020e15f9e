"""Benchmark (figures, not pass/fail): do two configurations of the identical emulator profile
come out 'not significant' on this machine, with its load? The null experiment's claim,
measured (tests/integration/test_null_experiment.py holds only what load cannot change).

    .venv/bin/python tests/bench_null.py [--runs 3]

Each run: the seed's vllm-dflash and a twin of it, concurrency 1, 6 iterations of 128 tokens at
time scale 0.05 (the test's workload), one after the other; printed: both claims' raw and
Holm-adjusted p and the verdict, next to the machine's CPU count and load. Expected on a quiet
machine: no significant claim. Under load the twins meet different load (they run one after
the other), a real difference the report is right to call significant.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engines import load_experiment
from bench.matrix import MatrixOptions, run_matrix
from bench.report import load_artifacts
from bench.report._claims import ALPHA, claim_family, single_request, speculative
from bench.schema import EXPERIMENTS_DIR


def null_experiment(dest: Path) -> Path:
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text(encoding="utf-8")
    )
    base = next(c for c in data["configurations"] if c["name"] == "vllm-dflash")
    twin = copy.deepcopy(base) | {"name": "vllm-dflash-twin"}
    data["configurations"] = [base, twin]
    for c in data["configurations"]:
        c["concurrency"] = [1]
    data["workload"].update(prompt_tokens=200, max_tokens=128, warmup=1, iterations=6)
    path = dest / "null.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def one_run(tmp: Path) -> list[str]:
    path = null_experiment(tmp)
    out = tmp / "out"
    opts = MatrixOptions(out=out, launcher="process", time_scale=0.05, show_progress=False)
    run_matrix(load_experiment(path), opts, experiment_path=path)
    rs = load_artifacts(out)
    family = claim_family(rs, speculative(single_request(rs.runs)), [])
    return [
        f"{key[0]:6s} raw p {family.raw[key]:.4f}  Holm {family.adjusted[key]:.4f}  "
        f"{'SIGNIFICANT' if family.adjusted[key] < ALPHA else 'not significant'}"
        for key in sorted(family.raw)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for i in range(args.runs):
        before = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as tmp:
            lines = one_run(Path(tmp))
        after = os.getloadavg()[0]
        print(f"run {i + 1}: {os.cpu_count()} CPUs, load {before:.1f} -> {after:.1f}")
        for line in lines:
            print("   ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
