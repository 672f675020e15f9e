"""Charts for the report (matplotlib, Agg backend): decode tok/s with 95% CI error bars, TTFT,
concurrency scaling and acceptance. Each chart is a PNG next to REPORT.md; a chart whose data
is entirely unknown is not drawn. Every title carries SIMULATED when the data came from the
emulator."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.models import StrictModel
from bench.report_claims import ConcurrencySweep
from bench.report_model import Figure, RunView
from bench.report_text import engine_label, method_label


class Chart(StrictModel):
    file: str
    alt: str
    title: str


def _label(r: RunView) -> str:
    return f"{engine_label(r.engine)} + {method_label(r.method)}"


def _title(text: str, simulated: bool) -> str:
    return f"SIMULATED: {text}" if simulated else text


def _err(f: Figure) -> float:
    if f.ci95_low is not None and f.ci95_high is not None and f.mean is not None:
        return max(0.0, f.ci95_high - f.mean)
    return 0.0


def _new(fig_cls: Any) -> tuple[Any, Any]:
    fig = fig_cls(figsize=(7.0, 3.8), dpi=90)
    fig.subplots_adjust(left=0.11, right=0.98, top=0.9, bottom=0.12)
    return fig, fig.add_subplot()


def _bars(
    fig_cls: Any, runs: Sequence[RunView], metric: str, ylabel: str, title: str, path: Path
) -> bool:
    rows = [(r, getattr(r, metric)) for r in runs if getattr(r, metric).mean is not None]
    if not rows:
        return False
    fig, ax = _new(fig_cls)
    names = [_label(r) for r, _ in rows]
    means = [f.mean for _, f in rows]
    errs = [_err(f) for _, f in rows]
    ax.bar(names, means, yerr=errs if any(errs) else None, capsize=6, color="#4C72B0")
    for i, m in enumerate(means):
        ax.annotate(
            f"{m:.2f}",
            (i, m),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 3),
            textcoords="offset points",
        )
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", labelsize=8)
    fig.savefig(path)
    return True


def render_charts(
    out_dir: Path,
    single: Sequence[RunView],
    sweeps: Sequence[ConcurrencySweep],
    simulated: bool,
) -> dict[str, Chart]:
    """Draw every chart the data supports; returns them by role (decode, ttft, ...)."""
    # The object API with the Agg canvas: no pyplot global state, no GUI backend lookup.
    from matplotlib.figure import Figure as fig_cls

    charts: dict[str, Chart] = {}
    t = _title("Decode throughput at concurrency 1 (mean, 95% CI)", simulated)
    if _bars(fig_cls, single, "decode", "tok/s per stream", t, out_dir / "decode.png"):
        charts["decode"] = Chart(file="decode.png", alt="Decode throughput chart", title=t)
    t = _title("Time to first token at concurrency 1 (mean, 95% CI)", simulated)
    if _bars(fig_cls, single, "ttft", "ms", t, out_dir / "ttft.png"):
        charts["ttft"] = Chart(file="ttft.png", alt="TTFT chart", title=t)
    drawable = [s for s in sweeps if sum(p.aggregate is not None for p in s.points) >= 1]
    if drawable:
        t = _title("Aggregate output throughput vs concurrency", simulated)
        fig, ax = _new(fig_cls)
        for s in drawable:
            pts = [p for p in s.points if p.aggregate is not None and p.valid]
            ax.plot(
                [p.concurrency for p in pts],
                [p.aggregate for p in pts],
                marker="o",
                label=f"{engine_label(s.engine)} + {method_label(s.method)}",
            )
        ax.set_xscale("log", base=2)
        levels = sorted({p.concurrency for s in drawable for p in s.points})
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_xlabel("concurrency")
        ax.set_ylabel("aggregate tok/s")
        ax.set_title(t, fontsize=10)
        ax.legend(fontsize=8)
        fig.savefig(out_dir / "concurrency.png")
        charts["concurrency"] = Chart(file="concurrency.png", alt="Concurrency chart", title=t)
    acc = [r for r in single if r.acceptance_rate is not None]
    if acc:
        t = _title("Acceptance rate (accepted / draft tokens, one definition)", simulated)
        fig, ax = _new(fig_cls)
        vals = [100.0 * (r.acceptance_rate or 0.0) for r in acc]
        ax.bar([_label(r) for r in acc], vals, color="#55A868")
        ax.set_ylabel("acceptance rate, %")
        ax.set_ylim(0, 100)
        ax.set_title(t, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
        fig.savefig(out_dir / "acceptance.png")
        charts["acceptance"] = Chart(file="acceptance.png", alt="Acceptance chart", title=t)
    return charts
