"""Draw chart specs (``bench.report._charts.ChartSpec`` as plain dicts) as SVG, by hand.

Why not matplotlib: importing it took longer than the rest of a report together (0.85 s of a
2-3 s cold ``specbench report``; a child process had to hide it), and its PNGs differed byte for
byte between versions. These charts are a few bars and lines: an SVG written here is text, the
same for the same data on every machine, diffable, and drawn in microseconds. GitHub and every
Markdown viewer show SVG images.

Two kinds: ``bars`` (one bar per label, optional 95% CI error bars and value labels) and
``lines`` (series over a log2 x axis, with a legend).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final
from xml.sax.saxutils import escape, quoteattr

from bench.core import write_text

WIDTH: Final = 630
HEIGHT: Final = 342
LEFT, RIGHT, TOP, BOTTOM = 70, 14, 34, 46
PALETTE: Final = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3")
FONT: Final = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


def nice_ticks(high: float, low: float = 0.0, count: int = 5) -> list[float]:
    """Round tick values from ``low`` to at least ``high``: steps of 1, 2 or 5 x 10^k."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    ticks = [low]
    while ticks[-1] < high - 1e-9 * step:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _num(v: float) -> str:
    """A tick or value label: no trailing zeros, at most two decimals."""
    return f"{v:.2f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"


def _text(
    x: float, y: float, s: str, size: int = 11, anchor: str = "middle", extra: str = ""
) -> str:
    return (
        f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' {FONT}"
        f"{' ' + extra if extra else ''}>{escape(s)}</text>"
    )


def _frame(spec: dict[str, Any], ticks: list[float], y_of: Any) -> list[str]:
    """Title, y axis label, horizontal grid lines with their values, the plot's frame."""
    out = [
        f"<rect width='{WIDTH}' height='{HEIGHT}' fill='white'/>",
        _text(WIDTH / 2, 20, spec["title"], size=12, extra="font-weight='bold'"),
        _text(16, TOP + (HEIGHT - TOP - BOTTOM) / 2, spec["ylabel"], anchor="middle",
              extra=f"transform='rotate(-90 16 {TOP + (HEIGHT - TOP - BOTTOM) / 2:.1f})'"),
    ]  # fmt: skip
    for t in ticks:
        y = y_of(t)
        out.append(
            f"<line x1='{LEFT}' x2='{WIDTH - RIGHT}' y1='{y:.1f}' y2='{y:.1f}' stroke='#dddddd'/>"
        )
        out.append(_text(LEFT - 6, y + 4, _num(t), size=10, anchor="end"))
    out.append(
        f"<rect x='{LEFT}' y='{TOP}' width='{WIDTH - LEFT - RIGHT}' "
        f"height='{HEIGHT - TOP - BOTTOM}' fill='none' stroke='#333333'/>"
    )
    if spec.get("xlabel"):
        out.append(_text(LEFT + (WIDTH - LEFT - RIGHT) / 2, HEIGHT - 6, spec["xlabel"]))
    return out


def _y_axis(spec: dict[str, Any], high: float) -> tuple[list[float], Any]:
    if spec.get("ylim"):
        low, top = spec["ylim"]
        ticks = nice_ticks(top, low)
    else:
        ticks = nice_ticks(high * 1.12 if high > 0 else 1.0)
    y0, y1 = ticks[0], ticks[-1]
    span = HEIGHT - TOP - BOTTOM

    def y_of(v: float) -> float:
        return TOP + span * (1 - (min(max(v, y0), y1) - y0) / (y1 - y0))

    return ticks, y_of


def bars_svg(spec: dict[str, Any]) -> list[str]:
    labels: Sequence[str] = spec["labels"]
    values: Sequence[float] = spec["values"]
    errors: Sequence[float] = spec["errors"] or [0.0] * len(values)
    ticks, y_of = _y_axis(
        spec, max((v + e for v, e in zip(values, errors, strict=True)), default=1)
    )
    out = _frame(spec, ticks, y_of)
    slot = (WIDTH - LEFT - RIGHT) / max(len(values), 1)
    tilt = len(values) > 6 or max((len(s) for s in labels), default=0) * 6.2 > slot
    for i, (label, v, e) in enumerate(zip(labels, values, errors, strict=True)):
        cx = LEFT + slot * (i + 0.5)
        w = slot * 0.7
        top = y_of(v)
        out.append(
            f"<rect x='{cx - w / 2:.1f}' y='{top:.1f}' width='{w:.1f}' "
            f"height='{y_of(ticks[0]) - top:.1f}' fill={quoteattr(spec['color'])}>"
            f"<title>{escape(label)}: {_num(v)}</title></rect>"
        )
        head = top
        if e > 0:
            hi, lo = y_of(v + e), y_of(v - e)
            head = hi
            out.append(
                f"<path d='M{cx:.1f} {hi:.1f}V{lo:.1f}M{cx - 6:.1f} {hi:.1f}H{cx + 6:.1f}"
                f"M{cx - 6:.1f} {lo:.1f}H{cx + 6:.1f}' stroke='#222222' fill='none'/>"
            )
        if spec.get("annotate"):
            out.append(_text(cx, head - 4, f"{v:.2f}", size=9))
        ly = HEIGHT - BOTTOM + 14
        if tilt:
            out.append(_text(cx, ly, label, size=8, anchor="end",
                             extra=f"transform='rotate(-25 {cx:.1f} {ly:.1f})'"))  # fmt: skip
        else:
            out.append(_text(cx, ly, label, size=9))
    return out


def lines_svg(spec: dict[str, Any]) -> list[str]:
    series: Sequence[dict[str, Any]] = spec["series"]
    xs = [float(v) for v in spec["labels"]]
    high = max((y for s in series for y in s["y"]), default=1.0)
    ticks, y_of = _y_axis(spec, high)
    out = _frame(spec, ticks, y_of)
    lo, hi = math.log2(min(xs)), math.log2(max(xs))
    inner = WIDTH - LEFT - RIGHT - 40

    def x_of(x: float) -> float:
        return LEFT + 20 + (inner * (math.log2(x) - lo) / (hi - lo) if hi > lo else inner / 2)

    for x, name in zip(xs, spec["labels"], strict=True):
        out.append(_text(x_of(x), HEIGHT - BOTTOM + 14, str(name), size=10))
    for n, s in enumerate(series):
        color = PALETTE[n % len(PALETTE)]
        pts = [(x_of(x), y_of(y)) for x, y in zip(s["x"], s["y"], strict=True)]
        if len(pts) > 1:
            path = " ".join(
                f"{'M' if k == 0 else 'L'}{x:.1f} {y:.1f}" for k, (x, y) in enumerate(pts)
            )
            out.append(f"<path d='{path}' stroke='{color}' stroke-width='2' fill='none'/>")
        out += [f"<circle cx='{x:.1f}' cy='{y:.1f}' r='3.5' fill='{color}'/>" for x, y in pts]
        ly = TOP + 14 + 15 * n
        out.append(f"<rect x='{LEFT + 10}' y='{ly - 8}' width='12' height='8' fill='{color}'/>")
        out.append(_text(LEFT + 27, ly, s["label"], size=9, anchor="start"))
    return out


def groups_svg(spec: dict[str, Any]) -> list[str]:
    """Grouped bars: one group per label (x), one bar per series in it, a legend."""
    labels: Sequence[str] = spec["labels"]
    series: Sequence[dict[str, Any]] = spec["series"]
    high = max((y for s in series for y in s["y"]), default=1.0)
    ticks, y_of = _y_axis(spec, high)
    out = _frame(spec, ticks, y_of)
    slot = (WIDTH - LEFT - RIGHT) / max(len(labels), 1)
    w = slot * 0.8 / max(len(series), 1)
    for i, label in enumerate(labels):
        x0 = LEFT + slot * i + slot * 0.1
        for n, s in enumerate(series):
            v = float(s["y"][i])
            top = y_of(v)
            out.append(
                f"<rect x='{x0 + n * w:.1f}' y='{top:.1f}' width='{w * 0.9:.1f}' "
                f"height='{y_of(ticks[0]) - top:.1f}' fill='{PALETTE[n % len(PALETTE)]}'>"
                f"<title>{escape(s['label'])}, {escape(label)}: {_num(v)}</title></rect>"
            )
        out.append(_text(LEFT + slot * (i + 0.5), HEIGHT - BOTTOM + 14, label, size=10))
    for n, s in enumerate(series):
        ly = TOP + 14 + 15 * n
        color = PALETTE[n % len(PALETTE)]
        out.append(f"<rect x='{LEFT + 10}' y='{ly - 8}' width='12' height='8' fill='{color}'/>")
        out.append(_text(LEFT + 27, ly, s["label"], size=9, anchor="start"))
    return out


def chart_svg(spec: dict[str, Any]) -> str:
    """One chart as an SVG document."""
    draw = {"bars": bars_svg, "lines": lines_svg, "groups": groups_svg}[spec["kind"]]
    body = draw(spec)
    head = (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{HEIGHT}' "
        f"viewBox='0 0 {WIDTH} {HEIGHT}' role='img' aria-label={quoteattr(spec['alt'])}>"
    )
    return "\n".join([head, f"<title>{escape(spec['title'])}</title>", *body, "</svg>"]) + "\n"


def draw_all(specs: Sequence[dict[str, Any]], out_dir: Path) -> None:
    """Write each spec as ``out_dir/<file>``."""
    for spec in specs:
        write_text(out_dir / spec["file"], chart_svg(spec), root=out_dir)
