"""Markdown-safe text for the report: untrusted strings (model names, log lines, server output)
are escaped for inline use or fenced so they cannot change the document's structure."""

from __future__ import annotations

import re

# Every character that can open inline syntax (links, emphasis, code, HTML, tables, entities).
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>#!|~&])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

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


def md_inline(text: object) -> str:
    """Escape every character Markdown could read as syntax; newlines become spaces."""
    flat = _CONTROL.sub(" ", str(text)).replace("\r", " ").replace("\n", " ")
    return _INLINE_SPECIAL.sub(r"\\\1", flat)


def md_cell(text: object) -> str:
    """A table cell: inline-escaped (``|`` included), never empty."""
    out = md_inline(text)
    return out if out else " "


def md_code(text: object) -> str:
    """Inline code span whose backtick fence is longer than any backtick run inside."""
    flat = _CONTROL.sub(" ", str(text)).replace("\r", " ").replace("\n", " ")
    runs = [len(m) for m in re.findall(r"`+", flat)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_fence(lines: list[str] | str, info: str = "text") -> str:
    """A fenced code block that no line of ``lines`` can close early."""
    body = lines if isinstance(lines, str) else "\n".join(lines)
    body = _CONTROL.sub(" ", body.replace("\r\n", "\n").replace("\r", "\n"))
    runs = [len(m) for m in re.findall(r"`{3,}|~{3,}", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{info}\n{body}\n{fence}"


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
