"""The dense Qwen3.5 chain target in the layout of the published Qwen3.5 checkpoints: the text
model inside ``Qwen3_5ForConditionalGeneration`` (``model_type: qwen3_5``), the same tensors
under ``model.language_model.`` and the MTP head at ``mtp.``, no vision weights.

Why a second layout of the same weights: vLLM 0.26.0 registers the Qwen3.5 family only as
``Qwen3_5ForConditionalGeneration`` (vllm/model_executor/models/registry.py:573; the text-only
``Qwen3_5ForCausalLM`` of bench/tinymodel/_qwen35.py is a class there, not an architecture),
and its ``--language-model-only`` skips the vision tower (models/interfaces.py:257-296:
every tower of a modality whose limit is 0 becomes a ``StageMissingLayer``), so a checkpoint
without vision weights loads. The weights map as the published checkpoints' do
(models/qwen3_vl.py:1705-1711: ``model.language_model.`` -> ``language_model.model.``,
``lm_head.`` -> ``language_model.lm_head.``); the MTP draft (``Qwen3_5MTP``, chosen for
``model_type: qwen3_5`` at config/speculative.py:505-507) reads ``mtp.*`` and the target's
embedding (models/qwen3_5_mtp.py:292-305). SGLang 0.5.17 loads the text-only layout
(``Qwen3_5ForCausalLM``, models/qwen3_5_text.py) for MTP; its DFLASH needs the
conditional-generation class (the text-only wrapper lacks ``set_dflash_layers_to_capture``
in 0.5.17, models/qwen3_5_text.py; 0.5.19 adds it), which always builds the vision tower
(``quant_config=None``, models/qwen3_vl.py) and loads the image processor, so the folder ships
``preprocessor_config.json`` as the published checkpoints do (transformers 5.12.1:
``Can't load image processor`` without one). Each engine gets the layout it serves, with
byte-identical tensors.
"""

from __future__ import annotations

from typing import Any

TEXT_PREFIX = "model."
VL_TEXT_PREFIX = "model.language_model."

#: a vision tower that is never built (``--language-model-only``); the config must still name
#: one (``Qwen3_5Config.vision_config``), so it is as small as the fields allow
TINY_VISION: dict[str, Any] = {
    "depth": 1,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 64,
    "in_channels": 3,
    "intermediate_size": 128,
    "num_heads": 2,
    "num_position_embeddings": 64,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}


#: preprocessor_config.json of the layout: the image processor the published checkpoints name,
#: its patch, temporal patch and merge sizes those of :data:`TINY_VISION`
TINY_IMAGE_PROCESSOR: dict[str, Any] = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen3VLProcessor",
    "patch_size": TINY_VISION["patch_size"],
    "temporal_patch_size": TINY_VISION["temporal_patch_size"],
    "merge_size": TINY_VISION["spatial_merge_size"],
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "size": {"shortest_edge": 4096, "longest_edge": 1048576},
}


def vl_name(name: str) -> str:
    """A text-only checkpoint's tensor or module name in the conditional-generation layout:
    ``model.X`` -> ``model.language_model.X``; ``lm_head.*`` and ``mtp.*`` stay."""
    if name.startswith(TEXT_PREFIX):
        return VL_TEXT_PREFIX + name.removeprefix(TEXT_PREFIX)
    return name


def vl_config(text_config: dict[str, Any]) -> dict[str, Any]:
    """config.json of the conditional-generation wrapper around ``text_config`` (a
    ``qwen3_5_text`` config.json as bench/tinymodel/_qwen35.py writes it). A
    ``quantization_config`` moves to the top level, its module names renamed by
    :func:`vl_name`."""
    text = {
        k: v for k, v in text_config.items() if k not in ("architectures", "quantization_config")
    }
    out: dict[str, Any] = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": text,
        "tie_word_embeddings": text["tie_word_embeddings"],
        "torch_dtype": text["torch_dtype"],
        "transformers_version": text["transformers_version"],
        "vision_config": {**TINY_VISION, "out_hidden_size": text["hidden_size"]},
    }
    quant = text_config.get("quantization_config")
    if quant is not None:
        modules = quant.get("modules_in_block_to_quantize")
        out["quantization_config"] = quant | (
            {"modules_in_block_to_quantize": [vl_name(m) for m in modules]} if modules else {}
        )
    return out


def vl_tensors(tensors: dict[str, Any]) -> dict[str, Any]:
    """The same tensors (the same arrays) under their conditional-generation names."""
    return {vl_name(name): value for name, value in tensors.items()}
