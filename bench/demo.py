"""``specbench demo``: the whole pipeline on the emulator, as local processes (no Docker, no GPU).

It runs the seed experiment (every configuration, every concurrency level, the seed workload of
1044 prompt / 512 output tokens) against emulated engines with a fast ``time_scale``, including
the broken-draft configuration (the seed's first SGLang MTP attempt: 7 skipped tensors, zero
acceptance) so the invalid-run path shows, then renders ``reports/demo/REPORT.md``.
Everything it writes is labelled SIMULATED.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.engines import load_experiment
from bench.matrix import MatrixOptions, MatrixResult, run_matrix
from bench.report import render_report
from bench.schema import EXPERIMENTS_DIR

DEMO_EXPERIMENT = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
DEMO_OUT = Path("reports/demo")
# 512 emulated tokens take well under a second at this scale; the seed workload is unchanged.
DEMO_TIME_SCALE = 0.02


def run_demo(
    out: Path = DEMO_OUT,
    *,
    time_scale: float = DEMO_TIME_SCALE,
    iterations: int | None = None,
    warmup: int | None = None,
    only: list[str] | None = None,
    show_progress: bool = True,
) -> tuple[MatrixResult, Path]:
    """Run the demo into ``out`` (artifacts in ``out/artifacts``); returns the report path."""
    exp = load_experiment(DEMO_EXPERIMENT)
    artifacts = out / "artifacts"
    if artifacts.exists():
        # A demo is disposable: start clean so the report is of this run only.
        shutil.rmtree(artifacts)
    opts = MatrixOptions(
        out=artifacts,
        only=only or [],
        launcher="process",
        emulate=True,
        time_scale=time_scale,
        iterations=iterations,
        warmup=warmup,
        show_progress=show_progress,
    )
    result = run_matrix(exp, opts, experiment_path=DEMO_EXPERIMENT)
    return result, render(artifacts, out)


def render(artifacts: Path, out: Path) -> Path:
    """REPORT.md through the report renderer (bench.report.render_report)."""
    path: Path = render_report(artifacts, out)
    return path
