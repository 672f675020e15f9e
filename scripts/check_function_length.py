"""Fail when a function in bench/ has a body longer than the bound (issue 50: one job each).

    python3 scripts/check_function_length.py [--list]

A function's length is its body's lines: from its first statement (the docstring included) to
its last, without the lines of the functions and classes defined inside it (a typer command
group's ``register`` holds its commands; each is measured on its own). Parameters are not body:
a command's option declarations are its signature. ``--list`` prints every function over 60.

The bound is 80 lines: a function longer than that does more than one thing in this code base
(the ten that were over 120 each split where their jobs part). The exceptions below are each a
single table or a single sequence with nothing to name apart, with the reason.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOUND = 80
#: "path:function" -> why it may be longer
EXCEPTIONS: dict[str, str] = {}

Func = ast.FunctionDef | ast.AsyncFunctionDef


Defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _span(node: ast.AST) -> tuple[int, int]:
    """First line (its decorators included) and last line of a def or class."""
    decorators = getattr(node, "decorator_list", [])
    first = min([d.lineno for d in decorators] + [node.lineno])  # type: ignore[attr-defined]
    return first, node.end_lineno or node.lineno  # type: ignore[attr-defined]


def body_length(fn: Func) -> int:
    """Lines from ``fn``'s first statement to its last, less those of the defs inside it."""
    inner = [_span(n) for n in ast.walk(fn) if n is not fn and isinstance(n, Defs)]
    outermost = [
        s for s in inner if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in inner)
    ]
    nested = sum(b - a + 1 for a, b in outermost)
    return (fn.end_lineno or fn.lineno) - fn.body[0].lineno + 1 - nested


def lengths(root: Path = ROOT) -> list[tuple[int, str]]:
    out = []
    for path in sorted((root / "bench").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((body_length(node), f"{path.relative_to(root)}:{node.name}"))
    return sorted(out, reverse=True)


def main(argv: list[str]) -> int:
    found = lengths()
    if "--list" in argv:
        for n, name in found:
            if n > 60:
                print(f"{n:4d}  {name}")
        return 0
    over = [(n, name) for n, name in found if n > BOUND and name not in EXCEPTIONS]
    stale = [name for name in EXCEPTIONS if not any(f == name and n > BOUND for n, f in found)]
    for n, name in over:
        print(f"{name}: {n} lines of body, over {BOUND}: split it where its jobs part")
    for name in stale:
        print(f"{name}: listed in EXCEPTIONS but no longer over {BOUND}: remove it")
    return 1 if over or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
