"""specbench probes of SGLang's draft-quantization resolution, run by test_sglang_upstream_suite
in a subprocess against one tree (``$SPECBENCH_UPSTREAM_TREE``: the pinned release, patched or
pristine). The module is imported by its real name, sglang.srt.configs.model_config, from that
tree, as the engine imports it; its other sglang imports and torch/transformers are stubbed.

A probe of the patched behaviour calls ``record_property("targets_patch", True)``: it passes on
the patched tree and must fail on the pristine one. The others pin behaviour the patch must
leave unchanged and pass on both."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from suite_support import QWEN35, checkpoint_config, model_config_only

# What serving_hook.handle_missing_default_values hands ModelConfig for the draft:
# `--speculative-draft-model-quantization unquant` -> (None, explicit=True);
# no flag and no --quantization -> (None, explicit=False). probe_server_args_chain.py checks
# this mapping through the real hook.
UNQUANT = {"quantization": None, "explicit": True}
NO_FLAG = {"quantization": None, "explicit": False}


@pytest.fixture(scope="module")
def model_config() -> Iterator[Any]:
    with model_config_only() as module:
        yield module


def resolve(
    module: Any, *, draft: bool, quantization: str | None, explicit: bool, arch: str
) -> tuple[str | None, str | None]:
    """Run upstream's draft remap + _verify_quantization on a Qwen3.5 GPTQ checkpoint config
    the way ModelConfig.__init__ does; return (resolved quantization, load-log quant string)."""
    cfg = module.ModelConfig.__new__(module.ModelConfig)
    cfg.model_path = "/models/Qwen3.8-27B-GPTQ-4bit"
    cfg.revision = None
    cfg.quantization = quantization
    cfg.is_draft_model = draft
    cfg.is_draft_quantization_explicit = explicit
    cfg.speculative_algorithm = "EAGLE"
    cfg.hf_config = checkpoint_config(arch)
    cfg.hf_text_config = SimpleNamespace()
    cfg._config_draft_model()
    cfg._verify_quantization()
    return cfg.quantization, cfg.get_quantization_config_log_str()


Record = Callable[[str, object], None]


def test_explicit_unquant_mtp_draft_resolves_to_no_quantization(
    model_config: Any, record_property: Record
) -> None:
    record_property("targets_patch", True)
    quant, log = resolve(model_config, draft=True, arch=QWEN35, **UNQUANT)  # type: ignore[arg-type]
    assert quant is None
    assert log is None  # the draft's "Load weight end." line loses "quant=gptq, bits=4"


def test_mtp_draft_without_the_flag_stays_gptq(model_config: Any) -> None:
    quant, log = resolve(model_config, draft=True, arch=QWEN35, **NO_FLAG)  # type: ignore[arg-type]
    assert quant == "gptq"
    assert log == "quant=gptq, bits=4"


def test_target_model_stays_gptq(model_config: Any) -> None:
    quant, _ = resolve(model_config, draft=False, arch=QWEN35, quantization=None, explicit=False)
    assert quant == "gptq"


def test_other_architectures_are_unchanged(model_config: Any) -> None:
    # A non-Qwen3.5 draft with the flag keeps upstream behaviour (auto-detected GPTQ).
    quant, _ = resolve(model_config, draft=True, arch="Qwen3NextForCausalLM", **UNQUANT)  # type: ignore[arg-type]
    assert quant == "gptq"


def test_explicit_gptq_draft_stays_gptq(model_config: Any) -> None:
    # An explicit quantization other than unquant is the user's choice: unchanged.
    quant, _ = resolve(model_config, draft=True, arch=QWEN35, quantization="gptq", explicit=True)
    assert quant == "gptq"
