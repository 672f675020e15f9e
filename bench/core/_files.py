"""Atomic file writes: write to a temporary file in the same folder, fsync, rename."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from bench.core._errors import InputError


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a published artifact gets the mode the umask allows,
        # as a plain open() would have given it
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask: from /proc (Linux; no race with other threads), else by setting it
    and putting it back (there is no getter)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ensure_dir(path: Path, where: str) -> Path:
    """Create the folder ``path`` (and its parents) or raise InputError naming ``where``."""

    if path.exists() and not path.is_dir():
        raise InputError(where, f"{path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(where, f"cannot create folder {path}: {err.strerror or err}") from None
    return path


def ensure_writable_file(path: Path, where: str) -> Path:
    """Check up front that ``path`` can be written (its folder exists or can be made, and it is
    not a folder), so that a long run does not fail only when it saves its result."""

    if path.is_dir():
        raise InputError(where, f"{path} is a folder, not a file")
    ensure_dir(path.parent, where)
    if not os.access(path.parent, os.W_OK):
        raise InputError(where, f"folder {path.parent} is not writable")
    return path
