"""Benchmark: time to render a full matrix's artifacts (7 configurations, 22 payloads) into
REPORT.md + charts, in a fresh process as a user runs it. Target: < 2 s.

cold: a fresh output folder, every chart drawn (SVG, bench.report._svg); warm: the same
artifacts rendered again into the same folder, so unchanged charts are not redrawn
(bench.report._charts' content hash). The machine's load average is printed next to the
figures: on 2 shared cores it moves them a lot.

    .venv/bin/python tests/bench_report.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_factory import Spec, experiment_lock, jitter, seed_matrix, write_artifacts

RUNS = 3


def _render(art: Path, out: Path) -> tuple[float, float]:
    code = (
        "import time,sys;t=time.perf_counter();from pathlib import Path;"
        "from bench.report import render_report;"
        f"render_report(Path({str(art)!r}), Path({str(out)!r}));"
        "print(time.perf_counter()-t)"
    )
    t0 = time.perf_counter()
    inner = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    return float(inner), time.perf_counter() - t0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        specs = seed_matrix()
        for c in (1, 2, 4, 8, 16):
            for eng in ("vllm", "sglang"):
                specs.append(
                    Spec(
                        f"{eng}-baseline",
                        eng,
                        "NONE",
                        jitter(40.0 / c**0.3),
                        jitter(60.0),
                        concurrency=c,
                        acceptance=None,
                    )
                )
        art = write_artifacts(Path(tmp) / "art", specs, lock=experiment_lock())
        n = len(list((art / "payloads").glob("*.json")))
        print(f"{n} payloads; load average before: {os.getloadavg()[0]:.2f} (1 min)")
        best: dict[str, float] = {}
        for kind in ("cold", "warm"):
            for i in range(RUNS):
                out = Path(tmp) / (f"cold{i}" if kind == "cold" else "warm")
                if kind == "warm" and i == 0:
                    _render(art, out)  # prime the folder: charts drawn once
                inner_s, wall = _render(art, out)
                best[kind] = min(best.get(kind, inner_s), inner_s)
                print(f"{kind}: {inner_s:.2f} s in-process, {wall:.2f} s with interpreter start")
        print(f"load average after: {os.getloadavg()[0]:.2f} (1 min)")
        for kind, t in best.items():
            print(f"best {kind}: {t:.2f} s; target < 2 s: {'met' if t < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
