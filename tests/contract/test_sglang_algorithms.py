"""The ``--speculative-algorithm`` names the SGLang adapter accepts are exactly the ones the
pinned 0.5.19 starts with, read from its source (issue 22, item 4)."""

from __future__ import annotations

import ast
from pathlib import Path

from bench.engines._sglang import MTP_ALGORITHMS, SPECULATIVE_ALGORITHMS

SPEC_INFO = "sglang/srt/speculative/spec_info.py"
REGISTRY = "sglang/srt/speculative/spec_registry.py"
HOOK = "sglang/srt/arg_groups/speculative_hook.py"


def enum_members(path: Path, name: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)
    return {
        t.id
        for stmt in cls.body
        if isinstance(stmt, ast.Assign)
        for t in stmt.targets
        if isinstance(t, ast.Name)
    }


def frozenset_literal(path: Path, name: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            value = ast.literal_eval(node.value.args[0])  # type: ignore[attr-defined]
            return set(value)
    raise AssertionError(f"{name} not found in {path}")


def accepted_names(root: Path) -> set[str]:
    """What ``SpeculativeAlgorithm.from_string`` returns a speculative algorithm for, plus the
    aliases the CLI resolves first; NONE means no speculation."""
    members = enum_members(root / SPEC_INFO, "SpeculativeAlgorithm")
    aliases = frozenset_literal(root / REGISTRY, "_RESERVED_ALIASES")
    return (members - {"NONE"}) | aliases


def test_adapter_accepts_exactly_the_pinned_names(sglang_src: Path) -> None:
    assert accepted_names(sglang_src) == SPECULATIVE_ALGORITHMS
    assert "MTP" not in accepted_names(sglang_src)


def test_unknown_names_stop_the_server(sglang_src: Path) -> None:
    """from_string raises for a name that is neither a member nor registered: what makes a
    name outside the set fail at server start."""
    text = (sglang_src / SPEC_INFO).read_text(encoding="utf-8")
    assert 'raise ValueError(f"Unknown speculative algorithm name: {name}")' in text


def test_mtp_spellings_resolve_to_eagle(sglang_src: Path) -> None:
    hook = (sglang_src / HOOK).read_text(encoding="utf-8")
    assert 'if speculative_algorithm == "NEXTN" or speculative_algorithm == "EAGLE":' in hook
    assert {"NEXTN", "EAGLE"} == MTP_ALGORITHMS
