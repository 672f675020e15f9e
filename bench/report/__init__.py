"""Artifacts -> typed report context -> Jinja2 -> REPORT.md and charts; the publish bundle.
Reads artifacts only: never imports bench.measure or bench.matrix.

The public names load on first use (PEP 562): a command imports only the modules it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.report._bundle import linked_files, publish, verify_bundle
    from bench.report._charts import render_charts
    from bench.report._claims import (
        ConcurrencySweep,
        compare,
        single_request,
        sweeps,
        welch_samples,
    )
    from bench.report._compare import FleetComparison, compare_hosts
    from bench.report._load import load_artifacts
    from bench.report._lossless import LosslessRow, lossless
    from bench.report._model import Figure, PublishedDelta, RunView
    from bench.report._render import render_comparison, render_report
    from bench.report._text import md_code, md_fence, md_inline, pct

_HOME = {
    "linked_files": "_bundle",
    "publish": "_bundle",
    "verify_bundle": "_bundle",
    "render_charts": "_charts",
    "ConcurrencySweep": "_claims",
    "compare": "_claims",
    "single_request": "_claims",
    "sweeps": "_claims",
    "welch_samples": "_claims",
    "load_artifacts": "_load",
    "LosslessRow": "_lossless",
    "lossless": "_lossless",
    "Figure": "_model",
    "PublishedDelta": "_model",
    "RunView": "_model",
    "render_report": "_render",
    "render_comparison": "_render",
    "compare_hosts": "_compare",
    "FleetComparison": "_compare",
    "md_code": "_text",
    "md_fence": "_text",
    "md_inline": "_text",
    "pct": "_text",
}

__all__ = [
    "ConcurrencySweep",
    "Figure",
    "FleetComparison",
    "LosslessRow",
    "PublishedDelta",
    "RunView",
    "compare",
    "compare_hosts",
    "linked_files",
    "load_artifacts",
    "lossless",
    "md_code",
    "md_fence",
    "md_inline",
    "pct",
    "publish",
    "render_charts",
    "render_comparison",
    "render_report",
    "single_request",
    "sweeps",
    "verify_bundle",
    "welch_samples",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'bench.report' has no attribute {name!r}")
    return getattr(importlib.import_module(f"bench.report.{home}"), name)
