"""The MTP chain target (bench/tinymodel/_qwen3next.py) as a GPTQ 4-bit checkpoint whose MTP
head stays BF16: the shape of the seed's checkpoint (GPTQ 4-bit, group 32, symmetric,
``desc_act`` false, BF16 ``mtp.*``).

The format (AutoGPTQ / GPTQModel ``checkpoint_format: gptq``, "v1"), for a linear layer with
weight ``W`` of shape [out, in] and ``G = in / group_size`` groups:

- ``qweight`` int32 [in / 8, out]: nibble ``i`` (bits ``4i .. 4i+3``) of ``qweight[r, n]``
  is the 4-bit value ``q[n, 8r + i]``, packed along the input dimension;
- ``qzeros`` int32 [G, out / 8]: nibble ``i`` of ``qzeros[g, c]`` is ``zero[8c + i, g] - 1``,
  packed along the output dimension;
- ``scales`` float16 [G, out]; ``g_idx`` int32 [in]: the group of each input column
  (``k // group_size`` without activation reordering);
- ``W[n, k] = (q[n, k] - zero[n, g_idx[k]]) * scales[g_idx[k], n]``.

The zero point is stored minus one ("v1"), and readers add the one back. Where it is read:
GPTQModel ``gptqmodel/utils/model.py``, ``convert_gptq_v1_to_v2_format_module`` ("v1 checkpoint
format used to do ``qzeros -= 1`` before serialization", and adds ``0x11111111`` per int32 for
4 bits to convert); vLLM 0.32.0's CPU MoE repacking writes 7 per nibble for a symmetric layer
because "The GPTQ unpack kernel ... adds +1 to stored zeros ... 0x77777777 -> +1 -> 8"
(``vllm/model_executor/layers/fused_moe/experts/cpu_moe.py:780-782``); its ExLlama kernel fills
``bias - 1`` "due to a bug in the original GPTQ checkpoint format leading to exllama kernel
adding 1 to the zero points during inference"
(``vllm/model_executor/kernels/linear/mixed_precision/exllama.py:81-92``). With
``sym: true`` the zero is ``2^(bits-1) = 8``, stored as 7, and vLLM's dense GPTQ path does not
read ``qzeros`` at all: it uses the type ``uint4b8`` (value minus 8; ``auto_gptq.py:98-102``,
``zero_points=False`` at ``auto_gptq.py:346``). The packing order of both tensors is vLLM's
``pack_quantized_values_into_int32`` (``layers/quantization/utils/quant_utils.py:574-593``).

Weights that round-trip exactly: every quantized matrix is ``(q - 8) * s`` with ``q`` a random
4-bit value and ``s`` a power of two per (output row, group): at most four significant bits,
exact in BF16, FP16 and FP32, so the dense weights the checkpoint encodes are known exactly
(the chain's zero output projections are ``q = 8``). The chain, greedy output and MTP
acceptance therefore stay as in bench/tinymodel/_chain.py.

What is quantized: every linear layer of the target's decoder blocks (``model.layers.*``) that
vLLM builds with the checkpoint's quantization config, except ``linear_attn.in_proj_ba``
(2 outputs here: GPTQ packs ``qzeros`` 8 outputs to an int32) and, unless
:attr:`GptqOptions.quantize_experts`, the routed experts (vLLM 0.32.0's CPU build has no GPTQ
MoE kernel without AMX: docs/gptq-cpu.md). The router ``mlp.gate`` and
``mlp.shared_expert_gate`` are never quantized by vLLM (``qwen3_next.py:191-203``:
``GateLinear`` without, ``ReplicatedLinear`` with ``quant_config=None``); ``mtp.*``, the
embedding, the LM head and the norms stay BF16. The checkpoint says so the way GPTQModel's
checkpoints do, with negative ``dynamic`` rules (``"-:<regex>": {}``: vLLM skips quantization of
a matching module, ``layers/quantization/utils/gptq_utils.py:85-103``), and also lists the
quantized modules in ``modules_in_block_to_quantize`` (full names; vLLM tests them by substring,
``gptq_utils.py:120-169``, and without the list would read them from the safetensors dtypes,
``auto_gptq.py:273-298``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import Field

from bench.core import InputError, StrictModel
from bench.tinymodel._chain import F32, bf16
from bench.tinymodel._qwen3next import qwen3_next_weights
from bench.tinymodel._spec import TinyModelSpec

BITS = 4
#: values of ``BITS`` bits per int32
PACK = 32 // BITS
MAX_Q = 2**BITS - 1
#: the symmetric zero point (AutoGPTQ/GPTQModel: ``(maxq + 1) / 2``)
SYM_ZERO = 2 ** (BITS - 1)
#: ``checkpoint_format: gptq`` stores ``zero - 1`` in ``qzeros`` (the module docstring says where)
V1_ZERO_OFFSET = 1
#: block-relative names of the linear layers quantized in every decoder block that has them
BLOCK_QUANTIZED = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "linear_attn.in_proj_qkvz",
    "linear_attn.out_proj",
    "mlp.shared_expert.gate_proj",
    "mlp.shared_expert.up_proj",
    "mlp.shared_expert.down_proj",
)
EXPERT_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
TARGET_BLOCKS = "model.layers."
#: GPTQModel ``dynamic`` negative rules (``-:`` + a regex ``re.match``-ed against module names)
MTP_RULE = "-:.*mtp.*"
EXPERTS_RULE = r"-:.*\.mlp\.experts.*"
_SCALE_SPREAD = (-1, 0, 1)  # a group's scale is the base scale times 2**one of these


class GptqOptions(StrictModel):
    """How the GPTQ checkpoint is made. Defaults: the seed's checkpoint (group 32)."""

    group_size: int = Field(default=32, gt=0)
    #: also pack the routed experts (vLLM's CPU build then needs AMX to serve it)
    quantize_experts: bool = False


@dataclass(frozen=True)
class GptqLinear:
    """One quantized linear layer as written: its 4-bit values, zeros and scales."""

    q: npt.NDArray[np.int32]  # [out, in], 0 .. MAX_Q
    zeros: npt.NDArray[np.int32]  # [out, groups], the zero point itself (not minus one)
    scales: npt.NDArray[np.float16]  # [out, groups]
    group_size: int


def nibble_std() -> float:
    """Standard deviation of ``q - SYM_ZERO`` for ``q`` uniform on 0 .. MAX_Q."""
    return math.sqrt(((MAX_Q + 1) ** 2 - 1) / 12)


def exact_linear(
    rng: np.random.Generator, shape: tuple[int, ...], std: float, group_size: int, zero: bool
) -> GptqLinear:
    """Random 4-bit values (all ``SYM_ZERO`` when ``zero``: a zero matrix) and power-of-two
    scales around ``std / nibble_std()``, so the dense weights are ~N(0, std)-sized and exact."""
    out_features, in_features = shape
    if in_features % group_size or out_features % PACK or in_features % PACK:
        if in_features % group_size:
            raise InputError(
                "--gptq-group-size",
                f"{group_size} does not divide {in_features}, the input width of a {shape} "
                "layer of the tiny model: give a divisor of it (the seed's: 32)",
            )
        raise InputError(
            "tiny-model",
            f"a {shape} matrix cannot be GPTQ-packed: input a multiple of the group "
            f"({group_size}) and of {PACK}, output a multiple of {PACK}",
        )
    groups = in_features // group_size
    base = 2.0 ** round(math.log2(std / nibble_std()))
    exponents = rng.choice(_SCALE_SPREAD, size=(out_features, groups))
    scales = (base * np.exp2(exponents)).astype(np.float16)
    if zero:
        q = np.full(shape, SYM_ZERO, dtype=np.int32)
    else:
        q = rng.integers(0, MAX_Q + 1, size=shape).astype(np.int32)
    zeros = np.full((out_features, groups), SYM_ZERO, dtype=np.int32)
    return GptqLinear(q=q, zeros=zeros, scales=scales, group_size=group_size)


def dense(linear: GptqLinear) -> F32:
    """The float32 weight [out, in] the layer encodes (exact: checked against bf16)."""
    groups = np.arange(linear.q.shape[1]) // linear.group_size
    values = (linear.q - linear.zeros[:, groups]).astype(np.float32)
    weight: F32 = values * linear.scales.astype(np.float32)[:, groups]
    if not np.array_equal(bf16(weight), weight):
        raise InputError("tiny-model", "a GPTQ weight is not exact in bf16")
    return weight


def _pack_nibbles(values: npt.NDArray[np.int32], axis: int) -> npt.NDArray[np.int32]:
    """Pack 4-bit ``values`` ``PACK`` to an int32 along ``axis``: element ``PACK * j + i`` in
    nibble ``i`` of word ``j`` (vLLM's ``pack_quantized_values_into_int32``)."""
    moved = np.moveaxis(values.astype(np.uint32), axis, -1)
    words = np.zeros((*moved.shape[:-1], moved.shape[-1] // PACK), dtype=np.uint32)
    for i in range(PACK):
        words |= (moved[..., i::PACK] & np.uint32(MAX_Q)) << np.uint32(BITS * i)
    return np.moveaxis(words.view(np.int32), -1, axis)


def pack(linear: GptqLinear) -> dict[str, npt.NDArray[Any]]:
    """The layer's checkpoint tensors (suffixes ``qweight``, ``qzeros``, ``scales``,
    ``g_idx``) in the ``checkpoint_format: gptq`` layout of the module docstring."""
    in_features = linear.q.shape[1]
    stored_zeros = linear.zeros - V1_ZERO_OFFSET
    return {
        "qweight": _pack_nibbles(linear.q.T, axis=0),
        "qzeros": _pack_nibbles(stored_zeros.T, axis=1),
        "scales": np.ascontiguousarray(linear.scales.T),
        "g_idx": (np.arange(in_features) // linear.group_size).astype(np.int32),
    }


def quantized_modules(names: list[str], options: GptqOptions) -> list[str]:
    """The modules (``name`` without ``.weight``) that the checkpoint packs."""
    out = []
    for name in sorted(names):
        if not (name.startswith(TARGET_BLOCKS) and name.endswith(".weight")):
            continue
        module = name.removesuffix(".weight")
        relative = module.split(".", 3)[3]  # after "model.layers.<i>."
        parts = relative.split(".")
        expert = parts[:2] == ["mlp", "experts"] and parts[-1] in EXPERT_PROJECTIONS
        if relative in BLOCK_QUANTIZED or (expert and options.quantize_experts):
            out.append(module)
    return out


def gptq_quantization_config(options: GptqOptions, modules: list[str]) -> dict[str, Any]:
    """config.json's ``quantization_config`` (GPTQModel's keys)."""
    dynamic: dict[str, dict[str, Any]] = {MTP_RULE: {}}
    if not options.quantize_experts:
        dynamic[EXPERTS_RULE] = {}
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


@dataclass(frozen=True)
class GptqModel:
    """What the GPTQ chain target is made of: the checkpoint's tensors, the dense weights they
    encode, and the quantized modules."""

    tensors: dict[str, npt.NDArray[Any]]
    dense: dict[str, F32]
    modules: list[str]


def gptq_mtp_weights(
    spec: TinyModelSpec, vocab_size: int, embedding: F32, head: F32, options: GptqOptions
) -> GptqModel:
    """The MTP chain target of ``qwen3_next_weights`` with the modules of
    :func:`quantized_modules` replaced by exactly representable 4-bit weights and packed."""
    weights = qwen3_next_weights(spec, vocab_size, embedding, head)
    modules = quantized_modules(list(weights), options)
    rng = np.random.default_rng([spec.seed, 10])
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
