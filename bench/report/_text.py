"""Markdown-safe text for the report: untrusted strings (model names, log lines, server output)
are escaped for inline use or fenced so they cannot change the document's structure."""

from __future__ import annotations

# one escape for every document: bench/core/_markdown.py (these names stay importable here)
from bench.core import md_cell, md_code, md_fence, md_inline

__all__ = [
    "engine_label",
    "fmt",
    "md_cell",
    "md_code",
    "md_fence",
    "md_inline",
    "method_label",
    "p_is",
    "pct",
]

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
METHOD_NAMES = {
    "DFLASH": "DFlash",
    "MTP": "MTP",
    "DRAFT_MODEL": "draft model",
    "NGRAM": "n-gram",
    "NONE": "no speculation",
}


def engine_label(engine: str) -> str:
    """Display name of an engine (unknown engines keep their own name, escaped by callers)."""
    return ENGINE_NAMES.get(engine, engine)


def method_label(method: str) -> str:
    return METHOD_NAMES.get(method.upper(), method)


def fmt(value: float | None, digits: int = 2, unit: str = "") -> str:
    """A figure with fixed decimals, or 'unknown' where the data does not give it."""
    if value is None:
        return "unknown"
    return f"{value:.{digits}f}{unit}"


def pct(a: float, b: float) -> float:
    """The seed's percentage: (a / b - 1) * 100."""
    return (a / b - 1.0) * 100.0


#: below this a p-value prints as a bound: float arithmetic gives 0 for p < ~1e-16
P_FLOOR = 1e-15


def p_is(p: float) -> str:
    """A p-value after 'p': '=0.0123', or ' < 1e-15' where the arithmetic underflows
    ('p=0' read as a certainty)."""
    return f"={p:.3g}" if p >= P_FLOOR else f" < {P_FLOOR:.0e}"
