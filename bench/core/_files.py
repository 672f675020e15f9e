"""The writing layer: every file specbench writes or deletes goes through here.

- **Inside its folder.** ``root`` is the folder a command was given (``--out``); a path is taken
  relative to it, may not climb out of it (``..``, absolute), and no folder between ``root`` and
  the file may be a symbolic link: each is opened with ``O_NOFOLLOW`` from the one above it, so
  a link planted inside the output cannot direct a write or a delete elsewhere (a link in the
  last place is replaced or removed itself, never its target). Without ``root`` the file's own
  folder is the root.
- **Atomic.** A temporary file beside the target, written, fsynced, renamed over it (and the
  folder fsynced): a reader sees the old file or the whole new one, never a half-written one, and
  a failed write (a full disk) leaves the old file and no temporary behind.
- **Errors, not tracebacks.** A link inside the output is the user's input (exit 2, the path); a
  disk that is full or read-only is a WriteError (exit 1) naming the file and the cause.
- **Checked first.** ``check_new_output`` / ``check_output_file`` refuse an output that is an
  input, is inside one, or is not empty, before anything is written; ``made_dirs`` removes on
  failure the folders a command created.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from bench.core._errors import InputError, SpecbenchError


class WriteError(SpecbenchError):
    """The host could not take a write (disk full, read-only, permissions). Exit code 1: the
    run stops; every file written before is intact."""

    exit_code = 1

    def __init__(self, path: Path | str, err: OSError) -> None:
        self.path = str(path)
        self.errno = err.errno
        cause = os.strerror(err.errno) if err.errno else str(err)
        hint = " (the disk is full: free space, then run the command again)" if self.full else ""
        super().__init__(f"{path}: cannot write: {cause}{hint}")

    @property
    def full(self) -> bool:
        return self.errno in (errno.ENOSPC, errno.EDQUOT)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _parts(path: Path, root: Path | None) -> tuple[Path, tuple[str, ...]]:
    """``root`` and the names from it down to ``path``; refuses a path that leaves ``root``."""
    if root is None:
        return path.parent, (path.name,)
    try:
        rel = path.absolute().relative_to(root.absolute())
    except ValueError:
        raise InputError(str(path), f"outside the output folder {root}") from None
    parts = rel.parts
    if not parts or rel.is_absolute() or any(p in ("", ".", "..") or "\x00" in p for p in parts):
        raise InputError(str(path), f"not a file name inside the output folder {root}")
    return root, parts


def _open_dir(root: Path, names: Iterable[str], create: bool, shown: Path) -> int:
    """A descriptor of ``root/names...``, each step opened without following a link."""
    if create:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, _DIR_FLAGS)
    here = root
    try:
        for name in names:
            here = here / name
            if create:
                with suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
            try:
                sub = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(here):
                    raise InputError(
                        str(here),
                        f"is a symbolic link inside the output folder {root}: specbench does "
                        f"not write through links (writing {shown})",
                    ) from None
                raise
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_bytes(path: Path, data: bytes, *, root: Path | None = None) -> None:
    """Write ``data`` to ``path`` (inside ``root``) so that a reader sees either the old file or
    the whole new one; folders below ``root`` are created."""
    base, parts = _parts(path, root)
    try:
        dfd = _open_dir(base, parts[:-1], create=True, shown=path)
    except OSError as err:
        raise WriteError(path, err) from None
    name = parts[-1]
    tmp = f".{name[:64]}.{secrets.token_hex(4)}.tmp"
    try:
        # mode 0666 less the umask, as a plain open() gives (a published bundle is readable)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=dfd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        with suppress(OSError):  # some filesystems cannot fsync a folder; the rename is done
            os.fsync(dfd)
    except BaseException as err:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        if isinstance(err, OSError):
            raise WriteError(path, err) from None
        raise
    finally:
        os.close(dfd)


def write_text(path: Path, text: str, *, root: Path | None = None) -> None:
    write_bytes(path, text.encode("utf-8"), root=root)


def open_stream(path: Path) -> BinaryIO:
    """``path`` opened for a stream another process writes live (a server's log): created or
    emptied, never through a link in its place (the one thing a live file cannot be: atomic)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.fdopen(os.open(path, flags, 0o666), "wb")
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(
                str(path), "is a symbolic link: specbench does not write through links"
            ) from None
        raise WriteError(path, err) from None


def remove_file(path: Path, *, root: Path | None = None) -> bool:
    """Delete ``path`` (inside ``root``; a link is removed, never its target). False when it
    was not there."""
    base, parts = _parts(path, root)
    try:
        dfd = _open_dir(base, parts[:-1], create=False, shown=path)
    except FileNotFoundError:
        return False
    except OSError as err:
        raise WriteError(path, err) from None
    try:
        os.unlink(parts[-1], dir_fd=dfd)
        return True
    except FileNotFoundError:
        return False
    except OSError as err:
        raise WriteError(path, err) from None
    finally:
        os.close(dfd)


def remove_tree(path: Path, *, root: Path) -> None:
    """Delete the folder ``path`` inside ``root`` and everything in it (links inside are removed,
    never followed: shutil.rmtree's fd-based walk)."""
    base, parts = _parts(path, root)
    here = base.joinpath(*parts)
    if here.is_symlink():
        remove_file(here, root=root)
    elif here.exists():
        try:
            shutil.rmtree(here)
        except OSError as err:
            raise WriteError(path, err) from None


#: the longest path Linux takes (PATH_MAX); a name's own bound comes from its filesystem
PATH_MAX = 4096
NAME_MAX = 255


def _existing_ancestor(path: Path) -> Path:
    """The nearest folder above ``path`` (or ``path`` itself) that exists."""
    here = path.absolute()
    while not os.path.lexists(here) and here != here.parent:
        here = here.parent
    return here


def check_names(path: Path, where: str) -> None:
    """Refuse (InputError naming ``where``) a path the system cannot create: longer than
    PATH_MAX, a name longer than its filesystem takes, a NUL. Checked before anything else
    touches the path: on such a path even ``exists()`` raises."""
    text = str(path.absolute())
    if "\x00" in text:
        raise InputError(where, "a path with a NUL character")
    if len(os.fsencode(text)) >= PATH_MAX:
        raise InputError(
            where, f"a path of {len(os.fsencode(text))} bytes: the system takes {PATH_MAX - 1}"
        )
    try:
        limit = os.pathconf(_existing_ancestor(path), "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = NAME_MAX
    for part in path.absolute().parts[1:]:
        if len(os.fsencode(part)) > limit:
            raise InputError(
                where,
                f"the name {part[:24]!r}... is {len(os.fsencode(part))} bytes: its filesystem "
                f"takes {limit}",
            )


def _probe(folder: Path, where: str) -> None:
    """Something can really be created in ``folder`` (a read-only or pseudo filesystem answers
    os.access yes to root): a hidden folder made and removed at once."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".specbench-probe-", dir=folder))
    except OSError as err:
        raise InputError(
            where, f"nothing can be created in {folder}: {err.strerror or err}"
        ) from None


def ensure_dir(path: Path, where: str) -> Path:
    """Create the folder ``path`` (and its parents) or raise InputError naming ``where``."""

    check_names(path, where)
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

    check_names(path, where)
    if path.is_dir():
        raise InputError(where, f"{path} is a folder, not a file")
    ensure_dir(path.parent, where)
    if not os.access(path.parent, os.W_OK):
        raise InputError(where, f"folder {path.parent} is not writable")
    _probe(path.parent, where)
    return path


def links_inside(root: Path) -> list[Path]:
    """Every symbolic link under ``root`` (not followed), sorted: a run folder holds none, so
    one found there points a read or a write somewhere else."""
    found: list[Path] = []
    for here, dirs, files in os.walk(root, followlinks=False):
        found += [Path(here) / n for n in (*dirs, *files) if os.path.islink(Path(here) / n)]
    return sorted(found)


def _within(inner: Path, outer: Path) -> bool:
    inner, outer = inner.resolve(), outer.resolve()
    return inner == outer or outer in inner.parents


def check_not_inside(out: Path, where: str, inputs: Iterable[Path]) -> None:
    """Refuse an output that is one of the ``inputs`` or inside one (links resolved)."""
    for src in inputs:
        if out.resolve() == src.resolve():
            raise InputError(
                where, f"{out} is the input {src}: writing it would destroy what is read"
            )
        if _within(out, src):
            raise InputError(
                where,
                f"{out} is inside the input {src}: give an output folder apart from what is read",
            )


def check_new_output(out: Path, where: str, inputs: Iterable[Path] = ()) -> None:
    """Before any write: ``out`` is a folder to create, or an empty one, apart from ``inputs``."""
    check_names(out, where)
    if out.is_symlink():
        raise InputError(where, f"{out} is a symbolic link: give the folder itself")
    if out.exists() and not out.is_dir():
        raise InputError(where, f"{out} exists and is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        raise InputError(where, f"{out} exists and is not empty")
    check_not_inside(out, where, inputs)
    _check_parent(out, where)


def check_output_file(path: Path, where: str, inputs: Iterable[Path] = ()) -> None:
    """Before any write: ``path`` can become a file (not a folder, not an input, folder there or
    creatable)."""
    check_names(path, where)
    if path.is_dir():
        raise InputError(where, f"{path} is a folder, not a file")
    check_not_inside(path, where, inputs)
    _check_parent(path, where)


def check_output_dir(out: Path, where: str, inputs: Iterable[Path] = ()) -> None:
    """Before any write: ``out`` can be (or is) a folder apart from ``inputs`` (it may hold
    files: the command says which of them it replaces)."""
    check_names(out, where)
    if out.exists() and not out.is_dir():
        raise InputError(where, f"{out} exists and is a file, not a folder")
    check_not_inside(out, where, inputs)
    _check_parent(out, where)


def _check_parent(path: Path, where: str) -> None:
    parent = _existing_ancestor(path.absolute().parent)
    if not parent.is_dir():
        raise InputError(where, f"{parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(where, f"folder {parent} is not writable")
    _probe(parent, where)


@contextmanager
def made_dirs(path: Path) -> Iterator[Path]:
    """Create ``path`` and the parents it lacks; on an error inside the block, remove the ones
    made here (with what was written into them), so a failed command leaves nothing behind."""
    missing: list[Path] = []
    here = path.absolute()
    while not here.exists():
        missing.append(here)
        here = here.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WriteError(path, err) from None
    try:
        yield path
    except BaseException:
        if missing:
            shutil.rmtree(missing[-1], ignore_errors=True)
        raise
