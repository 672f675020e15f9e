"""The report's template context is typed (bench.report._context.ReportContext): every name the
report templates read is one of its fields, so a template cannot depend on an untyped key
(issue 22, item 8)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from jinja2 import meta, nodes

from bench.report._context import ReportContext
from bench.report._render import _env

TEMPLATES = Path(__file__).resolve().parents[2] / "reports" / "templates"
REPORT = ["report.md.j2", *(f"partials/{p.name}" for p in (TEMPLATES / "partials").glob("*.j2"))]
# names a template defines for itself or imports, not read from the context
LOCAL = {"loop"}


def undeclared(name: str) -> set[str]:
    env = _env()  # the renderer's own environment: its filters and options
    tree = env.parse((TEMPLATES / name).read_text(encoding="utf-8"))
    # a name the template sets itself ({% set %}, {% for %}, {% import ... as %}) in a block
    # that jinja's analysis treats as conditional is still the template's own
    stored = {n.name for n in tree.find_all(nodes.Name) if n.ctx == "store"}
    imported = {n.target for n in tree.find_all(nodes.Import)}
    return meta.find_undeclared_variables(tree) - LOCAL - stored - imported


def test_every_name_the_report_templates_read_is_a_typed_field() -> None:
    fields = {f.name for f in dataclasses.fields(ReportContext)}
    for name in REPORT:
        if name.startswith("partials/_compare"):
            continue  # the COMPARE.md template's macros: another context
        assert undeclared(name) <= fields, (name, sorted(undeclared(name) - fields))
