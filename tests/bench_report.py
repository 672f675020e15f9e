"""Benchmark: time to render a full matrix's artifacts (7 configurations, 31 payloads) into
REPORT.md + charts, in a fresh process as a user runs it. Target: < 2 s.

    .venv/bin/python tests/bench_report.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_factory import Spec, experiment_lock, jitter, seed_matrix, write_artifacts


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
        code = (
            "import time,sys;t=time.perf_counter();from pathlib import Path;"
            "from bench.report import render_report;"
            f"render_report(Path({str(art)!r}), Path({tmp!r})/'out');"
            "print(time.perf_counter()-t)"
        )
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            inner = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout.strip()
            times.append((float(inner), time.perf_counter() - t0))
        for inner_s, wall in times:
            print(f"render_report: {inner_s:.2f} s in-process, {wall:.2f} s with interpreter start")
        best = min(t for t, _ in times)
        print(f"{n} payloads; best {best:.2f} s; target < 2 s: {'met' if best < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
