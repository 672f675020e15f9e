"""The dense Qwen3.5 MTP chain target (bench/tinymodel/_qwen35.py) as a GPTQ 4-bit checkpoint
(the format of bench/tinymodel/_gptq.py: group 32, symmetric, ``desc_act`` false, exact
power-of-two scales) in the shape a naive quantizer writes for the seed's dense target: every
linear layer of the decoder blocks packed except ``in_proj_a`` / ``in_proj_b``, the whole
``mtp.*`` head BF16, and no ``dynamic`` rule or ``modules_in_block_to_quantize`` entry
mentioning ``mtp``. ``mtprule=True`` adds the ``-:.*mtp.*`` rule (the official
Qwen3.5-35B-A3B-GPTQ-Int4 shape), which makes stock SGLang build the MTP head unquantized.

SGLang 0.5.17 (``sglang/srt/``), why this shape:

- The quantized modules use the Marlin kernel (``quant_method: gptq`` with 4 bits, sym and a
  Marlin group size is converted to ``gptq_marlin``,
  layers/quantization/gptq/gptq.py:384-405, 428-450), which needs every linear's output a
  multiple of 64 and its input a multiple of 128 at TP 1 (layers/quantization/
  marlin_utils.py:55-57, 178-211; checked on the fused layer's summed outputs,
  gptq/schemes/gptq_marlin.py:57). Here every projection meets it on its own too.
- ``in_proj_b`` + ``in_proj_a`` become one fused layer ``...linear_attn.in_proj_ba``
  (models/qwen3_5.py:275-281, 1492-1493) of ``2 * linear_num_value_heads`` = 2 outputs: it
  cannot be packed (``qzeros`` packs 8 outputs to an int32) nor meet Marlin, so a negative
  ``dynamic`` rule keeps it BF16. SGLang ``re.match``-es each ``-:`` rule against the module's
  prefix (layers/quantization/utils.py:277-287, 298-319), ``model.layers.0.linear_attn.
  in_proj_ba`` (models/qwen3_5_text.py:61-65; qwen3_5.py:1359-1381, 280); the rule
  ``in_proj_[ab]`` matches that fused prefix and the checkpoint's own names.
- ``dynamic`` is the only exclusion SGLang reads (``modules_in_block_to_quantize`` is not read
  anywhere in 0.5.17); the list is still written (the quantized modules, target only) as
  GPTQModel checkpoints do.
- The draft ``Qwen3_5ForCausalLMMTP`` builds its block with the target's quant config under
  prefix ``mtp`` (models/qwen3_5_mtp.py:99-104), so its linears are
  ``mtp.layers.0.self_attn.qkv_proj`` etc.; without an ``mtp`` rule they get GPTQ parameters,
  and the BF16 ``q/k/v/o/gate/up/down`` weights are skipped with "Parameter ... not found in
  params_dict, skip loading" (qwen3_5_mtp.py:298-407): the seed's bug.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from bench.tinymodel._chain import F32
from bench.tinymodel._gptq import BITS, MTP_RULE, GptqModel, GptqOptions, dense, exact_linear, pack
from bench.tinymodel._qwen35 import qwen35_weights
from bench.tinymodel._spec import TinyModelSpec

#: block-relative names of the linear layers packed in every decoder block that has them
QUANTIZED_35 = (
    "linear_attn.in_proj_qkv",
    "linear_attn.in_proj_z",
    "linear_attn.out_proj",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)
TARGET_BLOCKS = "model.layers."
#: keeps SGLang's fused ``in_proj_ba`` (and the checkpoint's ``in_proj_a`` / ``in_proj_b``) BF16
BA_RULE = r"-:.*linear_attn\.in_proj_[ab].*"


def quantized_modules_35(names: list[str]) -> list[str]:
    """The modules (``name`` without ``.weight``) that the checkpoint packs: the
    :data:`QUANTIZED_35` layers of the target's blocks, never ``mtp.*``."""
    out = []
    for name in sorted(names):
        if not (name.startswith(TARGET_BLOCKS) and name.endswith(".weight")):
            continue
        module = name.removesuffix(".weight")
        if module.split(".", 3)[3] in QUANTIZED_35:  # after "model.layers.<i>."
            out.append(module)
    return out


def gptq35_quantization_config(
    options: GptqOptions, modules: list[str], *, mtprule: bool
) -> dict[str, Any]:
    """config.json's ``quantization_config`` (GPTQModel's keys); ``mtprule`` adds
    ``-:.*mtp.*``."""
    dynamic: dict[str, dict[str, Any]] = {BA_RULE: {}}
    if mtprule:
        dynamic[MTP_RULE] = {}
    return {
        "bits": BITS,
        "checkpoint_format": "gptq",
        "desc_act": False,
        "dynamic": dynamic,
        "group_size": options.group_size,
        "lm_head": False,
        "modules_in_block_to_quantize": modules,
        "pack_dtype": "int32",
        "quant_method": "gptq",
        "static_groups": False,
        "sym": True,
        "true_sequential": True,
    }


def gptq_qwen35_weights(
    spec: TinyModelSpec, vocab_size: int, embedding: F32, head: F32, options: GptqOptions
) -> GptqModel:
    """The chain target of ``qwen35_weights`` with the modules of :func:`quantized_modules_35`
    replaced by exactly representable 4-bit weights (zero stays zero) and packed."""
    weights = qwen35_weights(spec, vocab_size, embedding, head)
    modules = quantized_modules_35(list(weights))
    rng = np.random.default_rng([spec.seed, 12])
    dense_weights = dict(weights)
    tensors: dict[str, npt.NDArray[Any]] = dict(weights)
    for module in modules:
        name = module + ".weight"
        zero = not weights[name].any()  # the chain's output projections stay zero
        linear = exact_linear(
            rng, weights[name].shape, spec.weight_std, options.group_size, zero=zero
        )
        dense_weights[name] = dense(linear)
        del tensors[name]
        tensors |= {f"{module}.{suffix}": value for suffix, value in pack(linear).items()}
    return GptqModel(tensors=tensors, dense=dense_weights, modules=modules)
