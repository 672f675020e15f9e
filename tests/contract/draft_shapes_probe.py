"""Subprocess side of test_sglang_draft_quantization_shapes.py: resolve the MTP draft's
quantization of each checkpoint shape in ONE SGLang tree (``$SPECBENCH_UPSTREAM_TREE``: a
release, pristine or patched), with that tree's own code, on the CPU; print JSON.

    python draft_shapes_probe.py REQUEST.json   (PYTHONPATH: tests/contract, its sglang_suite/)

REQUEST: ``{"argv": [server flags without --model-path], "shapes": {name: checkpoint dir},
"prefixes": {draft architecture: [module prefixes]}}``. Per shape, what runs is the tree's:

1. ``ServerArgs.add_cli_args`` + ``ServerArgs.from_cli_args`` on ``--model-path DIR`` + argv,
   then its handling of ``--speculative-draft-model-quantization`` (0.5.19: the serving hook's
   ``handle_missing_default_values``; 0.5.17: ``ServerArgs.__post_init__``, run for real up to
   its first ``get_model_config()`` call, which builds the *target's* ModelConfig and is where
   the CPU stand-ins stop: ``_handle_missing_default_values`` has run by then);
2. ``ModelConfig.from_server_args(server_args, is_draft_model=True)``; the keyword arguments it
   hands ``ModelConfig.__init__`` are bound against the real signature, then what __init__ does
   up to the quantization is done with them (attributes, ``hf_config`` = the shape's config.json
   as transformers keeps it: top-level attributes, ``quantization_config`` a dict), then the
   real ``_config_draft_model()`` and ``_verify_quantization()``;
3. where the draft resolves to gptq / gptq_marlin: the tree's ``GPTQConfig`` /
   ``GPTQMarlinConfig.from_config(quantization_config)`` and its ``get_quant_method(linear,
   prefix)`` (-> layers/quantization/utils.py get_linear_quant_method -> get_dynamic_override,
   the ``dynamic`` rules by re.match) for each prefix the draft class builds.

Stubbed: torch & co (upstream_parsers.SGLANG_STUBS), the quantization *registry* seen by
model_config.py (real method names, no method claims another's config: so GPTQ resolves to
``gptq``; on a GPU GPTQMarlinConfig.override_quantization_method turns it into gptq_marlin),
and, for 0.5.17's server_args import, a few GPU-only modules (see _SERVER_ARGS_0517)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from stubs import StubModule, upstream_import_env
from suite_support import (
    MODEL_CONFIG,
    from_tree,
    package,
    server_args_chain,
    tree_root,
)
from upstream_parsers import SGLANG_STUBS, model_config_presets

# 0.5.17's server_args.py imports the FLA kernels (for a chunk size), the distributed package
# (torch.distributed at import) and the connector (safetensors): stand-ins for those only.
_SERVER_ARGS_0517 = (
    "sglang.kernels.ops.attention.fla.chunk_delta_h",
    "sglang.srt.distributed",
    "sglang.srt.distributed.device_communicators.mooncake_transfer_engine",
)
_STUBS_0517 = (*SGLANG_STUBS, "safetensors")


class _Reached(Exception):
    """ServerArgs.__post_init__ reached its first get_model_config() call."""


def has_serving_hook(root: Path) -> bool:
    return (root / "sglang" / "srt" / "arg_groups" / "serving_hook.py").is_file()


@contextmanager
def chain_0517() -> Iterator[SimpleNamespace]:
    root = tree_root()
    mc = model_config_presets()
    presets: dict[str, types.ModuleType] = {
        "sglang": package("sglang", root),
        "sglang.srt.configs": package("sglang.srt.configs", root),
    }
    for name in (
        "sglang.srt.layers.quantization", "sglang.srt.utils.hf_transformers_utils",
        "sglang.srt.utils.runai_utils", "sglang.srt.configs.dots3",
        "sglang.srt.configs.embedding_model_spec", "sglang.srt.configs.linear_attn_model_registry",
    ):  # fmt: skip
        presets[name] = mc[name]
    for name in _SERVER_ARGS_0517:
        presets[name] = StubModule(name)
    with upstream_import_env(root, _STUBS_0517, presets):
        yield SimpleNamespace(
            server_args=from_tree(importlib.import_module("sglang.srt.server_args")),
            serving_hook=None,
            model_config=from_tree(importlib.import_module(MODEL_CONFIG)),
        )


def server_args_for(chain: Any, argv: list[str]) -> Any:
    """The tree's ServerArgs after its own handling of the draft quantization flag."""
    parser = argparse.ArgumentParser(prog="sglang serve")
    cls = chain.server_args.ServerArgs
    cls.add_cli_args(parser)
    args = parser.parse_args(argv)
    if chain.serving_hook is not None:  # 0.5.19: the hook resolves the flag
        server_args = cls.from_cli_args(args)
        chain.serving_hook.handle_missing_default_values(server_args)
        return server_args
    captured: list[Any] = []

    def stop(self: Any, *a: Any, **k: Any) -> Any:
        captured.append(self)
        raise _Reached

    original = cls.get_model_config
    cls.get_model_config = stop
    try:
        cls.from_cli_args(args)
    except _Reached:
        pass
    finally:
        cls.get_model_config = original
    assert captured, "__post_init__ never built a ModelConfig"
    return captured[0]


def checkpoint_hf_config(path: Path) -> SimpleNamespace:
    """config.json as transformers' PretrainedConfig exposes it to ModelConfig: top-level keys
    as attributes, quantization_config as the dict it is in the file."""
    return SimpleNamespace(**json.loads((path / "config.json").read_text(encoding="utf-8")))


def draft_config(
    chain: Any, server_args: Any, hf_config: SimpleNamespace
) -> tuple[Any, dict[str, Any]]:
    upstream_cls = chain.model_config.ModelConfig
    signature = inspect.signature(upstream_cls.__init__)
    handed: dict[str, Any] = {}

    class DraftConfig(upstream_cls):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs: Any) -> None:
            signature.bind(self, **kwargs)  # from_server_args calls the real __init__ so
            handed.update(kwargs)
            self.model_path = kwargs["model_path"]
            self.revision = kwargs["revision"]
            self.quantization = kwargs["quantization"]
            self.is_draft_model = kwargs["is_draft_model"]
            if "is_draft_quantization_explicit" in signature.parameters:
                self.is_draft_quantization_explicit = kwargs.get(
                    "is_draft_quantization_explicit", False
                )
            self.speculative_algorithm = kwargs["speculative_algorithm"]
            self.hf_config = hf_config
            self.hf_text_config = hf_config
            self._config_draft_model()
            self._verify_quantization()

    chain.model_config.ModelConfig = DraftConfig  # from_server_args builds the module's class
    try:
        draft = upstream_cls.from_server_args(server_args, is_draft_model=True)
    finally:
        chain.model_config.ModelConfig = upstream_cls
    return draft, handed


class LinearBase:
    """Stands for sglang.srt.layers.linear.LinearBase: every layer asked about is a linear."""


@contextmanager
def gptq_module() -> Iterator[Any]:
    """The tree's layers/quantization/gptq/gptq.py with its utils.py (real), kernels stubbed."""
    root = tree_root()
    presets: dict[str, types.ModuleType] = {
        name: package(name, root)
        for name in (
            "sglang", "sglang.srt", "sglang.srt.layers", "sglang.srt.layers.quantization",
            "sglang.srt.layers.quantization.gptq",
        )
    }  # fmt: skip
    for name in (
        "sglang.srt.layers.moe", "sglang.srt.layers.moe.fused_moe_triton",
        "sglang.srt.layers.quantization.marlin_utils", "sglang.srt.utils",
        "sglang.srt.utils.patch_torch", "sglang.srt.layers.quantization.gptq.schemes",
        "sglang.kernels.ops.quantization.fp8_kernel", "sglang.srt.layers.modelopt_utils",
        "sglang.srt.layers.quantization.unquant", "sglang.srt.layers.vocab_parallel_embedding",
    ):  # fmt: skip
        presets[name] = StubModule(name)
    linear = types.ModuleType("sglang.srt.layers.linear")
    linear.LinearBase = LinearBase  # type: ignore[attr-defined]
    presets["sglang.srt.layers.linear"] = linear
    with upstream_import_env(root, SGLANG_STUBS, presets):
        module = from_tree(importlib.import_module("sglang.srt.layers.quantization.gptq.gptq"))
        from_tree(importlib.import_module("sglang.srt.layers.quantization.utils"))
        yield module


def linear_methods(quant: str, quant_cfg: dict[str, Any], prefixes: list[str]) -> dict[str, str]:
    """prefix -> the class name of the method the tree's GPTQ config gives a linear layer."""
    with gptq_module() as gptq:
        cls = {"gptq": gptq.GPTQConfig, "gptq_marlin": gptq.GPTQMarlinConfig}[quant]
        config = cls.from_config(quant_cfg)
        return {p: type(config.get_quant_method(LinearBase(), prefix=p)).__name__ for p in prefixes}


def main(request_path: str) -> None:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    root = tree_root()
    chain_cm = server_args_chain() if has_serving_hook(root) else chain_0517()
    results: dict[str, Any] = {}
    with chain_cm as chain:
        for name, ckpt in request["shapes"].items():
            path = Path(ckpt)
            server_args = server_args_for(chain, ["--model-path", str(path), *request["argv"]])
            draft, handed = draft_config(chain, server_args, checkpoint_hf_config(path))
            results[name] = {
                "handed_quantization": handed["quantization"],
                "handed_explicit": handed.get("is_draft_quantization_explicit"),
                "quantization": draft.quantization,
                "architecture": draft.hf_config.architectures[0],
                "quant_cfg": getattr(draft.hf_config, "quantization_config", None),
            }
    for result in results.values():
        quant = result.pop("quant_cfg")
        prefixes = request["prefixes"].get(result["architecture"], [])
        result["linear_methods"] = (
            linear_methods(result["quantization"], quant, prefixes)
            if result["quantization"] in ("gptq", "gptq_marlin")
            else None
        )
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
