"""Free text into Markdown, one way for every document specbench writes (plan, report, compare,
publish): untrusted strings (model names, reasons, log lines, server output) are escaped for
inline use, or fenced, so that they cannot change a document's structure.

Characters that would act without being seen neither pass nor vanish: control characters
(C0 but tab and line breaks, DEL, C1), bidirectional overrides and isolates (a "Trojan
Source" heading reads one way and says another), zero-width characters and the Unicode line
and paragraph separators are written as a visible ``<U+202E>``. A line break in inline text is
a space (it is whitespace, and a table row or a heading cannot hold one).
"""

from __future__ import annotations

import re

# Every character that can open inline syntax (links, emphasis, code, HTML, tables, entities).
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>#!|~&])")
#: characters shown by their code point: C0 controls but tab/LF/CR, DEL, C1 controls, the bidi
#: marks, embeddings, overrides and isolates, zero-width characters, line/paragraph separators
_HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)
_BREAKS = re.compile(r"\r\n|[\r\n\t]")
_MARK = "\x00U+{:04X}\x01"  # placeholder, escaped as a whole after the inline escape


def _shown(text: str) -> str:
    """``text`` with every hidden character as a placeholder for its code point."""
    return _HIDDEN.sub(lambda m: _MARK.format(ord(m.group())), text)


def visible(text: object) -> str:
    """``text`` with every hidden character written as ``<U+XXXX>`` (no Markdown escape)."""
    return _shown(str(text)).replace("\x00", "<").replace("\x01", ">")


def md_inline(text: object) -> str:
    """Escape every character Markdown could read as syntax; line breaks and tabs become
    spaces; hidden characters are shown as ``\\<U+XXXX\\>``."""
    flat = _BREAKS.sub(" ", _shown(str(text)))
    escaped = _INLINE_SPECIAL.sub(r"\\\1", flat)
    return escaped.replace("\x00", "\\<").replace("\x01", "\\>")


def md_cell(text: object) -> str:
    """A table cell: inline-escaped (``|`` included), never empty."""
    out = md_inline(text)
    return out if out else " "


def md_code(text: object) -> str:
    """Inline code span whose backtick fence is longer than any backtick run inside."""
    flat = _BREAKS.sub(" ", visible(text))
    runs = [len(m) for m in re.findall(r"`+", flat)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_fence(lines: list[str] | str, info: str = "text") -> str:
    """A fenced code block that no line of ``lines`` can close early."""
    body = lines if isinstance(lines, str) else "\n".join(lines)
    body = visible(body.replace("\r\n", "\n").replace("\r", "\n"))
    runs = [len(m) for m in re.findall(r"`{3,}|~{3,}", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{info}\n{body}\n{fence}"
