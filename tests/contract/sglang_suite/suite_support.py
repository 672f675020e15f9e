"""Shared by the probes: import the tree's SGLang modules by their real names, with the rest of
the runtime stubbed, and a stand-in for the Qwen3.5 GPTQ checkpoint's config.json."""

from __future__ import annotations

import importlib
import os
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from stubs import StubModule, upstream_import_env
from upstream_parsers import SGLANG_STUBS, model_config_presets

MODEL_CONFIG = "sglang.srt.configs.model_config"
# The quantization_config of btbtyler09/Qwen3.8-27B-GPTQ-4bit (the seed's target).
GPTQ_4BIT = {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": True, "desc_act": False}
QWEN35 = "Qwen3_5ForConditionalGeneration"
QWEN35_MTP = "Qwen3_5ForCausalLMMTP"  # what _config_draft_model remaps the draft to


def tree_root() -> Path:
    return Path(os.environ["SPECBENCH_UPSTREAM_TREE"])


def package(name: str, root: Path) -> types.ModuleType:
    """A package bound to its folder in the tree without running its heavy __init__.py."""
    pkg = types.ModuleType(name)
    pkg.__path__ = [str(root.joinpath(*name.split(".")))]
    return pkg


def checkpoint_config(arch: str = QWEN35) -> SimpleNamespace:
    """What transformers reads from the target's config.json, as far as the draft's
    quantization resolution looks at it (the MTP draft has no config of its own)."""
    return SimpleNamespace(architectures=[arch], quantization_config=dict(GPTQ_4BIT))


def from_tree(module: types.ModuleType) -> types.ModuleType:
    assert str(module.__file__).startswith(str(tree_root())), module.__file__
    return module


@contextmanager
def model_config_only() -> Iterator[Any]:
    """model_config.py alone; every other sglang module it imports is a stub, except a
    quantization registry of real method names (upstream_parsers.model_config_presets)."""
    root = tree_root()
    presets = model_config_presets()
    for name in ("sglang", "sglang.srt", "sglang.srt.configs"):
        presets[name] = package(name, root)
    with upstream_import_env(root, ("torch", "transformers"), presets):
        yield from_tree(importlib.import_module(MODEL_CONFIG))


@contextmanager
def server_args_chain() -> Iterator[SimpleNamespace]:
    """The real server_args, serving hook and model_config of the tree, importable together:
    only torch & co (SGLANG_STUBS), the HF/ModelScope loaders and the quantization kernels
    (registry of real names) are stand-ins."""
    root = tree_root()
    mc = model_config_presets()
    presets: dict[str, types.ModuleType] = {
        "sglang": package("sglang", root),
        "sglang.srt.configs": package("sglang.srt.configs", root),
        "sglang.srt.arg_groups.model_path_hook": StubModule(
            "sglang.srt.arg_groups.model_path_hook"
        ),
    }
    for name in (
        "sglang.srt.layers.quantization", "sglang.srt.utils.hf_transformers_utils",
        "sglang.srt.utils.runai_utils", "sglang.srt.configs.dots3",
        "sglang.srt.configs.embedding_model_spec", "sglang.srt.configs.linear_attn_model_registry",
    ):  # fmt: skip
        presets[name] = mc[name]
    with upstream_import_env(root, SGLANG_STUBS, presets):
        yield SimpleNamespace(
            server_args=from_tree(importlib.import_module("sglang.srt.server_args")),
            serving_hook=from_tree(importlib.import_module("sglang.srt.arg_groups.serving_hook")),
            model_config=from_tree(importlib.import_module(MODEL_CONFIG)),
        )
