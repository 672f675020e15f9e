"""Each log pattern the run's verdict leans on matches the line the pinned engine really prints:
the format string at the adapter's cited ``file:line`` is taken from the pinned source, filled in
with sample values and wrapped in the engine's own record format, and the pattern must match it
(issue 22, items 2 and 3). The emulator's lines are not involved: both sides of this test are
upstream's text and our pattern.

vLLM records: ``_FORMAT`` and ``_DATE_FORMAT`` of vllm/logger.py:28-33, a multi-line message
carrying the prefix on every line (NewLineFormatter, logging_utils/formatter.py:74-77), for the
API server, ``EngineCore_DP0`` and ``Worker_TP1`` processes. SGLang records: the format of
``configure_logger`` (srt/utils/common.py:2365) with the `` TP0`` prefix schedulers carry.
"""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path
from string import Template
from types import SimpleNamespace
from typing import Any

from bench.emulator import formats
from bench.engines import LogPattern, get_engine

VLLM_PROCESSES = ("APIServer", "EngineCore_DP0", "Worker_TP1")


def statement_at(path: Path, line: int) -> ast.stmt:
    """The innermost statement of ``path`` that spans ``line``."""
    best: ast.stmt | None = None
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        spans = isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or 0)
        if spans and (best is None or node.lineno >= best.lineno):
            best = node  # type: ignore[assignment]
    assert best is not None, f"{path}:{line}: no statement"
    return best


def message_expr(stmt: ast.stmt) -> ast.expr:
    """The message a logging statement or a ``msg = ...`` / ``msg += ...`` builds."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args:
        return stmt.value.args[0]
    if isinstance(stmt, ast.Assign | ast.AugAssign):
        return stmt.value
    raise AssertionError(f"line {stmt.lineno}: not a log call or a message assignment")


def render(root: Path, source: str, names: dict[str, Any], args: tuple[Any, ...] = ()) -> str:
    """The message upstream builds at ``source`` ("path.py:line"), its names bound to sample
    values (%-style arguments in ``args``)."""
    file, line = source.rsplit(":", 1)
    expr = message_expr(statement_at(root / file, int(line)))
    text = eval(
        compile(ast.Expression(expr), source, "eval"), {"__builtins__": {"len": len}}, names
    )
    assert isinstance(text, str), source
    return text % args if args else text


def _upstream_literal(path: Path, name: str) -> ast.expr:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node.value
    raise AssertionError(f"{name} not in {path}")


def vllm_records(root: Path, message: str, fileinfo: str) -> list[str]:
    """``message`` as vLLM logs it from each process: its record format, read from the pinned
    logger (the log prefix env var left empty), and its newline handling."""
    env = SimpleNamespace(VLLM_LOGGING_PREFIX="")
    fmt_expr = _upstream_literal(root / "vllm/logger.py", "_FORMAT")
    fmt = eval(compile(ast.Expression(fmt_expr), "logger.py", "eval"), {}, {"envs": env})
    datefmt = ast.literal_eval(_upstream_literal(root / "vllm/logger.py", "_DATE_FORMAT"))
    out = []
    for process in VLLM_PROCESSES:
        record = logging.LogRecord("vllm", logging.INFO, fileinfo, 1, message, None, None)
        record.vllm_process_name = process
        record.fileinfo, record.lineno = fileinfo.rsplit(":", 1)[0], int(fileinfo.rsplit(":")[1])
        text = logging.Formatter(fmt, datefmt).format(record)
        prefix = text.split(record.getMessage())[0]
        out.append(text.replace("\n", "\r\n" + prefix))  # formatter.py:74-77
    return out


def sglang_record(root: Path, message: str) -> str:
    src = root / "sglang/srt/utils/common.py"
    text = src.read_text(encoding="utf-8")
    assert 'format = f"[%(asctime)s{maybe_ms}{prefix}] %(message)s"' in text  # :2365
    fmt = "[%(asctime)s{maybe_ms}{prefix}] %(message)s".format(maybe_ms="", prefix=" TP0")
    record = logging.LogRecord("sglang", logging.INFO, "x.py", 1, message, None, None)
    return logging.Formatter(fmt, "%Y-%m-%d %H:%M:%S").format(record)


def matches(pattern: LogPattern, record: str) -> list[re.Match[str]]:
    return [m for line in record.splitlines() if (m := pattern.search(line))]


# -- item 3: vLLM's version ------------------------------------------------------------------


def logo_messages(root: Path) -> list[str]:
    """The version record of entrypoints/common/startup.py:16-38, plain, monochrome logo and
    coloured logo, built from the pinned source's own Template and colour table."""
    path = root / "vllm/entrypoints/common/startup.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fn = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "log_version_and_model"
    )
    plain = next(
        ast.literal_eval(n.value)
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
    )
    template = next(
        ast.literal_eval(n.args[0])
        for n in ast.walk(fn)
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Template"
    )
    colors = next(
        ast.literal_eval(n.value)
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)
    )

    logo_mono = Template(template).substitute(dict.fromkeys(colors, ""))
    logo_color = Template(template).substitute(colors)
    return [m % ("0.33.0", "/models/target") for m in (plain, logo_mono, logo_color)]


def test_vllm_version_is_read_from_every_form_of_its_startup_record(vllm_src: Path) -> None:
    engine = get_engine("vllm")
    messages = logo_messages(vllm_src)
    assert len(set(messages)) == 3
    for message in messages:
        for record in vllm_records(vllm_src, message, "startup.py:38"):
            assert engine.version_from_log(record) == "0.33.0", record


def test_emulator_prints_the_version_record_as_upstream_does(vllm_src: Path) -> None:
    """The emulator's two forms are upstream's plain message and monochrome logo."""
    plain, mono, _ = logo_messages(vllm_src)
    for (_, template), want in (
        (formats.VLLM_VERSION_LINE, plain),
        (formats.VLLM_VERSION_LOGO, mono),
    ):
        assert template % ("0.33.0", "/models/target") == want
