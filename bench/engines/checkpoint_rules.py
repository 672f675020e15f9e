"""The pinned engines' own rules for checkpoints, as constants: GPTQ configurations vLLM 0.33.0
and SGLang 0.5.19 accept, the drafter architectures each registers, the DFlash2 config keys each
reads. Each is cited as ``file:line`` of the pinned release (the ``SRC_*`` names);
tests/contract/test_checkpoint_rules.py re-reads those files and fails when a constant here no
longer matches. ``bench.matrix`` applies them to model files (``specbench preflight``)."""

from __future__ import annotations

from bench.core import EngineName

# The releases these rules were read from; an experiment pinning another one gets a warning.
RULES_VERSION: dict[EngineName, str] = {"vllm": "0.33.0", "sglang": "0.5.19"}

# -- vLLM 0.33.0 --------------------------------------------------------------------------------
# vllm/model_executor/layers/quantization/utils/marlin_utils.py:37
VLLM_MARLIN_GROUP_SIZES: tuple[int, ...] = (-1, 32, 64, 128)
# (bits, sym) of AutoGPTQConfig.TYPE_MAP: vllm/model_executor/layers/quantization/auto_gptq.py:99
VLLM_GPTQ_TYPES: frozenset[tuple[int, bool]] = frozenset({(4, True), (8, True)})
# Keys AutoGPTQConfig.from_config reads with get_from_keys (no default): auto_gptq.py:194-197
VLLM_GPTQ_REQUIRED_KEYS: tuple[str, ...] = ("bits", "group_size", "desc_act", "sym")
# Registry names a dflash draft may resolve to (registry.py _SPECULATIVE_DECODING_MODELS,
# lines 655-745), after EAGLEConfig's rewrite (transformers_utils/configs/eagle.py:65-76).
VLLM_DFLASH_DRAFT_ARCHS: frozenset[str] = frozenset(
    {
        "DFlashDraftModel",
        "DFlash2DraftModel",
        "DFlash2BeamDraftModel",
        "DFlashMuseGlimmerAssistantModel",
        "DFlashQwen3XPressModel",
        "DFlashLagunaForCausalLM",
        "LiLiCorrDraftModel",
    }
)
# The rewrite leaves these as they are (eagle.py:71-73); any other name gets the prefix.
VLLM_DFLASH_PREFIX = "DFlash"
VLLM_DFLASH_REWRITE_EXEMPT: frozenset[str] = frozenset({"LiLiCorrDraftModel"})
# dflash_config keys qwen3_dflash2.py reads with [] (KeyError at load): lines 253, 254, 385, 386
VLLM_DFLASH2_REQUIRED_KEYS: tuple[str, ...] = (
    "conv_kernel_size",
    "conv_group_size",
    "selector_rank",
    "selector_top_k",
)

# -- SGLang 0.5.19 ------------------------------------------------------------------------------
# sglang/srt/layers/quantization/marlin_utils.py:60
SGLANG_MARLIN_GROUP_SIZES: tuple[int, ...] = (-1, 32, 64, 128)
# GPTQMarlinConfig.TYPE_MAP, sglang/srt/layers/quantization/gptq/gptq.py:298
SGLANG_GPTQ_MARLIN_TYPES: frozenset[tuple[int, bool]] = frozenset({(4, True), (8, True)})
# GPTQConfig.__init__, gptq/gptq.py:106
SGLANG_GPTQ_BITS: tuple[int, ...] = (2, 3, 4, 8)
# EntryClass of sglang/srt/models/dflash.py:1146 (the DFLASH drafter classes)
SGLANG_DFLASH_DRAFT_ARCHS: frozenset[str] = frozenset(
    {
        "DFlashDraftModel",
        "DFlashLagunaForCausalLM",
        "MuseGlimmerAssistantModel",
        "DFlash2DraftModel",
    }
)

DFLASH2_ARCH = "DFlash2DraftModel"

# Where each rule lives in the pinned source (shown with every finding).
SRC_VLLM_DESC_ACT = "vllm/model_executor/layers/quantization/utils/gptq_utils.py:23-50"
SRC_VLLM_TYPES = "vllm/model_executor/layers/quantization/auto_gptq.py:99-102,152-155"
SRC_VLLM_KEYS = "vllm/model_executor/layers/quantization/auto_gptq.py:190-197"
SRC_VLLM_MARLIN = "vllm/model_executor/layers/quantization/utils/marlin_utils.py:37,143-149,164-170"
SRC_VLLM_DYNAMIC = "vllm/model_executor/layers/quantization/utils/gptq_utils.py:55-80"
SRC_VLLM_QUANT_SOURCE = (
    "vllm/transformers_utils/model_arch_config_convertor.py:285-292, "
    "vllm/model_executor/model_loader/weight_utils.py:239-279,351-386"
)
SRC_VLLM_REGISTRY = (
    "vllm/model_executor/models/registry.py:655-745, vllm/transformers_utils/configs/eagle.py:65-76"
)
SRC_VLLM_DFLASH2_KEYS = "vllm/model_executor/models/qwen3_dflash2.py:253-254,385-386"
SRC_VLLM_LAYER_IDS = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:34-40,113-150"
SRC_SGLANG_BITS = "sglang/srt/layers/quantization/gptq/gptq.py:106-110"
SRC_SGLANG_MARLIN = (
    "sglang/srt/layers/quantization/gptq/gptq.py:414-435,459-480, "
    "sglang/srt/layers/quantization/marlin_utils.py:60"
)
SRC_SGLANG_QUANT_SOURCE = "sglang/srt/configs/model_config.py:1243-1262"
SRC_SGLANG_REGISTRY = "sglang/srt/models/dflash.py:1146-1151, sglang/srt/models/registry.py:95-125"
SRC_SGLANG_SELECTOR = (
    "sglang/srt/models/dflash.py:1072-1075, sglang/srt/speculative/dflash_utils.py:642-646"
)
SRC_SGLANG_CONV = "sglang/srt/speculative/dflash_utils.py:626-631"
SRC_SGLANG_LAYER_IDS = "sglang/srt/speculative/dflash_utils.py:553-583,654-670"


def vllm_dflash_arch(arch: str) -> str:
    """The name vLLM asks its registry for when a draft is served with method 'dflash'."""
    if (
        arch.startswith(VLLM_DFLASH_PREFIX)
        or arch.endswith(VLLM_DFLASH_PREFIX)
        or arch in VLLM_DFLASH_REWRITE_EXEMPT
    ):
        return arch
    return VLLM_DFLASH_PREFIX + arch
