"""scripts/check_import_cycles.py (make lint): the cycles of an import graph, each named by
its modules; a deferred import counts as an edge."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from script_module import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_import_cycles.py"


@pytest.fixture(scope="module")
def check() -> ModuleType:
    return load_script(SCRIPT)


def test_a_chain_has_no_cycle(check: ModuleType) -> None:
    assert check.strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_each_cycle_is_named_once_with_its_modules(check: ModuleType) -> None:
    graph = {
        # schema-like: invariants -> counters -> payload -> invariants (issue 50's finding)
        "inv": {"counters", "payload"},
        "counters": {"payload"},
        "payload": {"inv", "core"},
        "core": set(),
        # a second, separate cycle of two, and a module outside both that reaches them
        "x": {"y"},
        "y": {"x"},
        "cli": {"x", "inv"},
    }
    assert sorted(check.strongly_connected(graph)) == [["counters", "inv", "payload"], ["x", "y"]]


def test_bench_has_no_import_cycle(check: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert check.main() == 0, capsys.readouterr().out
