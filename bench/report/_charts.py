"""Charts for the report: decode tok/s with 95% CI error bars, TTFT, concurrency scaling and
acceptance. Each chart is an SVG next to REPORT.md (bench.report._svg draws it; no plotting
library); a chart whose data is entirely unknown is not drawn. Every title carries SIMULATED
when the data came from the emulator.

Each chart is first described as data (``ChartSpec``); a chart whose spec and file are unchanged
since the last render (``.charts.json`` holds the spec hash and the file's SHA256) is not
rewritten, so a re-render leaves unchanged charts (and their times) alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from bench.core import (
    InputError,
    StrictModel,
    read_json,
    read_text,
    remove_file,
    sha256_file,
    write_text,
)
from bench.report._claims import ConcurrencySweep
from bench.report._model import Figure, RunView
from bench.report._svg import draw_all
from bench.report._text import engine_label, method_label

STYLE: Final = "charts/3-svg"  # bump when the drawing code changes: cached charts are redrawn
MANIFEST: Final = ".charts.json"
#: chart files an earlier specbench drew (PNG, matplotlib), removed when a report is re-rendered
OLD_FILES: Final = ("decode.png", "ttft.png", "concurrency.png", "acceptance.png")


class Chart(StrictModel):
    file: str
    alt: str
    title: str


class Series(StrictModel):
    label: str
    x: list[float]
    y: list[float]


class ChartSpec(StrictModel):
    """Everything needed to draw one chart; its hash decides whether a PNG is current."""

    role: str
    file: str
    alt: str
    title: str
    kind: Literal["bars", "lines", "groups"]
    ylabel: str
    xlabel: str | None = None
    labels: list[str] = Field(default_factory=list)
    values: list[float] = Field(default_factory=list)
    errors: list[float] = Field(default_factory=list)
    annotate: bool = False
    color: str = "#4C72B0"
    ylim: tuple[float, float] | None = None
    series: list[Series] = Field(default_factory=list)

    def digest(self) -> str:
        return hashlib.sha256((STYLE + self.model_dump_json()).encode()).hexdigest()

    @property
    def chart(self) -> Chart:
        return Chart(file=self.file, alt=self.alt, title=self.title)


def _label(r: RunView | ConcurrencySweep) -> str:
    return f"{engine_label(r.engine)} + {method_label(r.method)}"


#: how a chart names a run or a sweep (the report passes one that names the configuration
#: where two share engine and method)
Labeller = Callable[[RunView | ConcurrencySweep], str]


def _title(text: str, simulated: bool) -> str:
    return f"SIMULATED: {text}" if simulated else text


def _err(f: Figure) -> float:
    if f.ci95_low is not None and f.ci95_high is not None and f.mean is not None:
        return max(0.0, f.ci95_high - f.mean)
    return 0.0


def _bar_spec(
    role: str,
    runs: Sequence[RunView],
    metric: str,
    ylabel: str,
    title: str,
    alt: str,
    label: Labeller = _label,
) -> ChartSpec | None:
    rows = [(r, getattr(r, metric)) for r in runs if getattr(r, metric).mean is not None]
    if not rows:
        return None
    return ChartSpec(
        role=role,
        file=f"{role}.svg",
        alt=alt,
        title=title,
        kind="bars",
        ylabel=ylabel,
        labels=[label(r) for r, _ in rows],
        values=[f.mean for _, f in rows],
        errors=[_err(f) for _, f in rows],
        annotate=True,
    )


def chart_specs(
    single: Sequence[RunView],
    sweeps: Sequence[ConcurrencySweep],
    simulated: bool,
    label: Labeller = _label,
) -> list[ChartSpec]:
    """Every chart the data supports, as data (no matplotlib)."""
    specs: list[ChartSpec | None] = [
        _bar_spec(
            "decode",
            single,
            "decode",
            "tok/s per stream",
            _title("Decode throughput at concurrency 1 (mean, 95% CI)", simulated),
            "Decode throughput chart",
            label,
        ),
        _bar_spec(
            "ttft",
            single,
            "ttft",
            "ms",
            _title("Time to first token at concurrency 1 (mean, 95% CI)", simulated),
            "TTFT chart",
            label,
        ),
    ]
    drawable = [s for s in sweeps if sum(p.aggregate is not None for p in s.points) >= 1]
    if drawable:
        series = []
        for s in drawable:
            pts = [p for p in s.points if p.aggregate is not None and p.valid]
            series.append(
                Series(
                    label=label(s),
                    x=[float(p.concurrency) for p in pts],
                    y=[float(p.aggregate or 0.0) for p in pts],
                )
            )
        specs.append(
            ChartSpec(
                role="concurrency",
                file="concurrency.svg",
                alt="Concurrency chart",
                title=_title("Aggregate output throughput vs concurrency", simulated),
                kind="lines",
                xlabel="concurrency",
                ylabel="aggregate tok/s",
                labels=[
                    str(c) for c in sorted({p.concurrency for s in drawable for p in s.points})
                ],
                series=series,
            )
        )
    acc = [r for r in single if r.acceptance_rate is not None]
    if acc:
        specs.append(
            ChartSpec(
                role="acceptance",
                file="acceptance.svg",
                alt="Acceptance chart",
                title=_title(
                    "Acceptance rate (accepted / draft tokens, one definition)", simulated
                ),
                kind="bars",
                ylabel="acceptance rate, %",
                labels=[label(r) for r in acc],
                values=[100.0 * (r.acceptance_rate or 0.0) for r in acc],
                color="#55A868",
                ylim=(0.0, 100.0),
            )
        )
    specs.append(category_spec(single, simulated, label))
    return [s for s in specs if s is not None]


def category_spec(
    single: Sequence[RunView], simulated: bool, label: Labeller = _label
) -> ChartSpec | None:
    """Acceptance rate by prompt category (x) for each speculative configuration (one bar of
    each group); None when no run measured a prompt set with acceptance."""
    runs = [r for r in single if any(c.acceptance_rate is not None for c in r.categories)]
    if not runs:
        return None
    cats = list(dict.fromkeys(c.category for r in runs for c in r.categories))
    series = []
    for r in runs:
        rate = {c.category: c.acceptance_rate for c in r.categories}
        series.append(
            Series(
                label=label(r),
                x=[float(i) for i in range(len(cats))],
                y=[100.0 * (rate.get(c) or 0.0) for c in cats],
            )
        )
    return ChartSpec(
        role="categories",
        file="categories.svg",
        alt="Acceptance by prompt category chart",
        title=_title("Acceptance rate by prompt category (accepted / draft tokens)", simulated),
        kind="groups",
        ylabel="acceptance rate, %",
        labels=cats,
        series=series,
        ylim=(0.0, 100.0),
    )


# -- drawing ----------------------------------------------------------------------------------


def draw(specs: Sequence[ChartSpec], out_dir: Path) -> None:
    """Draw ``specs`` as SVG files into ``out_dir``."""
    draw_all([s.model_dump(mode="json") for s in specs], out_dir)


def _manifest(out_dir: Path) -> dict[str, Any]:
    """The last render's chart manifest; entries whose name is not a chart file directly in
    ``out_dir`` are dropped (the manifest is read from disk: it never names what to delete
    outside the output folder)."""
    try:
        data = read_json(out_dir / MANIFEST, what="chart manifest")
    except InputError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if is_chart_name(k)}


def is_chart_name(name: str) -> bool:
    """A plain .png or .svg file name: no folder part, no '..', not absolute, no NUL."""
    return (
        name == Path(name).name
        and name not in ("", ".", "..")
        and "\x00" not in name
        and "\\" not in name
        and name.endswith((".png", ".svg"))
    )


def _current(spec: ChartSpec, out_dir: Path, manifest: dict[str, Any]) -> bool:
    entry = manifest.get(spec.file)
    drawn = out_dir / spec.file
    return (
        isinstance(entry, dict)
        and entry.get("spec") == spec.digest()
        and drawn.is_file()
        and entry.get("sha256") == sha256_file(drawn)
    )


def _drawn_here(out_dir: Path, name: str, manifest: dict[str, Any]) -> bool:
    """Whether ``name`` in ``out_dir`` is a chart an earlier render drew (so a stale one may go):
    its bytes are those the manifest recorded, or (charts of releases before the manifest) the
    folder's REPORT.md links it. A file of the same name that the user put there stays."""
    path = out_dir / name
    if path.is_symlink() or not path.is_file():
        return False
    entry = manifest.get(name)
    if isinstance(entry, dict) and "sha256" in entry:
        return bool(entry["sha256"] == sha256_file(path))
    if name not in OLD_FILES:
        return False
    try:
        return f"({name})" in read_text(out_dir / "REPORT.md", what="REPORT.md", lenient=True)
    except InputError:
        return False


def render_charts(
    out_dir: Path,
    single: Sequence[RunView],
    sweeps: Sequence[ConcurrencySweep],
    simulated: bool,
    label: Labeller = _label,
    extra: Sequence[ChartSpec] = (),
) -> dict[str, Chart]:
    """Draw every chart the data supports (skipping current ones); returns them by role.
    Charts of an earlier render that the data no longer supports are removed. ``extra``: charts
    of other sections (the frontier), kept the same way."""
    specs = [*chart_specs(single, sweeps, simulated, label), *extra]
    manifest = _manifest(out_dir)
    todo = [s for s in specs if not _current(s, out_dir, manifest)]
    if todo:
        draw(todo, out_dir)
    keep = {s.file for s in specs}
    for old in [*manifest, *OLD_FILES]:
        if old not in keep and is_chart_name(old) and _drawn_here(out_dir, old, manifest):
            remove_file(out_dir / old, root=out_dir)
    new = {s.file: {"spec": s.digest(), "sha256": sha256_file(out_dir / s.file)} for s in specs}
    write_text(out_dir / MANIFEST, json.dumps(new, indent=1, sort_keys=True) + "\n", root=out_dir)
    return {s.role: s.chart for s in specs}
