"""Lint: no test asserts a bound that a loaded machine can break (issue 50, item 1).

    python scripts/check_test_timing.py [PATH ...]      (default: tests/; `make lint` runs it)

A test asserts what load cannot change (ordering, counts, causality, floors of latencies,
ceilings of rates); a timing target is a benchmark's figure (tests/bench_*.py, not checked
here, docs/benchmarks.md). In every ``assert`` of a test file this flags a comparison of a
timing quantity with a fixed number in the direction load moves it:

- a latency, a percentile or an elapsed time under a ceiling (``p90 <= 50.0``,
  ``median < 10``, ``time.monotonic() - t0 < 3``, ``took < 12``, ``abs(t_client - t_server)
  < 0.005``): load only makes these longer;
- a rate above a floor (``60 <= rate_hz``, ``tok_s > 100``): load only makes rates lower;
- a timing quantity within a tolerance of another (``decode_tok_s == pytest.approx(truth,
  rel=0.05)``): a loaded machine's delays exceed any tolerance. A tolerance of 1e-6 or less is
  float arithmetic, not timing, and passes.

What passes: a latency above a floor (``ttft_ms >= 30``: the server's own sleep), a rate under
a ceiling, two timing values compared with each other (ordering, ``sent_at <= first_byte_at``),
a hang guard (``time.monotonic() < deadline``). A timing quantity is recognised by its name
(p50/p90/p95/p99, median, percentile, ttft, latency, elapsed, took, duration, wall, ``*_ms``,
``*_at``; tok_s, throughput, ``*_hz``, ``rate``, not acceptance or error rates) or by coming
from a clock (``time.monotonic()``, ``time.perf_counter()``, ``time.time()``, a name assigned
from one). Exit 1 with ``file:line: why`` for each finding; 0 when there is none.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LATENCY = re.compile(
    r"(^|_)(p50|p90|p95|p99|p999|median|percentile|quantile|ttft|itl|tpot|latency|latencies"
    r"|e2e|elapsed|took|duration|wall)(_|$)|(^|_)(ms|at)$"
)
RATE = re.compile(r"(^|_)(tok_s|toks|tokens_per_s|throughput|hz|rps|qps|rate)(_|$)")
NOT_TIMING = re.compile(r"accept|error|hit|miss|drop|pass|fail|loss|sample_rate")
CLOCKS = {"monotonic", "perf_counter", "time", "process_time", "monotonic_ns", "perf_counter_ns"}
EXACT = 1e-6  # a tolerance this small is float arithmetic, not a timing tolerance
#: Asserts this check flags that hold no timing at all, by test ("path::function"), each with
#: why. A name is not enough to tell; keep this short. An entry that no longer matches a
#: finding is itself an error, so the list cannot outlive its reasons.
ALLOWED = {
    "tests/unit/test_emulator_profile.py::test_profiles_are_shaped_after_the_seed": (
        "ttft is the profile's own arithmetic (prefill_ms from its YAML), no clock"
    ),
}
UPPER = {ast.Lt, ast.LtE}
LOWER = {ast.Gt, ast.GtE}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in CLOCKS:
        return False
    # time.time(), time.monotonic(), loop.time(), monotonic(): not datetime.time(...)
    return not node.args and not (isinstance(f, ast.Name) and name == "time")


def _key(node: ast.Subscript) -> object:
    """The constant key of ``x["key"]`` (None for any other subscript)."""
    return node.slice.value if isinstance(node.slice, ast.Constant) else None


def _names(node: ast.AST) -> Iterator[str]:
    """The identifiers an expression reads: names, attributes, string subscripts, calls."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            yield n.id
        elif isinstance(n, ast.Attribute):
            yield n.attr
        elif isinstance(n, ast.Subscript) and isinstance(key := _key(n), str):
            yield key


def _constant(node: ast.AST) -> bool:
    """A fixed number: literals, UPPER_CASE names, and arithmetic of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    if isinstance(node, ast.BinOp):
        return _constant(node.left) and _constant(node.right)
    if isinstance(node, ast.Name):
        return node.id.isupper()
    if isinstance(node, ast.Attribute):
        return node.attr.isupper()
    return False


class _Function(ast.NodeVisitor):
    """The names a function assigns from a clock (``t0 = time.monotonic()``, ``took = ...``)."""

    def __init__(self) -> None:
        self.clocked: set[str] = set()

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(_is_clock_call(n) for n in ast.walk(node.value)) or self._reads_clocked(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.clocked.add(target.id)
        self.generic_visit(node)

    def _reads_clocked(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.clocked for n in ast.walk(node))


def _kind(node: ast.AST, clocked: set[str]) -> str | None:
    """'latency' (load makes it larger), 'rate' (load makes it smaller) or None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        sides = (node.left, node.right)
        if any(
            _is_clock_call(n) or (isinstance(n, ast.Name) and n.id in clocked)
            for side in sides
            for n in ast.walk(side)
        ):
            return "latency"  # an elapsed time: a clock reading minus another
    if isinstance(node, ast.Name) and node.id in clocked and not _is_clock_call(node):
        return "latency"
    names = [n.lower() for n in _names(node)]
    if any(LATENCY.search(n) for n in names):
        return "latency"
    if any(RATE.search(n) and not NOT_TIMING.search(n) for n in names):
        return "rate"
    return None


def _approx_tolerance(node: ast.AST) -> float | None:
    """The rel/abs of a ``pytest.approx(..., rel=X)`` call (None: not one, or its default)."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if not (isinstance(f, ast.Attribute) and f.attr == "approx"):
        return None
    tolerances = [
        kw.value.value
        for kw in node.keywords
        if kw.arg in ("rel", "abs")
        and isinstance(kw.value, ast.Constant)
        and isinstance(kw.value.value, int | float)
    ]
    return max(tolerances) if tolerances else None


def _findings(test: ast.AST, clocked: set[str]) -> Iterator[str]:
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        sides = [cmp.left, *cmp.comparators]
        for left, op, right in zip(sides, cmp.ops, sides[1:], strict=False):
            for side, other, flipped in ((left, right, False), (right, left, True)):
                kind = _kind(side, clocked)
                if kind is None:
                    continue
                tolerance = _approx_tolerance(other)
                if isinstance(op, ast.Eq | ast.NotEq) and tolerance is not None:
                    if tolerance > EXACT:
                        yield f"a {kind} within a tolerance ({tolerance:g}) of another value"
                    continue
                if not _constant(other):
                    continue
                # as written "side OP other" (flipped: "other OP side")
                upper = (type(op) in UPPER) != flipped
                lower = (type(op) in LOWER) != flipped
                if kind == "latency" and upper:
                    yield "a latency, percentile or elapsed time under a fixed ceiling"
                elif kind == "rate" and lower:
                    yield "a rate above a fixed floor"


def check_file(path: Path) -> list[tuple[str, str]]:
    """(test id ``path::function``, finding) for each flagged assert of ``path``."""
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    where = path.resolve().relative_to(REPO) if path.resolve().is_relative_to(REPO) else path
    found: dict[int, tuple[str, str]] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        scope = _Function()
        for stmt in fn.body:
            scope.visit(stmt)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assert) and node.lineno not in found:
                for why in _findings(node.test, scope.clocked):
                    text = (ast.get_source_segment(source, node) or "").splitlines()
                    first = text[0] if text else ""
                    found[node.lineno] = (
                        f"{where}::{fn.name}",
                        f"{where}:{node.lineno}: {why}: {first}",
                    )
                    break
    return [found[line] for line in sorted(found)]


def test_files(paths: list[Path]) -> list[Path]:
    """Every test module and helper under ``paths``; the benchmarks (tests/bench_*.py) are where
    timing targets belong."""
    files: list[Path] = []
    for p in paths:
        found = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        files += [f for f in found if not f.name.startswith("bench_")]
    return files


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [REPO / "tests"]
    findings = [f for path in test_files(paths) for f in check_file(path)]
    problems = [text for test, text in findings if test not in ALLOWED]
    if not argv:  # the whole suite: every allowed entry must still match a finding
        seen = {test for test, _ in findings}
        problems += [
            f"scripts/check_test_timing.py: ALLOWED names {test}, which flags nothing any more: "
            "remove the entry"
            for test in ALLOWED
            if test not in seen
        ]
    for p in problems:
        print(p)
    if problems:
        print(
            f"{len(problems)} timing bound(s) in tests: a loaded machine can break them. Keep in "
            "the test what load cannot change and measure the bound in a benchmark "
            "(tests/bench_*.py, docs/benchmarks.md)."
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
