"""SHA256SUMS, the manifest of a run folder and of a published bundle, in ``sha256sum`` format
(``<64 hex>  <relative path>``, ``sha256sum -c`` checks it). One reader for every command that
reads one (matrix resume, report, compare, publish, verify-bundle): a line that is not an entry,
a name that leaves the folder or a file listed twice is refused, naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final

from bench.core import InputError, read_text

SUMS: Final = "SHA256SUMS"
_ENTRY = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)")


def _safe_name(name: str) -> bool:
    """A path inside the folder: relative, no '..', no empty part, no backslash or control."""
    parts = PurePosixPath(name).parts
    return (
        bool(parts)
        and not name.startswith("/")
        and not any(p in ("", ".", "..") for p in parts)
        and not any(c == "\\" or ord(c) < 32 or ord(c) == 127 for c in name)
    )


def parse_sums(text: str, where: str) -> dict[str, str]:
    """Relative path -> lowercase sha256 of every entry of a SHA256SUMS text; InputError naming
    ``where`` and the line for anything else."""
    out: dict[str, str] = {}
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        m = _ENTRY.fullmatch(line)
        if m is None:
            raise InputError(f"{where}: line {n}", f"not '<sha256>  <file>': {line[:80]!r}")
        name = m.group(2)
        if not _safe_name(name):
            raise InputError(f"{where}: line {n}", f"{name[:80]!r} is not a file inside the folder")
        if name in out:
            raise InputError(f"{where}: line {n}", f"{name!r} is listed twice")
        out[name] = m.group(1).lower()
    return out


def read_sums(path: Path) -> dict[str, str]:
    """A SHA256SUMS file as ``parse_sums`` reads it (a folder or binary: InputError)."""
    return parse_sums(read_text(path, what=SUMS), str(path))


def sums_text(entries: Mapping[str, str]) -> str:
    """The SHA256SUMS text of ``entries`` (path -> sha256), sorted by path."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(entries.items()))
