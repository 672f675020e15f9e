"""The reading layer: every file a user (or another person's run folder) hands specbench is read
through here. Whatever the file holds, the answer is the parsed document or an InputError (exit
2) that names the file and the reason: never a traceback, a hang or a silently misread value.

- every file: exists and is a regular file (a folder, FIFO, socket or device is refused, and a
  FIFO never blocks the reader: it is opened without waiting), at most ``max_bytes``;
- text: UTF-8 (the offset of the first bad byte named), or lenient for logs other programs
  write; JSON Lines split at ``\n`` only;
- JSON: duplicate keys refused (naming the key), NaN and +-Infinity refused, nesting and
  integer size bounded;
- YAML: the safe loader, duplicate mapping keys refused, aliases, nesting and the size with
  aliases expanded bounded (a "billion laughs" document is refused before anything walks it);
- TOML: nesting bounded.

Nothing in bench/ reads a file any other way: tests/unit/test_one_reader.py fails on an
``open``, ``read_text``, ``read_bytes``, ``json.load(s)``, ``yaml.*load`` or ``tomllib.load``
outside this module (the few that parse an HTTP body or open a folder to lock it are listed
there, each with its reason).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, Final

import yaml

from bench.core._errors import InputError, describe_yaml_error

#: the largest file read whole (payloads of long sweeps are a few MB)
MAX_BYTES: Final = 64 * 1024 * 1024
#: deeper nesting than any document of ours has (payloads: about 8)
MAX_DEPTH: Final = 64
#: a server's log, read whole (a long run's log grows past MAX_BYTES)
MAX_LOG_BYTES: Final = 1024 * 1024 * 1024
#: YAML aliases in one document (our experiment files use none)
MAX_ALIASES: Final = 100
#: values of a YAML document with its aliases expanded (an experiment has a few hundred)
MAX_NODES: Final = 200_000


def _open_regular(path: Path, what: str) -> tuple[int, int]:
    """A read-only descriptor of ``path`` and its size, once it is known to be a regular file
    (opened without blocking: a FIFO or a device never hangs the reader); InputError naming the
    path for a missing path, a folder or any other kind of file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(str(path), f"cannot read the {what}: no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), f"cannot read the {what}: not a regular file") from None
    except OSError as err:
        raise InputError(str(path), f"cannot read the {what}: {err.strerror or err}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputError(str(path), f"cannot read the {what}: not a regular file")
    return fd, st.st_size


def _read_fd(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (a file that grows while it is read stops there)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        block = os.read(fd, min(left, 1 << 20))
        if not block:
            break
        chunks.append(block)
        left -= len(block)
    return b"".join(chunks)


def read_bytes(path: Path | str, *, what: str = "file", max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``; InputError naming the path for a missing path, a
    folder, a FIFO or device, or a file over ``max_bytes``."""
    path = Path(path)
    fd, size = _open_regular(path, what)
    try:
        if size > max_bytes:
            raise InputError(
                str(path), f"cannot read the {what}: {size} bytes, over the {max_bytes} read"
            )
        raw = _read_fd(fd, max_bytes + 1)
    except OSError as err:
        raise InputError(str(path), f"cannot read the {what}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:  # /proc files and the like say 0 bytes and hold more
        raise InputError(str(path), f"cannot read the {what}: over the {max_bytes} bytes read")
    return raw


def read_head(path: Path | str, size: int, *, what: str = "file") -> bytes:
    """The first ``size`` bytes of the regular file ``path`` (fewer when it is shorter): a
    header of a file too large to read whole (a checkpoint's safetensors)."""
    path = Path(path)
    fd, _ = _open_regular(path, what)
    try:
        return _read_fd(fd, size)
    except OSError as err:
        raise InputError(str(path), f"cannot read the {what}: {err.strerror or err}") from None
    finally:
        os.close(fd)


def sha256_file(path: Path | str, *, what: str = "file") -> str:
    """sha256 of the regular file ``path``, read in blocks (any size)."""
    path = Path(path)
    fd, _ = _open_regular(path, what)
    h = hashlib.sha256()
    try:
        while block := os.read(fd, 1 << 20):
            h.update(block)
    except OSError as err:
        raise InputError(str(path), f"cannot read the {what}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    return h.hexdigest()


def sha256_ranges(
    path: Path | str, ranges: list[tuple[int, int, bytes]], *, what: str = "file"
) -> list[str]:
    """One sha256 per ``(begin, end, prefix)`` byte range of the regular file ``path``, each
    over ``prefix`` then the range's bytes, read in blocks (a tensor of a checkpoint too large
    to read whole); InputError where a range runs past the end of the file."""
    path = Path(path)
    fd, size = _open_regular(path, what)
    out: list[str] = []
    try:
        for begin, end, prefix in ranges:
            if not 0 <= begin <= end <= size:
                raise InputError(str(path), f"the {what} ends before byte {end}")
            h = hashlib.sha256(prefix)
            os.lseek(fd, begin, os.SEEK_SET)
            left = end - begin
            while left > 0 and (block := os.read(fd, min(left, 1 << 20))):
                h.update(block)
                left -= len(block)
            out.append(h.hexdigest())
    except OSError as err:
        raise InputError(str(path), f"cannot read the {what}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    return out


def read_text(
    path: Path | str, *, what: str = "file", max_bytes: int = MAX_BYTES, lenient: bool = False
) -> str:
    """The UTF-8 text of ``path``; InputError naming the path for a missing path, a folder, a
    file over ``max_bytes`` or bytes that are not UTF-8. ``lenient``: a log another program
    wrote, whose bad bytes become U+FFFD instead of a refusal."""
    path = Path(path)
    raw = read_bytes(path, what=what, max_bytes=max_bytes)
    if lenient:
        return raw.decode("utf-8", errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = raw[err.start : err.start + 1].hex()
        raise InputError(
            str(path),
            f"cannot read the {what}: not UTF-8 text (byte 0x{bad} at offset {err.start})",
        ) from None


def read_tail(path: Path | str, max_bytes: int, *, what: str = "log") -> str:
    """The last ``max_bytes`` of a log another program writes (lenient UTF-8): a server's log
    may grow past what is read whole."""
    path = Path(path)
    fd, size = _open_regular(path, what)
    try:
        os.lseek(fd, max(0, size - max_bytes), os.SEEK_SET)
        raw = _read_fd(fd, max_bytes)
    except OSError as err:
        raise InputError(str(path), f"cannot read the {what}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    return raw.decode("utf-8", errors="replace")


def read_log(path: Path | str) -> str:
    """A server's log, whole (up to MAX_LOG_BYTES), its bad bytes as U+FFFD."""
    return read_text(path, what="server log", max_bytes=MAX_LOG_BYTES, lenient=True)


def exists(path: Path | str) -> bool:
    """Whether anything is at ``path`` (a dangling link counts: it is there and unreadable).
    An optional file is absent only when this is False; anything else there is read, and
    refused if it is not a regular file."""
    return os.path.lexists(path)


def _depth(obj: Any) -> int:
    """Nesting depth of a parsed document, without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
    return deepest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a number specbench accepts")


class _Refused(ValueError):
    """A JSON or YAML document the layer refuses (the message says why)."""


def parse_json(text: str | bytes, where: str) -> Any:
    """``text`` as JSON, or InputError(where, reason): duplicate keys, NaN/Infinity, nesting
    deeper than MAX_DEPTH, integers past Python's digit limit, malformed JSON."""
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _Refused as err:
        raise InputError(where, f"cannot read JSON: {err}") from None
    except RecursionError:
        raise InputError(where, f"cannot read JSON: nested deeper than {MAX_DEPTH}") from None
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError, huge integers
        raise InputError(where, f"cannot read JSON: {err}") from None
    if _depth(data) > MAX_DEPTH:
        raise InputError(where, f"cannot read JSON: nested deeper than {MAX_DEPTH}")
    return data


def read_json(path: Path, *, what: str = "JSON file", max_bytes: int = MAX_BYTES) -> Any:
    return parse_json(read_text(path, what=what, max_bytes=max_bytes), str(path))


def read_optional_json(path: Path, *, what: str = "JSON file") -> Any | None:
    """``read_json`` of an optional file: None when nothing is there; a folder, a FIFO or a
    file that is not JSON is refused (never taken for absent)."""
    return read_json(path, what=what) if exists(path) else None


#: the safetensors format's own bound on its JSON header (safetensors/src/tensor.rs MAX_HEADER_SIZE)
MAX_SAFETENSORS_HEADER: Final = 100_000_000


def read_safetensors_header(path: Path) -> tuple[dict[str, Any], int]:
    """The JSON header of a ``.safetensors`` file and where its data begins, without reading the
    tensors: an 8-byte little-endian length, then that many bytes of JSON (a mapping)."""
    head = read_head(path, 8, what="safetensors file")
    size = int.from_bytes(head, "little") if len(head) == 8 else -1
    if not 0 < size <= MAX_SAFETENSORS_HEADER:
        raise InputError(str(path), "not a safetensors file: no header length a header can have")
    raw = read_head(path, 8 + size, what="safetensors file")[8:]
    if len(raw) != size:
        raise InputError(str(path), "not a safetensors file: it ends inside its header")
    header = parse_json(raw, str(path))
    if not isinstance(header, dict):
        raise InputError(str(path), "not a safetensors file: its header is not a JSON object")
    return header, 8 + size


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """``text`` as TOML, or InputError(where, reason)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as err:
        raise InputError(where, f"not valid TOML: {err}") from None
    if _depth(data) > MAX_DEPTH:
        raise InputError(where, f"not valid TOML: nested deeper than {MAX_DEPTH}")
    return data


def json_lines(text: str) -> list[tuple[int, str]]:
    """The records of a JSON Lines text, numbered from 1: records end at ``\\n`` only (the
    JSON Lines rule), so U+2028, U+0085 or a lone ``\\r`` inside a string stay in it; a
    ``\\r`` before the ``\\n`` is dropped, and blank lines are skipped."""
    out: list[tuple[int, str]] = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if line.strip(" \t"):
            out.append((n, line))
    return out


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and bounds aliases and nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(f"more than {MAX_ALIASES} aliases")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH}")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                dup = False
            if dup:
                line = key_node.start_mark.line + 1
                raise _Refused(f"duplicate key {key!r} at line {line}")
            if not isinstance(key, (list, dict)):
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes of the document once every alias is expanded (shared nodes counted each time
    they are reached, computed once each): what a reader walking the data would visit."""
    key = id(node)
    if key not in memo:
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(_expanded_size(child, memo) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
        memo[key] = total
    return memo[key]


def parse_yaml(text: str, where: str) -> Any:
    """``text`` as one YAML document (safe types only), or InputError(where, reason)."""
    try:
        # the reader checks the characters as it is made: a control character (NUL, ...)
        # raises here, before any parsing
        loader = _StrictLoader(text)
    except yaml.YAMLError as err:
        raise InputError(where, f"not valid YAML: {describe_yaml_error(err)}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}) > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES} values once its aliases are expanded")
        return loader.construct_document(node)
    except _Refused as err:
        raise InputError(where, f"not valid YAML: {err}") from None
    except RecursionError:
        raise InputError(where, f"not valid YAML: nested deeper than {MAX_DEPTH}") from None
    except yaml.YAMLError as err:
        raise InputError(where, f"not valid YAML: {describe_yaml_error(err)}") from None
    except ValueError as err:  # e.g. an integer past Python's digit limit
        raise InputError(where, f"not valid YAML: {err}") from None
    finally:
        loader.dispose()


def read_yaml(path: Path, *, what: str = "YAML file", max_bytes: int = MAX_BYTES) -> Any:
    return parse_yaml(read_text(path, what=what, max_bytes=max_bytes), str(path))
