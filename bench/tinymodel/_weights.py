"""The Qwen3ForCausalLM config and random weights, and the partly-agreeing draft."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from bench.tinymodel._spec import TinyModelSpec

Weights = dict[str, npt.NDArray[np.float32]]


def qwen3_config(spec: TinyModelSpec, vocab_size: int, bos_id: int, eos_id: int) -> dict[str, Any]:
    """config.json of a Qwen3ForCausalLM with untied embeddings."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "hidden_size": spec.hidden_size,
        "initializer_range": spec.weight_std,
        "intermediate_size": spec.intermediate_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "max_window_layers": spec.num_layers,
        "model_type": "qwen3",
        "num_attention_heads": spec.num_heads,
        "num_hidden_layers": spec.num_layers,
        "num_key_value_heads": spec.num_kv_heads,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab_size,
    }


def generation_config(bos_id: int, eos_ids: list[int]) -> dict[str, Any]:
    """generation_config.json: token ids only (no sampling defaults the server would adopt)."""
    return {"bos_token_id": bos_id, "eos_token_id": eos_ids, "transformers_version": "4.57.0"}


def shapes(spec: TinyModelSpec, vocab_size: int) -> dict[str, tuple[int, ...]]:
    """Every tensor of the checkpoint and its shape (Hugging Face names)."""
    h, i, d = spec.hidden_size, spec.intermediate_size, spec.head_dim
    out: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (vocab_size, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (vocab_size, h),
    }
    for layer in range(spec.num_layers):
        p = f"model.layers.{layer}."
        out |= {
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (spec.num_heads * d, h),
            p + "self_attn.k_proj.weight": (spec.num_kv_heads * d, h),
            p + "self_attn.v_proj.weight": (spec.num_kv_heads * d, h),
            p + "self_attn.o_proj.weight": (h, spec.num_heads * d),
            p + "self_attn.q_norm.weight": (d,),
            p + "self_attn.k_norm.weight": (d,),
            p + "mlp.gate_proj.weight": (i, h),
            p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
        }
    return out


def _is_norm(name: str) -> bool:
    return name.endswith("norm.weight")


def target_weights(spec: TinyModelSpec, vocab_size: int) -> Weights:
    """Matrices ~ N(0, weight_std), norm scales 1; drawn in sorted name order from ``seed``."""
    rng = np.random.default_rng([spec.seed, 0])
    out: Weights = {}
    for name, shape in sorted(shapes(spec, vocab_size).items()):
        if _is_norm(name):
            out[name] = np.ones(shape, dtype=np.float32)
        else:
            out[name] = rng.standard_normal(shape, dtype=np.float32) * np.float32(spec.weight_std)
    return out


def draft_weights(spec: TinyModelSpec, target: Weights) -> Weights:
    """The target's matrices plus N(0, draft_noise) (same norms, same vocabulary)."""
    rng = np.random.default_rng([spec.seed, 1])
    out: Weights = {}
    for name in sorted(target):
        weight = target[name]
        if _is_norm(name):
            out[name] = weight.copy()
        else:
            noise = rng.standard_normal(weight.shape, dtype=np.float32)
            out[name] = weight + noise * np.float32(spec.draft_noise)
    return out


def chain_target_weights(
    spec: TinyModelSpec,
    vocab_size: int,
    embedding: npt.NDArray[np.float32],
    head: npt.NDArray[np.float32],
) -> Weights:
    """A Qwen3ForCausalLM that maps token ``t`` to ``sigma(t)`` (bench/tinymodel/_chain.py):
    the target's shapes, random matrices, but ``o_proj`` and ``down_proj`` zero (no block adds
    to the residual stream) and the chain's embedding and LM head."""
    out = target_weights(spec, vocab_size)
    for name in out:
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            out[name] = np.zeros_like(out[name])
    out["model.embed_tokens.weight"] = embedding
    out["lm_head.weight"] = head
    return out
