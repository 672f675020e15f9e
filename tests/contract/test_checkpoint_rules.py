"""The rule constants bench/engines/checkpoint_rules.py hard-codes match the pinned vLLM / SGLang
source.

Everything is read with ``ast`` from the pinned wheels' files (the session fixtures); the one
rule with logic (vLLM's desc_act refusal) is compiled from the pinned function itself and run
side by side with our check on the same inputs."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bench.engines import checkpoint_rules as ck
from bench.engines import load_experiment
from bench.matrix import check_target
from bench.schema import Experiment

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml"

VLLM_QUANT = "vllm/model_executor/layers/quantization"
SGLANG_QUANT = "sglang/srt/layers/quantization"


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def module_assign(path: Path, name: str) -> ast.expr:
    for node in tree(path).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert node.value is not None
            return node.value
    raise AssertionError(f"{name} not assigned at module level in {path}")


def find_class(path: Path, name: str) -> ast.ClassDef:
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"class {name} not in {path}")


def find_func(node: ast.AST, name: str) -> ast.FunctionDef:
    for sub in ast.walk(node):
        if isinstance(sub, ast.FunctionDef) and sub.name == name:
            return sub
    raise AssertionError(f"function {name} not found")


def class_assign(cls: ast.ClassDef, name: str) -> ast.expr:
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node.value
    raise AssertionError(f"{cls.name}.{name} not found")


def called_names(node: ast.AST) -> set[str]:
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            out.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return out


# -- GPTQ ------------------------------------------------------------------------------------


def test_vllm_marlin_group_sizes(vllm_src: Path) -> None:
    path = vllm_src / VLLM_QUANT / "utils/marlin_utils.py"
    value = ast.literal_eval(module_assign(path, "MARLIN_SUPPORTED_GROUP_SIZES"))
    assert tuple(value) == ck.VLLM_MARLIN_GROUP_SIZES


def test_sglang_marlin_group_sizes(sglang_src: Path) -> None:
    path = sglang_src / SGLANG_QUANT / "marlin_utils.py"
    value = ast.literal_eval(module_assign(path, "MARLIN_SUPPORTED_GROUP_SIZES"))
    assert tuple(value) == ck.SGLANG_MARLIN_GROUP_SIZES


def type_map_keys(path: Path, cls_name: str) -> set[tuple[int, bool]]:
    node = class_assign(find_class(path, cls_name), "TYPE_MAP")
    assert isinstance(node, ast.Dict)
    return {ast.literal_eval(k) for k in node.keys if k is not None}


def test_gptq_type_maps(vllm_src: Path, sglang_src: Path) -> None:
    vllm = type_map_keys(vllm_src / VLLM_QUANT / "auto_gptq.py", "AutoGPTQConfig")
    sglang = type_map_keys(sglang_src / SGLANG_QUANT / "gptq/gptq.py", "GPTQMarlinConfig")
    assert vllm == ck.VLLM_GPTQ_TYPES
    assert sglang == ck.SGLANG_GPTQ_MARLIN_TYPES


def test_vllm_required_gptq_keys(vllm_src: Path) -> None:
    """Keys AutoGPTQConfig.from_config reads with get_from_keys (no default: missing raises)."""
    fn = find_func(
        find_class(vllm_src / VLLM_QUANT / "auto_gptq.py", "AutoGPTQConfig"), "from_config"
    )
    keys = set()
    for sub in ast.walk(fn):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == "get_from_keys"
        ):
            keys.update(ast.literal_eval(sub.args[1]))
    assert keys == set(ck.VLLM_GPTQ_REQUIRED_KEYS)


def test_vllm_gptq_config_runs_the_desc_act_rule(vllm_src: Path) -> None:
    init = find_func(
        find_class(vllm_src / VLLM_QUANT / "auto_gptq.py", "AutoGPTQConfig"), "__init__"
    )
    assert "normalize_and_validate_gptq_desc_act" in called_names(init)


def test_sglang_gptq_bits(sglang_src: Path) -> None:
    init = find_func(
        find_class(sglang_src / SGLANG_QUANT / "gptq/gptq.py", "GPTQConfig"), "__init__"
    )
    lists = [
        ast.literal_eval(c.comparators[0])
        for c in ast.walk(init)
        if isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.NotIn)
    ]
    assert lists == [list(ck.SGLANG_GPTQ_BITS)]


@pytest.fixture(scope="module")
def upstream_desc_act(vllm_src: Path) -> Any:
    """The pinned ``normalize_and_validate_gptq_desc_act``, compiled on its own (pure Python)."""
    path = vllm_src / VLLM_QUANT / "utils/gptq_utils.py"
    fn = find_func(tree(path), "normalize_and_validate_gptq_desc_act")
    code = ast.get_source_segment(path.read_text(encoding="utf-8"), fn)
    assert code is not None
    namespace: dict[str, Any] = {"Mapping": Mapping, "Any": Any}
    exec(compile(code, str(path), "exec"), namespace)
    return namespace["normalize_and_validate_gptq_desc_act"]


@pytest.fixture(scope="module")
def experiment() -> Experiment:
    return load_experiment(EXPERIMENT)


DESC_ACT_CASES = [
    (False, 32, {}),
    (True, 32, {}),
    (True, -1, {}),
    (True, 128, {}),
    (False, 32, {"+:.*mlp.*": {"desc_act": True}}),
    (False, 32, {"-:.*mtp.*": {"desc_act": True}}),
    (False, 32, {".*attn.*": {"desc_act": True, "group_size": -1}}),
    (True, -1, {"+:.*": {"group_size": 64}}),
]


@pytest.mark.parametrize(("desc_act", "group", "dynamic"), DESC_ACT_CASES)
def test_desc_act_rule_agrees_with_pinned_vllm(
    upstream_desc_act: Any,
    experiment: Experiment,
    tmp_path: Path,
    desc_act: bool,
    group: int,
    dynamic: dict[str, Any],
) -> None:
    try:
        upstream_desc_act(desc_act, group, dynamic)
        refused = False
    except ValueError:
        refused = True
    q = {"quant_method": "gptq", "bits": 4, "group_size": group, "desc_act": desc_act}
    q |= {"sym": True, "dynamic": dynamic}
    d = tmp_path / "target"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["X"], "quantization_config": q}))
    found = check_target(d, "t", ["vllm"], experiment, {"vllm": "0.33.0"})
    ours = any(f.severity == "error" and f.field.endswith("desc_act") for f in found)
    assert ours == refused, (desc_act, group, dynamic, found)


# -- drafter registries ----------------------------------------------------------------------


def test_vllm_dflash_registry(vllm_src: Path) -> None:
    path = vllm_src / "vllm/model_executor/models/registry.py"
    registry = ast.literal_eval(module_assign(path, "_SPECULATIVE_DECODING_MODELS"))
    reachable = {k for k in registry if ck.vllm_dflash_arch(k) == k and "DFlash" in k}
    reachable |= {k for k in registry if k in ck.VLLM_DFLASH_REWRITE_EXEMPT}
    assert reachable == ck.VLLM_DFLASH_DRAFT_ARCHS
    assert registry[ck.DFLASH2_ARCH] == ("qwen3_dflash2", "DFlash2Qwen3ForCausalLM")
    # No other registry merged into _VLLM_MODELS carries a DFlash name.
    merged = module_assign(path, "_VLLM_MODELS")
    assert isinstance(merged, ast.Dict)
    for part in merged.values:
        assert isinstance(part, ast.Name)
        if part.id == "_SPECULATIVE_DECODING_MODELS":
            continue
        node = module_assign(path, part.id)
        keys = {k.value for k in getattr(node, "keys", []) if isinstance(k, ast.Constant)}
        assert not {k for k in keys if "DFlash" in str(k)}, part.id


def test_vllm_dflash_architecture_rewrite(vllm_src: Path) -> None:
    """EAGLEConfig prefixes 'DFlash' unless the name starts/ends with it or is exempt."""
    path = vllm_src / "vllm/transformers_utils/configs/eagle.py"
    branch = next(
        n
        for n in ast.walk(tree(path))
        if isinstance(n, ast.If)
        and isinstance(n.test, ast.Compare)
        and isinstance(n.test.comparators[0], ast.Constant)
        and n.test.comparators[0].value == "dflash"
    )
    comp = next(n for stmt in branch.body for n in ast.walk(stmt) if isinstance(n, ast.ListComp))
    checks = {
        (c.func.attr, c.args[0].value)
        for c in ast.walk(comp)
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and isinstance(c.args[0], ast.Constant)
    }
    assert checks == {("startswith", ck.VLLM_DFLASH_PREFIX), ("endswith", ck.VLLM_DFLASH_PREFIX)}
    exempt = {
        c.comparators[0].value
        for c in ast.walk(comp)
        if isinstance(c, ast.Compare)
        and isinstance(c.ops[0], ast.Eq)
        and isinstance(c.comparators[0], ast.Constant)
    }
    assert exempt == ck.VLLM_DFLASH_REWRITE_EXEMPT
    prefixes = [
        v.value
        for j in ast.walk(comp)
        if isinstance(j, ast.JoinedStr)
        for v in j.values
        if isinstance(v, ast.Constant)
    ]
    assert prefixes == [ck.VLLM_DFLASH_PREFIX]


def test_sglang_dflash_entry_classes(sglang_src: Path) -> None:
    node = module_assign(sglang_src / "sglang/srt/models/dflash.py", "EntryClass")
    assert isinstance(node, ast.List)
    names = {e.id for e in node.elts if isinstance(e, ast.Name)}
    assert names == ck.SGLANG_DFLASH_DRAFT_ARCHS


def test_vllm_dflash2_required_keys(vllm_src: Path) -> None:
    path = vllm_src / "vllm/model_executor/models/qwen3_dflash2.py"
    keys = {
        s.slice.value
        for s in ast.walk(tree(path))
        if isinstance(s, ast.Subscript)
        and isinstance(s.value, ast.Name)
        and s.value.id == "draft_config"
        and isinstance(s.slice, ast.Constant)
    }
    assert keys == set(ck.VLLM_DFLASH2_REQUIRED_KEYS)


def test_sglang_dflash2_requires_selector_rank(sglang_src: Path) -> None:
    init = find_func(
        find_class(sglang_src / "sglang/srt/models/dflash.py", "DFlash2DraftModel"), "__init__"
    )
    raised = [
        ast.literal_eval(r.exc.args[0])
        for r in ast.walk(init)
        if isinstance(r, ast.Raise) and isinstance(r.exc, ast.Call) and r.exc.args
    ]
    assert any("dflash_config.selector_rank" in m for m in raised)


def test_missing_layer_ids_fall_back_silently(vllm_src: Path, sglang_src: Path) -> None:
    """Why a missing target_layer_ids is an error: both engines substitute defaults."""
    sg = find_func(
        find_class(sglang_src / "sglang/srt/speculative/dflash_utils.py", "DFlashDraftConfig"),
        "resolve_target_layer_ids",
    )
    assert "build_target_layer_ids" in called_names(sg)
    vl = find_func(
        tree(vllm_src / "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"),
        "set_eagle3_aux_hidden_state_layers",
    )
    assert "get_eagle3_default_aux_hidden_state_layers" in called_names(vl)


# -- citations -------------------------------------------------------------------------------

# What each cited range must contain, so a citation cannot drift from the line it names.
ANCHORS = {
    "SRC_VLLM_DESC_ACT": "def normalize_and_validate_gptq_desc_act",
    "SRC_VLLM_TYPES": "TYPE_MAP",
    "SRC_VLLM_KEYS": 'get_from_keys(config, ["desc_act"])',
    "SRC_VLLM_MARLIN": "MARLIN_SUPPORTED_GROUP_SIZES",
    "SRC_VLLM_DYNAMIC": "def override_config",
    "SRC_VLLM_QUANT_SOURCE": "def get_quantization_config",
    "SRC_VLLM_REGISTRY": '"DFlash2DraftModel"',
    "SRC_VLLM_DFLASH2_KEYS": 'draft_config["selector_rank"]',
    "SRC_VLLM_LAYER_IDS": "get_eagle3_default_aux_hidden_state_layers",
    "SRC_SGLANG_BITS": "[2, 3, 4, 8]",
    "SRC_SGLANG_MARLIN": "def is_gptq_marlin_compatible",
    "SRC_SGLANG_QUANT_SOURCE": "def _parse_quant_hf_config",
    "SRC_SGLANG_REGISTRY": "EntryClass",
    "SRC_SGLANG_SELECTOR": "dflash_config.selector_rank",
    "SRC_SGLANG_CONV": "conv_kernel_size and conv_group_size",
    "SRC_SGLANG_LAYER_IDS": "build_target_layer_ids",
}
CITE_RE = re.compile(r"^(?P<path>(?:vllm|sglang)/[\w/.]+\.py):(?P<ranges>[\d,-]+)$")


def cited_lines(root: Mapping[str, Path], citation: str) -> list[tuple[str, list[str]]]:
    out = []
    for part in citation.split(", "):
        m = CITE_RE.match(part.strip())
        assert m, f"citation not 'path:lines': {part!r}"
        path = root[m["path"].split("/")[0]] / m["path"]
        lines = path.read_text(encoding="utf-8").splitlines()
        picked: list[str] = []
        for rng in m["ranges"].split(","):
            lo, _, hi = rng.partition("-")
            first, last = int(lo), int(hi or lo)
            assert 1 <= first <= last <= len(lines), f"{part}: beyond the file"
            picked += lines[first - 1 : last]
        out.append((part, picked))
    return out


def test_every_citation_points_at_its_rule(vllm_src: Path, sglang_src: Path) -> None:
    roots = {"vllm": vllm_src, "sglang": sglang_src}
    consts = {k for k in vars(ck) if k.startswith("SRC_")}
    assert consts == set(ANCHORS)
    for name, anchor in ANCHORS.items():
        parts = cited_lines(roots, getattr(ck, name))
        assert any(anchor in "\n".join(lines) for _, lines in parts), (name, anchor)
