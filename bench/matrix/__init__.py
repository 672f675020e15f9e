"""Running an experiment: plan, launch (Docker SDK or local process), one server per
configuration measured at every concurrency level, typed artifacts, resume, checkpoint preflight.
"""

from __future__ import annotations

from bench.engines._scrub import scrub
from bench.matrix._artifacts import Artifacts
from bench.matrix._checkpoint_files import CheckReport, Finding
from bench.matrix._configuration import launch_record
from bench.matrix._launch import DockerLauncher
from bench.matrix._options import MatrixOptions, MatrixResult
from bench.matrix._plan import LONG_MATRIX_S, duration, render_plan, wall_time
from bench.matrix._preflight import (
    check_checkpoint,
    check_models_dir,
    check_target,
    render_text,
)
from bench.matrix._run import run_matrix

__all__ = [
    "LONG_MATRIX_S",
    "Artifacts",
    "CheckReport",
    "DockerLauncher",
    "Finding",
    "MatrixOptions",
    "MatrixResult",
    "check_checkpoint",
    "check_models_dir",
    "check_target",
    "duration",
    "launch_record",
    "render_plan",
    "render_text",
    "run_matrix",
    "scrub",
    "wall_time",
]
