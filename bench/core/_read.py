"""The reading layer: every file a user (or another person's run folder) hands specbench is read
through here. Whatever the file holds, the answer is the parsed document or an InputError (exit
2) that names the file and the reason: never a traceback, a hang or a silently misread value.

- text: exists, is a file, at most ``max_bytes``, UTF-8 (the offset of the first bad byte named);
- JSON: duplicate keys refused (naming the key), NaN and +-Infinity refused, nesting and
  integer size bounded;
- YAML: the safe loader, duplicate mapping keys refused, aliases, nesting and the size with
  aliases expanded bounded (a "billion laughs" document is refused before anything walks it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import yaml

from bench.core._errors import InputError, describe_yaml_error

#: the largest file read whole (payloads of long sweeps are a few MB)
MAX_BYTES: Final = 64 * 1024 * 1024
#: deeper nesting than any document of ours has (payloads: about 8)
MAX_DEPTH: Final = 64
#: YAML aliases in one document (our experiment files use none)
MAX_ALIASES: Final = 100
#: values of a YAML document with its aliases expanded (an experiment has a few hundred)
MAX_NODES: Final = 200_000


def read_text(path: Path | str, *, what: str = "file", max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of ``path``; InputError naming the path for a missing path, a folder, a
    file over ``max_bytes`` or bytes that are not UTF-8."""
    path = Path(path)
    try:
        if not path.exists():
            raise InputError(str(path), f"cannot read the {what}: no such file")
        if not path.is_file():
            raise InputError(str(path), f"cannot read the {what}: not a regular file")
        size = path.stat().st_size
        if size > max_bytes:
            raise InputError(
                str(path), f"cannot read the {what}: {size} bytes, over the {max_bytes} read"
            )
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(str(path), f"cannot read the {what}: {err.strerror or err}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = raw[err.start : err.start + 1].hex()
        raise InputError(
            str(path),
            f"cannot read the {what}: not UTF-8 text (byte 0x{bad} at offset {err.start})",
        ) from None


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
