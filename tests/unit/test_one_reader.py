"""One way to read a file (issue 47, class 1): nothing in bench/ opens, reads or parses a file
except through the reading layer (bench/core/_read.py), which refuses folders, FIFOs, devices,
binaries, oversized files, deep nesting and YAML alias bombs with exit 2 naming the file.

The check walks the syntax tree of every module: a call of ``open``, ``.open``,
``.read_text``, ``.read_bytes``, ``.readline(s)``, ``.model_validate_json``, ``json.load(s)``,
``yaml.*load*``, ``tomllib.load(s)`` or ``pickle.load(s)`` anywhere else fails it, unless it is
listed in ``ALLOWED`` below with the reason it is not a file read (an HTTP body, a folder opened
to lock it, a file written). A new reader has to go through the layer or argue its case here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import bench

pytestmark = pytest.mark.unit

BENCH = Path(bench.__file__).resolve().parent  # the package under test, wherever it is
LAYER = {"core/_read.py"}

#: attribute calls that read (or open for reading) whatever object they are called on
READ_METHODS = {"open", "read_text", "read_bytes", "readline", "readlines", "model_validate_json"}
#: module functions that parse a file or a file's text
PARSERS = {
    "json": {"load", "loads"},
    "yaml": {"load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all"},
    "tomllib": {"load", "loads"},
    "pickle": {"load", "loads"},
}

HTTP = "an HTTP body from a server, not a file: a bad one marks the request, never exit 2"
#: (module under bench/, enclosing function) -> (the calls allowed there, why)
ALLOWED: dict[tuple[str, str], tuple[set[str], str]] = {
    ("core/_files.py", "_open_dir"): ({"os.open"}, "the writing layer opens folders to write"),
    ("core/_files.py", "write_bytes"): ({"os.open"}, "the writing layer's temporary file"),
    ("core/_files.py", "open_stream"): ({"os.open"}, "a log file created for a server to write"),
    ("schema/_pins.py", "locked"): ({"os.open"}, "a folder opened to hold a lock on it"),
    ("matrix/_resume.py", "hold_folder"): ({"os.open"}, "a folder opened to hold a lock"),
    ("engines/upstream.py", "ensure_source"): ({".open"}, "a lock file opened to hold a lock"),
    ("report/_bundle.py", "_tarball"): ({"tarfile.open"}, "the tarball written, in memory"),
    ("report/_bundle.py", "_safe_extract"): (
        {"tarfile.open"},
        "a bundle's tarball, which verify_bundle has found a regular file: tarfile reads it "
        "member by member (each checked before extraction)",
    ),
    ("machine/_sampler.py", "start"): ({".open"}, "NvmlReader.open: NVML, not a file"),
    ("measure/_client.py", "request"): ({".open"}, "a connection opened"),
    ("measure/_loop.py", "_server_prompt_count"): ({".open"}, "a connection opened"),
    ("measure/_loop.py", "_one_iteration"): ({".open"}, "connections opened"),
    ("measure/_loop.py", "_probe"): ({"json.loads"}, HTTP),
    ("measure/_loop.py", "_server_version"): ({"json.loads"}, HTTP),
    ("measure/_loop.py", "_request_id"): ({"json.loads"}, HTTP),
    ("measure/_request.py", "engine_chat_template"): ({"json.loads"}, HTTP),
    ("measure/_probes.py", "parse_logprobs"): ({"json.loads"}, HTTP),
    ("measure/_probes.py", "plain_answer"): ({"json.loads"}, HTTP),
    ("emulator/__main__.py", "verification"): (
        {"json.loads"},
        "the emulator's own --speculative-config argument, not a file",
    ),
    ("engines/_speculation.py", "_vllm_spec"): (
        {"json.loads"},
        "a configuration's --speculative-config flag value, not a file",
    ),
    ("engines/_speculation.py", "_python_dict"): (
        {"json.loads"},
        "a dict printed in an engine's log line, already read through the layer",
    ),
    ("measure/_requestacc.py", "spec_tokens_of"): ({"json.loads"}, HTTP),
    ("emulator/runner.py", "truth"): ({"json.loads"}, HTTP),
}


def _call_name(call: ast.Call) -> str | None:
    """``open``, ``json.loads``, ``.read_text`` (a method on any object), or None."""
    fn = call.func
    if isinstance(fn, ast.Name):
        return "open" if fn.id == "open" else None
    if not isinstance(fn, ast.Attribute):
        return None
    owner = fn.value.id if isinstance(fn.value, ast.Name) else None
    if owner in PARSERS and fn.attr in PARSERS[owner]:
        return f"{owner}.{fn.attr}"
    if fn.attr in READ_METHODS:
        return f"{owner}.{fn.attr}" if owner in ("os", "io", "codecs", "tarfile") else f".{fn.attr}"
    return None


def _calls(tree: ast.AST) -> Iterator[tuple[str, str, int]]:
    """(enclosing function, call name, line) for every reading call in ``tree``."""

    def walk(node: ast.AST, func: str) -> Iterator[tuple[str, str, int]]:
        for child in ast.iter_child_nodes(node):
            is_def = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            inner = child.name if is_def else func
            if isinstance(child, ast.Call) and (name := _call_name(child)) is not None:
                yield func, name, child.lineno
            yield from walk(child, inner)

    yield from walk(tree, "<module>")


def found() -> list[tuple[str, str, str, int]]:
    out = []
    for path in sorted(BENCH.rglob("*.py")):
        rel = path.relative_to(BENCH).as_posix()
        if rel in LAYER:
            continue
        for func, name, line in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            out.append((rel, func, name, line))
    return out


def test_every_file_is_read_through_the_reading_layer() -> None:
    bypass = [
        f"bench/{rel}:{line} {name} in {func}()"
        for rel, func, name, line in found()
        if name not in ALLOWED.get((rel, func), (set(), ""))[0]
    ]
    assert not bypass, (
        "read these through bench.core (read_text, read_bytes, read_json, read_yaml, ...), or "
        "list the call in ALLOWED with the reason it is not a file read:\n" + "\n".join(bypass)
    )


def test_every_allowed_call_is_still_there() -> None:
    """An entry whose call went away is dropped, so the list never vouches for a new one."""
    seen = {(rel, func, name) for rel, func, name, _ in found()}
    stale = [
        f"{rel} {func}: {name}"
        for (rel, func), (names, _) in ALLOWED.items()
        for name in names
        if (rel, func, name) not in seen
    ]
    assert not stale, stale


def test_the_check_sees_each_kind_of_reader() -> None:
    """The check itself can fail: each spelling of a read is found."""
    src = (
        "def f(p):\n"
        "    open(p)\n    p.read_text()\n    p.read_bytes()\n    json.loads(p)\n"
        "    yaml.safe_load(p)\n    tomllib.loads(p)\n    M.model_validate_json(p)\n"
        "    p.open('rb')\n    os.open(p, 0)\n    fh.readlines()\n"
    )
    names = [name for _, name, _ in _calls(ast.parse(src))]
    assert names == [
        "open", ".read_text", ".read_bytes", "json.loads", "yaml.safe_load", "tomllib.loads",
        ".model_validate_json", ".open", "os.open", ".readlines",
    ]  # fmt: skip
