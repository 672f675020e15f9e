"""A chain target in the dense Qwen3.5 text architecture (``Qwen3_5ForCausalLM``,
``model_type: qwen3_5_text``: Gated DeltaNet + gated full attention, dense MLP) with one MTP
layer: the family of the seed's dense target, for SGLang 0.5.17 (its draft class is
``Qwen3_5ForCausalLMMTP``).

What SGLang 0.5.17 reads (line numbers of the 0.5.17 wheel, ``sglang/srt/``):

- ``model_type: qwen3_5_text`` selects SGLang's own ``Qwen3_5TextConfig``
  (configs/qwen3_5.py:15-34, a ``Qwen3NextConfig``; registered by model type in
  utils/hf_transformers/common.py:85-132 and reloaded through it, utils/hf_transformers/
  config.py:137-142). It turns ``rope_parameters`` into ``rope_scaling`` (qwen3_5.py:25-34);
  ``get_rope_config`` then indexes ``rope_parameters["rope_theta"]``
  (utils/hf_transformers/common.py:300-302), so ``rope_parameters`` must carry ``rope_theta``.
  No ``mrope_section``: the text model then uses 1-D positions (models/qwen3_5_text.py:83-88,
  and ``rope_type: default`` without it is a plain ``RotaryEmbedding``,
  layers/rotary_embedding/factory.py:164-195).
- The layer kinds come from ``full_attention_interval``, not ``layer_types``
  (configs/qwen3_next.py:259-269): interval 2 gives [linear, full]; the MTP draft sets it to
  1 (models/qwen3_5_mtp.py:96-98). ``layer_types`` is what transformers 5.12.1's
  ``Qwen3_5TextConfig`` reads (it also parses this file first, ``AutoConfig``).
- ``attn_output_gate`` (default true, models/qwen3_5.py:870): ``q_proj`` holds query and
  gate, ``2 * heads * head_dim`` rows (``QKVParallelLinear`` with ``heads * 2``, :885-895).
- Dense MLP for ``qwen3_5_text`` (``Qwen2MoeMLP``: ``gate_up_proj``, ``down_proj``;
  models/qwen3_5.py:726-734, 917-927; models/qwen2_moe.py:185-200).
- Checkpoint names: the text wrapper strips ``model.`` (models/qwen3_5_text.py:146-170); the
  body fuses ``q/k/v_proj`` -> ``qkv_proj``, ``gate/up_proj`` -> ``gate_up_proj``,
  ``in_proj_qkv`` + ``in_proj_z`` -> ``in_proj_qkvz``, ``in_proj_b`` + ``in_proj_a`` ->
  ``in_proj_ba``, drops ``.self_attn`` and skips every name containing ``mtp``
  (models/qwen3_5.py:1480-1549). The draft keeps only names containing ``mtp``, maps
  ``mtp.`` to ``model.`` (``mtp.fc`` / ``mtp.pre_fc_*`` to the top level) and fuses q/k/v and
  gate/up (models/qwen3_5_mtp.py:213-220, 279-296).

The construction (bench/tinymodel/_chain.py): every output projection of the target is zero
(GDN ``out_proj``, attention ``o_proj``, MLP ``down_proj``), so the target maps ``t`` to
``sigma(t)``. The MTP head concatenates the normalised embedding first, then the normalised
hidden state, before ``fc`` (models/qwen3_5_mtp.py:189-194). ``fc = [-I | 0]`` hands its layer
the *negated* embedding ``-e`` of the token it is given, which alone predicts a wrong token; the
layer's MLP turns it around (:func:`mtp_mlp`): its output is ``silu(g * e_flag) * e``, so the
residual stream leaves the layer as ``(silu(g * e_flag) - 1) * e``, a positive multiple of
``e``, and the head predicts ``sigma`` of it, the exact next token at every step. So the head
predicts right only when its MLP loaded: a draft whose BF16 projections were skipped at load
(the seed's bug) runs without it and accepts nothing, as the seed's did (``check_mtp_head``
proves both on the bf16 weights).

Norms: ``GemmaRMSNorm`` (``x * (1 + w)``; layers/layernorm.py:857-878) for
``input_layernorm``, ``post_attention_layernorm``, ``q_norm``, ``k_norm``, ``model.norm``
(models/qwen3_5.py:749-752, 958-964, 1385) and ``mtp.pre_fc_norm_*`` (qwen3_5_mtp.py:91-95):
weight 0; the GDN output norm is the plain gated ``RMSNorm`` (``x * w``,
kernels/ops/attention/fla/layernorm_gated.py:433-459; models/qwen3_5.py:348-360): weight 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.core import InputError
from bench.tinymodel._chain import F32, FLAG, MIN_MARGIN, rms_normed
from bench.tinymodel._qwen3next import CONV_KERNEL, LAYER_TYPES, LINEAR_HEAD_DIM, LINEAR_HEADS
from bench.tinymodel._spec import TinyModelSpec

ROPE_THETA = 10000000.0
PARTIAL_ROTARY_FACTOR = 0.25


def qwen35_config(spec: TinyModelSpec, vocab_size: int, bos_id: int, eos_id: int) -> dict[str, Any]:
    """config.json of a two-layer dense Qwen3.5 text model with one MTP layer."""
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "bos_token_id": bos_id,
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
        "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": spec.num_heads,
        "num_hidden_layers": len(LAYER_TYPES),
        "num_key_value_heads": spec.num_kv_heads,
        # the draft's ModelConfig sets 1 itself (configs/model_config.py:668-676); kept here as in
        # the Qwen3-Next relabel that loaded on SGLang 0.5.17
        "num_nextn_predict_layers": 1,
        "partial_rotary_factor": PARTIAL_ROTARY_FACTOR,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {
            "partial_rotary_factor": PARTIAL_ROTARY_FACTOR,
            "rope_theta": ROPE_THETA,
            "rope_type": "default",
        },
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "5.12.1",
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
    """Qwen3.5's split GDN projections (models/qwen3_5.py:1490-1493): ``in_proj_qkv`` is
    [q; k; v] (``output_sizes`` key, key, value of the fused layer, :488-492), ``in_proj_z``
    the gate, ``in_proj_b`` / ``in_proj_a`` one row per value head each (:510-512)."""
    h = spec.hidden_size
    key = value = LINEAR_HEADS * LINEAR_HEAD_DIM
    return {
        p + "linear_attn.in_proj_qkv.weight": (2 * key + value, h),
        p + "linear_attn.in_proj_z.weight": (value, h),
        p + "linear_attn.in_proj_b.weight": (LINEAR_HEADS, h),
        p + "linear_attn.in_proj_a.weight": (LINEAR_HEADS, h),
        p + "linear_attn.conv1d.weight": (2 * key + value, 1, CONV_KERNEL),
        p + "linear_attn.dt_bias": (LINEAR_HEADS,),
        p + "linear_attn.A_log": (LINEAR_HEADS,),
        p + "linear_attn.norm.weight": (LINEAR_HEAD_DIM,),
        p + "linear_attn.out_proj.weight": (h, value),
    }


def _block(spec: TinyModelSpec, p: str, layer_type: str) -> dict[str, tuple[int, ...]]:
    h, i = spec.hidden_size, spec.intermediate_size
    mixer = _attention(spec, p) if layer_type == "full_attention" else _linear_attention(spec, p)
    return mixer | {
        p + "mlp.gate_proj.weight": (i, h),
        p + "mlp.up_proj.weight": (i, h),
        p + "mlp.down_proj.weight": (h, i),
        p + "input_layernorm.weight": (h,),
        p + "post_attention_layernorm.weight": (h,),
    }


def qwen35_shapes(spec: TinyModelSpec, vocab_size: int) -> dict[str, tuple[int, ...]]:
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
#: every GemmaRMSNorm; ``mtp.pre_fc_norm_*`` end in neither suffix of the first two, so they are
#: named (bench/tinymodel/_qwen3next.py draws them at random: its mtp/ folder is left as it is)
_ZERO_CENTRED = (
    "layernorm.weight",
    "norm.weight",
    "pre_fc_norm_embedding.weight",
    "pre_fc_norm_hidden.weight",
)


def qwen35_weights(
    spec: TinyModelSpec, vocab_size: int, embedding: F32, head: F32
) -> dict[str, F32]:
    """The chain construction's tensors; the rest ~ N(0, weight_std), drawn in name order."""
    rng = np.random.default_rng([spec.seed, 11])
    h = spec.hidden_size
    fixed: dict[str, F32] = {
        "model.embed_tokens.weight": embedding,
        "lm_head.weight": head,
        # [normalised embedding | normalised hidden] -> minus the embedding (qwen3_5_mtp.py:192)
        "mtp.fc.weight": np.concatenate(
            [-np.eye(h, dtype=np.float32), np.zeros((h, h), dtype=np.float32)], axis=1
        ),
        **mtp_mlp(h, spec.intermediate_size),
        "linear_attn.norm.weight": np.ones(LINEAR_HEAD_DIM, dtype=np.float32),  # plain RMSNorm
        "linear_attn.dt_bias": np.ones(LINEAR_HEADS, dtype=np.float32),
        "linear_attn.A_log": np.zeros(LINEAR_HEADS, dtype=np.float32),
    }
    out: dict[str, F32] = {}
    for name, shape in sorted(qwen35_shapes(spec, vocab_size).items()):
        suffix = next((k for k in fixed if name.endswith(k)), None)
        if suffix is not None:
            out[name] = fixed[suffix]
        elif name.endswith(_ZERO) or name.endswith(_ZERO_CENTRED):
            out[name] = np.zeros(shape, dtype=np.float32)
        else:
            out[name] = rng.standard_normal(shape, dtype=np.float32) * np.float32(spec.weight_std)
    return out


#: the MTP MLP's gate on the flag dimension: ``silu(MTP_GATE * e_flag)`` is the factor its
#: output puts on ``e`` (``e_flag`` = 1 / rms of the token's embedding row, about 1)
MTP_GATE = 8.0
_MTP = "mtp.layers.0.mlp."


def mtp_mlp(hidden: int, intermediate: int) -> dict[str, F32]:
    """The MTP layer's MLP, which undoes ``fc``'s negation. Its input is ``-e`` (the layer's
    attention adds nothing: ``o_proj`` is zero); for each hidden dimension ``j`` one
    intermediate unit: gate ``-MTP_GATE`` on the flag (``silu(MTP_GATE * e_flag)``, positive),
    up ``e_j`` with a minus (``-e_j``), down ``-1`` back onto ``j``; the other units are zero."""
    if intermediate < hidden:
        raise InputError("tiny-model", "the MTP head needs intermediate_size >= hidden_size")
    gate = np.zeros((intermediate, hidden), dtype=np.float32)
    gate[:hidden, FLAG] = -MTP_GATE
    up = np.zeros((intermediate, hidden), dtype=np.float32)
    up[:hidden, :hidden] = np.eye(hidden, dtype=np.float32)
    down = np.zeros((hidden, intermediate), dtype=np.float32)
    down[:hidden, :hidden] = -np.eye(hidden, dtype=np.float32)
    return {
        _MTP + "gate_proj.weight": gate,
        _MTP + "up_proj.weight": up,
        _MTP + "down_proj.weight": down,
    }


def _silu(x: F32) -> F32:
    out: F32 = (x / (np.float32(1) + np.exp(-x))).astype(np.float32)
    return out


def mtp_head_logits(
    weights: dict[str, F32], embedding: F32, head: F32, tokens: list[int], with_mlp: bool = True
) -> F32:
    """The MTP head's logits for each token id in ``tokens`` (a float32 forward of the layer as
    SGLang runs it, on the given weights; the target-hidden half of ``fc`` is zero, so it is
    left out). ``with_mlp=False`` is the draft whose projections were skipped at load, their
    memory zero: the attention and the MLP add nothing."""
    e = rms_normed(embedding[tokens])
    x = e @ weights["mtp.fc.weight"][:, : e.shape[1]].T
    if with_mlp:
        y = rms_normed(x)
        act = _silu(y @ weights[_MTP + "gate_proj.weight"].T) * (
            y @ weights[_MTP + "up_proj.weight"].T
        )
        x = x + act @ weights[_MTP + "down_proj.weight"].T
    logits: F32 = rms_normed(x) @ head.T
    return logits


def check_mtp_head(
    weights: dict[str, F32], embedding: F32, head: F32, sigma: dict[int, int]
) -> float:
    """Prove that the MTP head predicts ``sigma(t)`` for every cycle token, by
    :data:`MIN_MARGIN`, and that without its MLP it predicts ``sigma(t)`` for none; the
    smallest margin found."""
    tokens = sorted(sigma)
    want = np.array([sigma[t] for t in tokens])
    rows = np.arange(len(tokens))
    logits = mtp_head_logits(weights, embedding, head, tokens)
    best = logits[rows, want].copy()
    logits[rows, want] = -np.inf
    margin = float(np.min(best - logits.max(axis=1)))
    if margin < MIN_MARGIN:  # the right token leads every other by the margin, so it is argmax
        raise InputError("tiny-model", f"MTP head margin {margin:.2f} < {MIN_MARGIN}: other seed")
    skipped = mtp_head_logits(weights, embedding, head, tokens, with_mlp=False).argmax(axis=1)
    if np.any(skipped == want):
        raise InputError("tiny-model", "the MTP head predicts right without its MLP: other seed")
    return margin
