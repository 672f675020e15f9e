"""A DFlash draft (``DFlashDraftModel``, vLLM's ``qwen3_dflash``) built to copy: every masked
slot of its query block predicts ``sigma(t)``, where ``t`` is the block's one real token.

How vLLM runs it (vllm/v1/spec_decode/dflash.py:108-205 in 0.32.0): the query block is the
bonus token ``t_p`` at position ``p`` and ``k`` mask tokens at ``p+1..p+k``; the context
(every earlier position) enters only as K/V projected from the target's hidden states through
``fc`` and ``hidden_norm`` (vllm/model_executor/models/qwen3_dflash.py:659-760). Here:

- ``fc`` is zero, so every context key and value is exactly zero (score 0, value 0);
- one low-frequency RoPE coordinate of every head reads the embedding's flag dimension
  (bench/tinymodel/_chain.py): a mask slot's query and the real token's key have opposite
  signs, scaled by the q/k norm weights to a score of about +90, a mask slot's key about -90,
  so each mask slot attends to the real token with weight 1 - 1e-30;
- values copy the normalised hidden state (``v_proj`` = I), ``o_proj`` = ``COPY_GAIN`` * I,
  the MLP is zero; the final norm and the target's LM head (shared, as the published
  checkpoints ship none: ``tie_word_embeddings``) then give ``sigma(t_p)`` at every slot.

Against a chain target (``t_{n+1} = sigma(t_n)``, no fixed point) draft token 1 is always
right and tokens 2..k always wrong: accepted per position ``[drafts, 0, ..., 0]``, acceptance
``1/k``, mean acceptance length 2, at any ``k``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.tinymodel._chain import F32, FLAG, bf16, rms_normed
from bench.tinymodel._spec import TinyModelSpec


def flag_coordinate(head_dim: int) -> int:
    """The RoPE coordinate (neox layout) of the flag inside each head: the last of the first
    half, whose frequency rope_theta ** (-(head_dim - 2) / head_dim) turns < 1e-5 rad per
    position, so the score does not depend on the distance between the slots."""
    return head_dim // 2 - 1


#: q_norm / k_norm weight on the flag coordinate: score = head_dim ** 0.5 * QK_GAIN ** 2
QK_GAIN = 4.0
#: o_proj = COPY_GAIN * I: the copied token outweighs the mask embedding in the residual
COPY_GAIN = 4.0
#: the published z-lab checkpoints' block (z-lab/Qwen3-4B-DFlash-b16: "block_size": 16);
#: vLLM 0.26.0/0.32.0 do not read it for DFlash (the block is num_speculative_tokens + 1)
PUBLISHED_BLOCK_SIZE = 16


def dflash_config(spec: TinyModelSpec, vocab_size: int, mask_id: int) -> dict[str, Any]:
    """config.json: the fields of the published z-lab DFlash drafters (architectures
    ``DFlashDraftModel``, model_type ``qwen3``, ``dflash_config.mask_token_id`` and
    ``target_layer_ids``, ``layer_types`` all ``full_attention``, no ``is_causal``: non-causal,
    as vLLM 0.26.0 ``qwen3_dflash.py:_dflash_layer_causal`` and 0.32.0 read them)."""
    h = spec.hidden_size
    return {
        "architectures": ["DFlashDraftModel"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "block_size": PUBLISHED_BLOCK_SIZE,
        # target_layer_ids [0]: vLLM takes the hidden state entering target layer 1
        # (eagle3_utils.py: "Add 1 to convert DFlash's aux layer id semantics")
        "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": [0]},
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "hidden_size": h,
        "initializer_range": spec.weight_std,
        "intermediate_size": spec.intermediate_size,
        "layer_types": ["full_attention"],
        "max_position_embeddings": spec.max_position_embeddings,
        "max_window_layers": 1,
        "model_type": "qwen3",
        "num_attention_heads": h // spec.head_dim,
        "num_hidden_layers": 1,
        "num_key_value_heads": h // spec.head_dim,
        "num_target_layers": spec.num_layers,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab_size,
    }


def dflash_weights(spec: TinyModelSpec) -> dict[str, F32]:
    """The copy head's tensors, named as in the published checkpoints (no ``model.`` prefix,
    no embed_tokens / lm_head: vLLM shares the target's)."""
    h, d = spec.hidden_size, spec.head_dim
    if h % d:
        raise ValueError(f"hidden_size {h} is not a multiple of head_dim {d}")
    heads, i, j = h // d, spec.intermediate_size, flag_coordinate(d)
    select = np.zeros((h, h), dtype=np.float32)
    for head in range(heads):
        select[head * d + j, FLAG % h] = 1.0
    q_norm = np.ones(d, dtype=np.float32)
    q_norm[j] = -QK_GAIN  # a mask slot's flag is negative: its query points at real tokens
    k_norm = np.ones(d, dtype=np.float32)
    k_norm[j] = QK_GAIN
    p = "layers.0."
    return {
        "fc.weight": np.zeros((h, h), dtype=np.float32),  # one target layer's features
        "hidden_norm.weight": np.ones(h, dtype=np.float32),
        "norm.weight": np.ones(h, dtype=np.float32),
        p + "input_layernorm.weight": np.ones(h, dtype=np.float32),
        p + "post_attention_layernorm.weight": np.ones(h, dtype=np.float32),
        p + "self_attn.q_proj.weight": select,
        p + "self_attn.k_proj.weight": select.copy(),
        p + "self_attn.v_proj.weight": np.eye(h, dtype=np.float32),
        p + "self_attn.o_proj.weight": np.eye(h, dtype=np.float32) * np.float32(COPY_GAIN),
        p + "self_attn.q_norm.weight": q_norm,
        p + "self_attn.k_norm.weight": k_norm,
        p + "mlp.gate_proj.weight": np.zeros((i, h), dtype=np.float32),
        p + "mlp.up_proj.weight": np.zeros((i, h), dtype=np.float32),
        p + "mlp.down_proj.weight": np.zeros((h, i), dtype=np.float32),
    }


def copy_logits(embedding: F32, head: F32, tokens: list[int], mask_id: int) -> F32:
    """The draft's logits at a mask slot whose block holds ``tokens`` (attention weight 1 on
    the real token): ``head @ norm(E[mask] + COPY_GAIN * norm(E[t]))``."""
    e = bf16(embedding)
    hidden = e[mask_id][None, :] + np.float32(COPY_GAIN) * rms_normed(e[np.array(tokens)])
    out: F32 = rms_normed(hidden) @ bf16(head).T
    return out
