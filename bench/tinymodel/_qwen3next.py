"""A chain target in the Qwen3-Next architecture (``Qwen3NextForCausalLM``: Gated DeltaNet
linear attention + gated full attention, the hybrid of the seed's Qwen3.5-family target) with
one MTP layer, so that ``{"method": "qwen3_next_mtp"}`` (normalised by vLLM to ``mtp``) runs.

Why Qwen3-Next and not Qwen3.5: vLLM 0.26.0 maps only ``model_type`` ``qwen3_5`` /
``qwen3_5_moe`` (the multimodal wrapper) to ``Qwen3_5MTP``
(vllm/config/speculative.py:505 in 0.26.0); ``qwen3_next`` maps to ``Qwen3NextMTP`` in both
0.26.0 and 0.32.0 (0.32.0 vllm/config/speculative.py:838), text only, no vision tower.

The construction (bench/tinymodel/_chain.py): every block's output projection is zero (GDN
``out_proj``, attention ``o_proj``, MLP ``down_proj``), so the target maps ``t`` to
``sigma(t)``; the MTP layer's ``fc`` keeps only the normalised embedding of the token it is
given (``[I | 0]``; vllm/model_executor/models/qwen3_next_mtp.py:120-136 concatenates
embedding then hidden state), its block adds nothing, and the shared LM head gives ``sigma``
of that token: the exact next token at every MTP step (acceptance 1.0 at any k). Norms are
zero-centred (``GemmaRMSNorm``: ``x * (1 + w)``, qwen3_next.py:32), so their weights are 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.tinymodel._chain import F32
from bench.tinymodel._spec import TinyModelSpec

LAYER_TYPES = ("linear_attention", "full_attention")
#: vLLM's Qwen3-Next needs at least one sparse-MoE layer (qwen3_next.py:789-800 in 0.32.0,
#: "No Qwen3Next layer found in the model.layers." otherwise): every layer is one here
EXPERTS = 2
EXPERT_SIZE = 64
LINEAR_HEADS = 1
#: vLLM 0.32.0 CPU chunk_gated_delta_rule_cpu refuses 32 ("Unexpected head dim size, 32");
#: 128 is the published Qwen3-Next and Qwen3.5 value
LINEAR_HEAD_DIM = 128
CONV_KERNEL = 4


def qwen3_next_config(
    spec: TinyModelSpec, vocab_size: int, bos_id: int, eos_id: int
) -> dict[str, Any]:
    """config.json of a two-layer Qwen3-Next (2 routed experts + a shared one in every
    layer) with one MTP layer."""
    return {
        "architectures": ["Qwen3NextForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos_id,
        "decoder_sparse_step": 1,
        "eos_token_id": eos_id,
        "full_attention_interval": len(LAYER_TYPES),
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "hidden_size": spec.hidden_size,
        "initializer_range": spec.weight_std,
        "intermediate_size": spec.intermediate_size,
        "layer_types": list(LAYER_TYPES),
        "linear_conv_kernel_dim": CONV_KERNEL,
        "linear_key_head_dim": LINEAR_HEAD_DIM,
        "linear_num_key_heads": LINEAR_HEADS,
        "linear_num_value_heads": LINEAR_HEADS,
        "linear_value_head_dim": LINEAR_HEAD_DIM,
        "max_position_embeddings": spec.max_position_embeddings,
        "mlp_only_layers": [],
        "model_type": "qwen3_next",
        "moe_intermediate_size": EXPERT_SIZE,
        "mtp_num_hidden_layers": 1,
        "norm_topk_prob": True,
        "num_attention_heads": spec.num_heads,
        "num_experts": EXPERTS,
        "num_experts_per_tok": 1,
        "num_hidden_layers": len(LAYER_TYPES),
        "num_key_value_heads": spec.num_kv_heads,
        # vLLM reads the MTP depth from here (n_predict; speculative.py:841 in 0.32.0)
        "num_nextn_predict_layers": 1,
        "partial_rotary_factor": 0.25,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 10000000.0,
        "shared_expert_intermediate_size": EXPERT_SIZE,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.0",
        "use_cache": True,
        "vocab_size": vocab_size,
    }


def _attention(spec: TinyModelSpec, p: str) -> dict[str, tuple[int, ...]]:
    h, d = spec.hidden_size, spec.head_dim
    return {
        p + "self_attn.q_proj.weight": (2 * spec.num_heads * d, h),  # query + output gate
        p + "self_attn.k_proj.weight": (spec.num_kv_heads * d, h),
        p + "self_attn.v_proj.weight": (spec.num_kv_heads * d, h),
        p + "self_attn.o_proj.weight": (h, spec.num_heads * d),
        p + "self_attn.q_norm.weight": (d,),
        p + "self_attn.k_norm.weight": (d,),
    }


def _linear_attention(spec: TinyModelSpec, p: str) -> dict[str, tuple[int, ...]]:
    h = spec.hidden_size
    key = value = LINEAR_HEADS * LINEAR_HEAD_DIM
    return {
        p + "linear_attn.in_proj_qkvz.weight": (2 * key + 2 * value, h),
        p + "linear_attn.in_proj_ba.weight": (2 * LINEAR_HEADS, h),
        p + "linear_attn.conv1d.weight": (2 * key + value, 1, CONV_KERNEL),
        p + "linear_attn.dt_bias": (LINEAR_HEADS,),
        p + "linear_attn.A_log": (LINEAR_HEADS,),
        p + "linear_attn.norm.weight": (LINEAR_HEAD_DIM,),
        p + "linear_attn.out_proj.weight": (h, value),
    }


def _mlp(p: str, h: int, i: int) -> dict[str, tuple[int, ...]]:
    return {
        p + "gate_proj.weight": (i, h),
        p + "up_proj.weight": (i, h),
        p + "down_proj.weight": (h, i),
    }


def _block(spec: TinyModelSpec, p: str, layer_type: str) -> dict[str, tuple[int, ...]]:
    h = spec.hidden_size
    mixer = _attention(spec, p) if layer_type == "full_attention" else _linear_attention(spec, p)
    moe: dict[str, tuple[int, ...]] = {
        p + "mlp.gate.weight": (EXPERTS, h),
        p + "mlp.shared_expert_gate.weight": (1, h),
    } | _mlp(p + "mlp.shared_expert.", h, EXPERT_SIZE)
    for expert in range(EXPERTS):
        moe |= _mlp(f"{p}mlp.experts.{expert}.", h, EXPERT_SIZE)
    return (
        mixer
        | moe
        | {
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
        }
    )


def qwen3_next_shapes(spec: TinyModelSpec, vocab_size: int) -> dict[str, tuple[int, ...]]:
    """Every tensor (Hugging Face names, ``mtp.`` for the MTP layer) and its shape."""
    h = spec.hidden_size
    out: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (vocab_size, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (vocab_size, h),
        "mtp.fc.weight": (h, 2 * h),
        "mtp.pre_fc_norm_embedding.weight": (h,),
        "mtp.pre_fc_norm_hidden.weight": (h,),
        "mtp.norm.weight": (h,),
    }
    for layer, kind in enumerate(LAYER_TYPES):
        out |= _block(spec, f"model.layers.{layer}.", kind)
    return out | _block(spec, "mtp.layers.0.", "full_attention")


_ZERO = ("o_proj.weight", "out_proj.weight", "down_proj.weight")  # nothing joins the residual
_ZERO_CENTRED = ("layernorm.weight", "norm.weight", "q_norm.weight", "k_norm.weight")


def qwen3_next_weights(
    spec: TinyModelSpec, vocab_size: int, embedding: F32, head: F32
) -> dict[str, F32]:
    """The chain construction's tensors; the rest ~ N(0, weight_std), drawn in name order."""
    rng = np.random.default_rng([spec.seed, 9])
    h = spec.hidden_size
    fixed: dict[str, F32] = {
        "model.embed_tokens.weight": embedding,
        "lm_head.weight": head,
        "mtp.fc.weight": np.concatenate(
            [np.eye(h, dtype=np.float32), np.zeros((h, h), dtype=np.float32)], axis=1
        ),
        "linear_attn.norm.weight": np.ones(LINEAR_HEAD_DIM, dtype=np.float32),  # plain RMSNorm
        "linear_attn.dt_bias": np.ones(LINEAR_HEADS, dtype=np.float32),
        "linear_attn.A_log": np.zeros(LINEAR_HEADS, dtype=np.float32),
    }
    out: dict[str, F32] = {}
    for name, shape in sorted(qwen3_next_shapes(spec, vocab_size).items()):
        suffix = next((k for k in fixed if name.endswith(k)), None)
        if suffix is not None:
            out[name] = fixed[suffix]
        elif name.endswith(_ZERO) or name.endswith(_ZERO_CENTRED):
            out[name] = np.zeros(shape, dtype=np.float32)
        else:
            out[name] = rng.standard_normal(shape, dtype=np.float32) * np.float32(spec.weight_std)
    return out
