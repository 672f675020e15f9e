"""Draw chart specs (``bench.report._charts.ChartSpec`` as plain dicts) with matplotlib.

Also the chart child process: ``python -m bench.report._draw`` imports matplotlib first (the
expensive part, overlapping the parent's work), then reads ``{"out_dir", "specs"}`` as JSON on
stdin and draws. It imports nothing else from specbench, so it starts fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def draw_all(specs: Sequence[dict[str, Any]], out_dir: Path) -> None:
    # The object API with the Agg canvas: no pyplot global state, no GUI backend lookup.
    from matplotlib.figure import Figure

    for spec in specs:
        fig = Figure(figsize=(7.0, 3.8), dpi=90)
        fig.subplots_adjust(left=0.11, right=0.98, top=0.9, bottom=0.12)
        ax = fig.add_subplot()
        if spec["kind"] == "bars":
            errs = spec["errors"] if any(spec["errors"]) else None
            ax.bar(spec["labels"], spec["values"], yerr=errs, capsize=6, color=spec["color"])
            if spec["annotate"]:
                for i, m in enumerate(spec["values"]):
                    ax.annotate(
                        f"{m:.2f}",
                        (i, m),
                        ha="center",
                        va="bottom",
                        fontsize=8,
                        xytext=(0, 3),
                        textcoords="offset points",
                    )
            ax.tick_params(axis="x", labelsize=8)
        else:
            for s in spec["series"]:
                ax.plot(s["x"], s["y"], marker="o", label=s["label"])
            ax.set_xscale("log", base=2)
            ax.set_xticks([float(v) for v in spec["labels"]], spec["labels"])
            ax.legend(fontsize=8)
        if spec.get("xlabel"):
            ax.set_xlabel(spec["xlabel"])
        if spec.get("ylim"):
            ax.set_ylim(*spec["ylim"])
        ax.set_ylabel(spec["ylabel"])
        ax.set_title(spec["title"], fontsize=10)
        fig.savefig(out_dir / spec["file"])


def main() -> int:
    # heavy optional dependency: charts are drawn in a child process that imports it
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401

    job = json.loads(sys.stdin.buffer.read() or b"null")
    if not job:
        return 0
    draw_all(job["specs"], Path(job["out_dir"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
