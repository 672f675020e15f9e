"""Every metric name, log pattern and endpoint that bench/measure/_acceptance.py,
bench/engines/* and bench/emulator/formats.py (its _wire.py and _logs.py) rely on exists in the
pinned upstream source."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from bench.engines import get_engine

REPO = Path(__file__).resolve().parents[2]
OUR_MODULES = [
    REPO / "bench" / "measure" / "_acceptance.py",
    REPO / "bench" / "emulator" / "_wire.py",  # the /metrics names behind formats.py
    *sorted((REPO / "bench" / "engines").glob("*.py")),
]
METRIC_RE = re.compile(r"^(vllm|sglang):[a-z0-9_]+$")
# Prometheus counters: declared without _total in vLLM (the client appends it when exposing).
COUNTER_SUFFIX = "_total"


def string_constants(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def our_metric_names() -> set[str]:
    return {s for m in OUR_MODULES for s in string_constants(m) if METRIC_RE.match(s)}


# Where metrics, log lines and routes live (parsing the whole trees takes minutes on 2 cores).
SCOPES = {
    "vllm": ("v1/metrics", "v1/spec_decode", "entrypoints", "config/speculative.py",
             "model_executor/model_loader", "v1/worker/gpu", "logger.py", "config/vllm.py"),
    "sglang": ("srt/observability", "srt/managers", "srt/model_executor", "srt/entrypoints",
               "srt/models/qwen3_5_mtp.py", "srt/server_args.py", "srt/utils/common.py",
               "srt/mem_cache", "srt/utils/__init__.py"),
}  # fmt: skip


def scoped_files(root: Path) -> Iterator[Path]:
    for scope in SCOPES[root.name]:
        target = root / scope
        yield from [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))


@cache
def upstream_literals(root: str) -> frozenset[str]:
    """Every string literal (f-string pieces included) in the pinned package's relevant
    .py files, parsed so implicit concatenation and quoting are resolved."""
    out: set[str] = set()
    for path in scoped_files(Path(root)):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return frozenset(out)


def metric_exists(name: str, literals: frozenset[str]) -> bool:
    """The name, or its family: the client library adds _total to a counter and _sum / _count
    to a histogram."""
    bases = {name.removesuffix(suffix) for suffix in (COUNTER_SUFFIX, "_sum", "_count")}
    return name in literals or bool(bases & literals)


def missing_metrics(names: set[str], roots: dict[str, Path]) -> list[str]:
    return sorted(
        n for n in names if not metric_exists(n, upstream_literals(str(roots[n.split(":")[0]])))
    )


@pytest.fixture(scope="module")
def roots(upstream: dict[str, object]) -> dict[str, Path]:
    return {
        "vllm": upstream["vllm"].package_dir,  # type: ignore[attr-defined]
        "sglang": upstream["sglang"].package_dir,  # type: ignore[attr-defined]
    }


def test_metric_names_exist_upstream(roots: dict[str, Path]) -> None:
    names = our_metric_names()
    assert len(names) >= 8, f"expected the acceptance/emulator metric names, found {names}"
    assert missing_metrics(names, roots) == []


def test_a_renamed_metric_is_caught(roots: dict[str, Path]) -> None:
    renamed = {"vllm:spec_decode_num_draft_total", "sglang:spec_verify_call_total"}
    assert missing_metrics(renamed, roots) == sorted(renamed)


# -- log patterns -------------------------------------------------------------------------------

PLACEHOLDER_RE = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdfr%]|\{[^}]*\}")


def fragments(template: str) -> list[str]:
    """Literal pieces of a printf/format template, cut at placeholders and at , : = (the
    emulator composes some lines from several upstream pieces, e.g. the hybrid-SSM usage part
    of SGLang's decode line); pieces with digits ("Engine 000") are rendered values."""
    pieces = (
        piece.strip()
        for part in PLACEHOLDER_RE.split(template)
        for piece in re.split(r"[,:=]", part)
    )
    return [p for p in pieces if len(p) >= 6 and not re.search(r"\d", p)]


def regex_literal(regex: str) -> str:
    """The longest run of plain characters in a regex (what must appear in the log text)."""
    runs = re.split(r"\\.|[()\[\]{}*+?|^$.]", regex.replace(r"\S", "\x00"))
    return max((r for r in runs if "\x00" not in r), key=len).strip()


def in_source(fragment: str, literals: frozenset[str]) -> bool:
    return any(fragment in lit for lit in literals)


def log_templates() -> Iterator[tuple[str, str, str]]:
    """(engine, name, template) for every log template in formats.py and engines/*."""
    from bench.emulator import formats

    for name in dir(formats):
        value = getattr(formats, name)
        engine = name.split("_", 1)[0].lower()
        if engine not in ("vllm", "sglang") or not (name.endswith("_LINE") or "LOAD" in name):
            continue
        template = value[1] if isinstance(value, tuple) else value
        if isinstance(template, str):
            yield engine, name, template
    for name in ("SGLANG_SKIP_PARAM", "SGLANG_FIRED_UP", "VLLM_MTP_DEPRECATED"):
        value = getattr(formats, name)
        yield name.split("_", 1)[0].lower(), name, value[1] if isinstance(value, tuple) else value
    for engine in ("vllm", "sglang"):
        for pattern in get_engine(engine).load_patterns:
            yield engine, pattern.code, regex_literal(pattern.regex)


def missing_log_fragments(items: list[tuple[str, str, str]], roots: dict[str, Path]) -> list[str]:
    bad = []
    for engine, name, template in items:
        literals = upstream_literals(str(roots[engine]))
        for frag in fragments(template) or [template]:
            if not in_source(frag, literals):
                bad.append(f"{engine} {name}: {frag!r}")
    return bad


def test_log_templates_exist_upstream(roots: dict[str, Path]) -> None:
    items = list(log_templates())
    assert len(items) >= 8
    assert missing_log_fragments(items, roots) == []


def test_a_changed_log_line_is_caught(roots: dict[str, Path]) -> None:
    items = [("sglang", "drifted", "Parameter {name} is missing from params_dict, skipping")]
    assert missing_log_fragments(items, roots)


# -- endpoints ----------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_endpoints_exist_upstream(engine: str, roots: dict[str, Path]) -> None:
    adapter = get_engine(engine)
    literals = upstream_literals(str(roots[engine]))
    for path in (adapter.health_path, adapter.ready_path, adapter.metrics_path):
        assert path in literals, f"{engine}: no route {path!r} in the pinned source"
    assert "/no_such_route_specbench" not in literals
