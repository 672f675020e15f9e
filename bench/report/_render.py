"""Artifacts -> report: read a matrix run's artifacts (or the seed's reference set), compute
every claim, draw the charts and render reports/templates/report.md.j2 into REPORT.md.

Entry point: ``render_report(artifacts_dir, out_dir) -> Path`` (the REPORT.md written).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.core import TOY_MODEL_BANNER, InputError, ensure_dir, sha256_file, write_text
from bench.report._charts import Chart, ChartSpec, draw, render_charts
from bench.report._claims import single_request, speculative, sweeps
from bench.report._compare import compare_hosts
from bench.report._context import build_context
from bench.report._frontier import frontier, frontier_chart
from bench.report._labels import Labelled, named_configs, run_label, run_place
from bench.report._load import load_artifacts
from bench.report._model import RunSet
from bench.report._reference import is_reference_dir, reference_runset
from bench.report._text import (
    engine_label,
    fmt,
    md_cell,
    md_code,
    md_fence,
    md_inline,
    method_label,
    p_is,
)

TEMPLATES = Path(__file__).resolve().parents[2] / "reports" / "templates"
TEMPLATE = "report.md.j2"


def load_runset(path: Path) -> RunSet:
    """An artifacts folder or a reference folder, whichever ``path`` is."""

    if is_reference_dir(path):
        return reference_runset(path)

    return load_artifacts(path)


def _named(ctx: Any) -> set[str]:
    rs = ctx.get("rs")
    return named_configs(rs) if isinstance(rs, RunSet) else set()


def _ctx_label(ctx: Any, obj: Labelled) -> str:
    """'vLLM + DFlash', naming the configuration where two share engine and method."""
    return md_inline(run_label(obj, _named(ctx)))


def _ctx_place(ctx: Any, obj: Labelled) -> str:
    """The engine, naming the configuration where two share engine and method."""
    return md_inline(run_place(obj, _named(ctx)))


def _ctx_method_name(ctx: Any, obj: Labelled) -> str:
    """The method, naming the configuration where two share engine and method (a sentence
    that already names the engine: 'On vLLM, draft model (self-draft) ...')."""
    name = method_label(obj.method)
    return md_inline(f"{name} ({obj.config})" if _ctx_names_config(ctx, obj) else name)


def _ctx_names_config(ctx: Any, obj: Labelled) -> bool:
    """Whether ``label`` already names the configuration."""
    return obj.config in _named(ctx)


def clause(text: object) -> str:
    """Inline text that a sentence of the template ends: its own closing full stop dropped
    (a note ending in a period gave '1.0..'), an ellipsis kept."""
    out = md_inline(text).rstrip()
    return out[:-1] if out.endswith(".") and not out.endswith("..") else out


def upfirst(text: str) -> str:
    """A sentence's first word capitalised ('draft model reached' -> 'Draft model reached')."""
    return text[:1].upper() + text[1:]


def way(n: int) -> str:
    """A heading's count of what is there: 'Four-way' only with four."""
    words = {2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight"}
    return f"{words.get(n, str(n))}-way"


def shell(argv: tuple[str, ...] | list[str]) -> str:
    """argv as a shell command, one option per continued line (like the seed's blocks)."""
    parts: list[str] = []
    for a in argv:
        q = a if a.startswith("<") and a.endswith(">") else shlex.quote(a)
        if a.startswith("--") and parts:
            parts.append(" \\\n  " + q)
        else:
            parts.append((" " if parts else "") + q)
    return "".join(parts)


def and_join(items: Any) -> str:
    """'a', 'a and b', 'a, b and c'."""
    xs = [str(x) for x in items]
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1] if xs else ""


def _bytecode_cache() -> Any:
    """Compiled templates cached on disk (compiling the partials costs more than rendering)."""
    # jinja2 loads only when a report is rendered, not on every CLI start
    import jinja2

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    # keyed by this module's source: a filter that becomes context-aware is compiled into the
    # template's code, so bytecode of an earlier filter set would call it wrongly
    code = sha256_file(Path(__file__))[:12]
    folder = base / "specbench" / "jinja" / code
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(folder)) if os.access(folder, os.W_OK) else None


@functools.cache
def _env() -> Any:
    # jinja2 loads only when a report is rendered, not on every CLI start
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        bytecode_cache=_bytecode_cache(),
        autoescape=False,  # Markdown, not HTML: untrusted text goes through md/cell/fence filters
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        label=jinja2.pass_context(_ctx_label),
        place=jinja2.pass_context(_ctx_place),
        mname=jinja2.pass_context(_ctx_method_name),
        upfirst=upfirst,
        p_is=p_is,
        clause=clause,
        way=way,
        md=md_inline,
        cell=md_cell,
        code=md_code,
        fence=md_fence,
        f=fmt,
        eng=lambda e: md_inline(engine_label(e)),
        meth=lambda m: md_inline(method_label(m)),
        shell=shell,
        andjoin=and_join,
    )
    env.tests["names_config"] = jinja2.pass_context(_ctx_names_config)
    return env


def render_markdown(rs: RunSet, charts: dict[str, Any], reference: RunSet | None = None) -> str:
    """The report text for ``rs`` (charts: role -> Chart, already drawn)."""

    ctx = dataclasses.replace(build_context(rs, reference), charts=charts)
    text: str = _env().get_template(TEMPLATE).render(**ctx.names())
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text


def render_report(
    artifacts_dir: Path, out_dir: Path | None = None, reference_dir: Path | None = None
) -> Path:
    """Render REPORT.md and its charts into ``out_dir`` (default: ``artifacts_dir/report``)."""

    artifacts_dir = Path(artifacts_dir)
    rs = load_runset(artifacts_dir)
    reference = load_runset(reference_dir) if reference_dir is not None else None
    if reference is not None and reference.source_kind != "reference":
        raise InputError(str(reference_dir), "not a reference set (no seed-published.json)")
    out = Path(out_dir) if out_dir is not None else artifacts_dir / "report"
    ensure_dir(out, "--out")
    single = speculative(single_request(rs.runs))
    named = named_configs(rs)
    front = frontier_chart(frontier(rs.runs), rs.simulated)  # issue 48
    charts = render_charts(
        out,
        single,
        sweeps(rs),
        rs.simulated,
        label=lambda r: run_label(r, named),
        extra=[front] if front is not None else [],
    )
    path = out / "REPORT.md"
    write_text(path, render_markdown(rs, charts, reference), root=out)
    return path


def render_comparison(run_dirs: Sequence[Path], out_dir: Path) -> Path:
    """COMPARE.md (and its chart) across hosts: the same experiment on every run folder."""
    cmp = compare_hosts([Path(d) for d in run_dirs])
    ensure_dir(out_dir, "--out")
    rows = [
        (f"{row.config} c{row.concurrency} {cell.host}", cell.run.decode)
        for row in cmp.rows
        for cell in row.cells
        if cell.run is not None and cell.run.decode.mean is not None
    ]
    charts: dict[str, Chart] = {}
    if rows:
        title = "Decode throughput per host (mean, 95% CI)"
        spec = ChartSpec(
            role="fleet_decode",
            file="fleet-decode.svg",
            alt="Decode throughput per host chart",
            title=f"SIMULATED: {title}" if cmp.simulated else title,
            kind="bars",
            ylabel="tok/s per stream",
            labels=[label for label, _ in rows],
            values=[f.mean or 0.0 for _, f in rows],
            errors=[
                max(0.0, f.ci95_high - (f.mean or 0.0)) if f.ci95_high is not None else 0.0
                for _, f in rows
            ],
        )
        draw([spec], out_dir)
        charts[spec.role] = spec.chart
    text: str = (
        _env()
        .get_template("compare.md.j2")
        .render(cmp=cmp, charts=charts, toy_banner=TOY_MODEL_BANNER)
    )
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    path = out_dir / "COMPARE.md"
    write_text(path, text, root=out_dir)
    return path
