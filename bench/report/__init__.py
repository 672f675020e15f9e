"""Artifacts -> typed report context -> Jinja2 -> REPORT.md and charts; the publish bundle.
Reads artifacts only: never imports bench.measure or bench.matrix.
"""

from __future__ import annotations

from bench.report._bundle import linked_files, publish, verify_bundle
from bench.report._charts import render_charts
from bench.report._claims import ConcurrencySweep, compare, single_request, sweeps, welch_samples
from bench.report._load import load_artifacts
from bench.report._lossless import LosslessRow, lossless
from bench.report._model import Figure, PublishedDelta, RunView
from bench.report._render import render_report
from bench.report._text import md_code, md_fence, md_inline, pct

__all__ = [
    "ConcurrencySweep",
    "Figure",
    "LosslessRow",
    "PublishedDelta",
    "RunView",
    "compare",
    "linked_files",
    "load_artifacts",
    "lossless",
    "md_code",
    "md_fence",
    "md_inline",
    "pct",
    "publish",
    "render_charts",
    "render_report",
    "single_request",
    "sweeps",
    "verify_bundle",
    "welch_samples",
]
