"""scripts/check_function_length.py (make lint): a function's body counted without its nested
defs, and a function over the bound named."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest
from script_module import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_function_length.py"


@pytest.fixture(scope="module")
def check() -> ModuleType:
    return load_script(SCRIPT)


def _fn(src: str) -> ast.FunctionDef:
    node = ast.parse(src).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def test_the_body_is_counted_without_the_signature_and_the_nested_defs(check: ModuleType) -> None:
    src = (
        "def f(\n    a: int,\n    b: int,\n) -> int:\n"
        '    """doc"""\n'
        "    @decorator\n    def inner() -> None:\n        pass\n"
        "    class C:\n        x = 1\n"
        "    return a + b\n"
    )
    assert check.body_length(_fn(src)) == 2  # the docstring and the return


def test_a_function_over_the_bound_is_named(check: ModuleType, tmp_path: Path) -> None:
    pkg = tmp_path / "bench"
    pkg.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(check.BOUND + 1))
    (pkg / "m.py").write_text(f"def long() -> None:\n{body}\n\ndef short() -> None:\n    pass\n")
    found = dict((name, n) for n, name in check.lengths(tmp_path))
    assert found == {"bench/m.py:long": check.BOUND + 1, "bench/m.py:short": 1}
