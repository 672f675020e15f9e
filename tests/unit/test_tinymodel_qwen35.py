"""bench.tinymodel's dense Qwen3.5 MTP chain target (mtp35/) and its GPTQ 4-bit checkpoints
(mtp35-gptq/, mtp35-gptq-mtprule/), checked against what SGLang 0.5.17 loads: the names its
loaders map (written out here from models/qwen3_5.py:1480-1549, qwen3_5_text.py:146-170 and
qwen3_5_mtp.py:210-410), the Marlin shape rule, the GPTQ format (dequantized by
test_tinymodel_gptq's reader, written from the format's definition) and the ``dynamic`` rules
(``re.match`` of each ``-:`` rule against the module prefix, layers/quantization/utils.py:277-326).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from test_tinymodel_gptq import dequantize, read_raw, unpack_int4

from bench.cli import main
from bench.tinymodel import GptqOptions, TinyModels, make_tiny_models, read_bf16_safetensors
from bench.tinymodel._gptq35 import gptq_qwen35_weights

Raw = dict[str, tuple[str, npt.NDArray[Any]]]

#: every tensor of mtp35/ (Hugging Face names of a dense Qwen3.5 text checkpoint)
EXPECTED_NAMES = {
    "lm_head.weight",
    "model.embed_tokens.weight",
    "model.norm.weight",
    "model.layers.0.input_layernorm.weight",
    "model.layers.0.post_attention_layernorm.weight",
    "model.layers.0.linear_attn.A_log",
    "model.layers.0.linear_attn.dt_bias",
    "model.layers.0.linear_attn.conv1d.weight",
    "model.layers.0.linear_attn.in_proj_qkv.weight",
    "model.layers.0.linear_attn.in_proj_z.weight",
    "model.layers.0.linear_attn.in_proj_b.weight",
    "model.layers.0.linear_attn.in_proj_a.weight",
    "model.layers.0.linear_attn.norm.weight",
    "model.layers.0.linear_attn.out_proj.weight",
    "model.layers.0.mlp.gate_proj.weight",
    "model.layers.0.mlp.up_proj.weight",
    "model.layers.0.mlp.down_proj.weight",
    "model.layers.1.input_layernorm.weight",
    "model.layers.1.post_attention_layernorm.weight",
    "model.layers.1.self_attn.q_proj.weight",
    "model.layers.1.self_attn.k_proj.weight",
    "model.layers.1.self_attn.v_proj.weight",
    "model.layers.1.self_attn.o_proj.weight",
    "model.layers.1.self_attn.q_norm.weight",
    "model.layers.1.self_attn.k_norm.weight",
    "model.layers.1.mlp.gate_proj.weight",
    "model.layers.1.mlp.up_proj.weight",
    "model.layers.1.mlp.down_proj.weight",
    "mtp.fc.weight",
    "mtp.pre_fc_norm_embedding.weight",
    "mtp.pre_fc_norm_hidden.weight",
    "mtp.norm.weight",
    "mtp.layers.0.input_layernorm.weight",
    "mtp.layers.0.post_attention_layernorm.weight",
    "mtp.layers.0.self_attn.q_proj.weight",
    "mtp.layers.0.self_attn.k_proj.weight",
    "mtp.layers.0.self_attn.v_proj.weight",
    "mtp.layers.0.self_attn.o_proj.weight",
    "mtp.layers.0.self_attn.q_norm.weight",
    "mtp.layers.0.self_attn.k_norm.weight",
    "mtp.layers.0.mlp.gate_proj.weight",
    "mtp.layers.0.mlp.up_proj.weight",
    "mtp.layers.0.mlp.down_proj.weight",
}

#: the target's parameters (``Qwen3_5ForCausalLM``: ``lm_head`` on the wrapper, the rest on the
#: body under ``model.``; models/qwen3_5.py:216-371, 688-760, 830-964, 1330-1388)
TARGET_PARAMS = {
    "lm_head.weight",
    "model.embed_tokens.weight",
    "model.norm.weight",
    "model.layers.0.input_layernorm.weight",
    "model.layers.0.post_attention_layernorm.weight",
    "model.layers.0.linear_attn.A_log",
    "model.layers.0.linear_attn.dt_bias",
    "model.layers.0.linear_attn.conv1d.weight",
    "model.layers.0.linear_attn.in_proj_qkvz.weight",
    "model.layers.0.linear_attn.in_proj_ba.weight",
    "model.layers.0.linear_attn.norm.weight",
    "model.layers.0.linear_attn.out_proj.weight",
    "model.layers.0.mlp.gate_up_proj.weight",
    "model.layers.0.mlp.down_proj.weight",
    "model.layers.1.input_layernorm.weight",
    "model.layers.1.post_attention_layernorm.weight",
    "model.layers.1.qkv_proj.weight",
    "model.layers.1.o_proj.weight",
    "model.layers.1.q_norm.weight",
    "model.layers.1.k_norm.weight",
    "model.layers.1.mlp.gate_up_proj.weight",
    "model.layers.1.mlp.down_proj.weight",
}
#: the draft's parameters loaded from ``mtp.*`` (``Qwen3_5ForCausalLMMTP``,
#: models/qwen3_5_mtp.py:90-104; embedding and LM head come from the target)
DRAFT_PARAMS = {
    "fc.weight",
    "pre_fc_norm_embedding.weight",
    "pre_fc_norm_hidden.weight",
    "model.norm.weight",
    "model.layers.0.input_layernorm.weight",
    "model.layers.0.post_attention_layernorm.weight",
    "model.layers.0.qkv_proj.weight",
    "model.layers.0.o_proj.weight",
    "model.layers.0.q_norm.weight",
    "model.layers.0.k_norm.weight",
    "model.layers.0.mlp.gate_up_proj.weight",
    "model.layers.0.mlp.down_proj.weight",
}
#: SGLang's fused linear modules of the target (prefix -> the checkpoint modules fused in it)
SGLANG_LINEARS = {
    "model.layers.0.linear_attn.in_proj_qkvz": ["linear_attn.in_proj_qkv", "linear_attn.in_proj_z"],
    "model.layers.0.linear_attn.in_proj_ba": ["linear_attn.in_proj_b", "linear_attn.in_proj_a"],
    "model.layers.0.linear_attn.out_proj": ["linear_attn.out_proj"],
    "model.layers.0.mlp.gate_up_proj": ["mlp.gate_proj", "mlp.up_proj"],
    "model.layers.0.mlp.down_proj": ["mlp.down_proj"],
    "model.layers.1.self_attn.qkv_proj": [
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
    ],
    "model.layers.1.self_attn.o_proj": ["self_attn.o_proj"],
    "model.layers.1.mlp.gate_up_proj": ["mlp.gate_proj", "mlp.up_proj"],
    "model.layers.1.mlp.down_proj": ["mlp.down_proj"],
}
#: the draft's linear module prefixes (built under prefix "mtp", models/qwen3_5_mtp.py:99-104)
DRAFT_LINEARS = (
    "mtp.layers.0.self_attn.qkv_proj",
    "mtp.layers.0.self_attn.o_proj",
    "mtp.layers.0.mlp.gate_up_proj",
    "mtp.layers.0.mlp.down_proj",
)
QUANTIZED = {
    f"model.layers.{i}.{m}"
    for i, modules in (
        (0, ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.out_proj")),
        (1, ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")),
    )
    for m in modules
} | {f"model.layers.{i}.mlp.{p}_proj" for i in (0, 1) for p in ("gate", "up", "down")}
GPTQ_SUFFIXES = ("qweight", "qzeros", "scales", "g_idx")

# stacked_params_mapping: target models/qwen3_5.py:1482-1494, draft qwen3_5_mtp.py:213-220
_TARGET_STACKED = (
    ("qkv_proj", "q_proj"),
    ("qkv_proj", "k_proj"),
    ("qkv_proj", "v_proj"),
    ("gate_up_proj", "gate_proj"),
    ("gate_up_proj", "up_proj"),
    ("in_proj_qkvz.", "in_proj_qkv."),
    ("in_proj_qkvz.", "in_proj_z."),
    ("in_proj_ba.", "in_proj_b."),
    ("in_proj_ba.", "in_proj_a."),
)
_DRAFT_STACKED = _TARGET_STACKED[:5]


def _stack(name: str, mapping: tuple[tuple[str, str], ...]) -> str:
    for fused, part in mapping:
        if part in name:
            return name.replace(part, fused)
    return name


def target_param(name: str) -> str | None:
    """The target parameter a checkpoint name loads into (None: the target skips it)."""
    if name == "lm_head.weight":
        return name
    if "mtp" in name:
        return None
    body = name.removeprefix("model.").replace(".self_attn", "")
    return "model." + _stack(body, _TARGET_STACKED)


def draft_param(name: str) -> str | None:
    """The draft parameter a checkpoint name loads into (None: the draft skips it)."""
    if "mtp" not in name:
        return None
    mapped = name.replace("mtp.", "model.").replace("model.fc", "fc")
    mapped = mapped.replace("model.pre_fc", "pre_fc").replace(".self_attn", "")
    return _stack(mapped, _DRAFT_STACKED)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("qwen35"), seed=0, gptq=GptqOptions())


@pytest.fixture(scope="module")
def dense(made: TinyModels) -> dict[str, npt.NDArray[np.float32]]:
    return read_bf16_safetensors(made.mtp35.path / "model.safetensors")


@pytest.fixture(scope="module")
def tensors(made: TinyModels) -> Raw:
    assert made.mtp35_gptq is not None
    return read_raw(made.mtp35_gptq.path / "model.safetensors")


def _config(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((path / "config.json").read_text())
    return loaded


def packed_modules(tensors: Raw) -> set[str]:
    return {n.removesuffix(".qweight") for n in tensors if n.endswith(".qweight")}


def test_config_is_a_dense_qwen3_5_text_model(made: TinyModels) -> None:
    c = _config(made.mtp35.path)
    assert c["architectures"] == ["Qwen3_5ForCausalLM"]  # qwen3_5_text.py EntryClass
    assert c["model_type"] == "qwen3_5_text"
    assert c["layer_types"] == ["linear_attention", "full_attention"]
    assert c["num_hidden_layers"] == 2
    # SGLang's layers_block_type: (l + 1) % full_attention_interval == 0 is attention
    assert [
        "attention" if (i + 1) % c["full_attention_interval"] == 0 else "linear_attention"
        for i in range(c["num_hidden_layers"])
    ] == ["linear_attention", "attention"]
    assert c["attn_output_gate"] is True
    assert c["tie_word_embeddings"] is False
    assert c["mtp_num_hidden_layers"] == 1
    assert c["intermediate_size"] % 128 == 0
    rope = c["rope_parameters"]
    assert rope["rope_type"] == "default" and rope["rope_theta"] > 0
    assert "mrope_section" not in rope  # 1-D positions in the text model
    assert rope["partial_rotary_factor"] == c["partial_rotary_factor"] == 0.25
    assert c["head_dim"] * c["partial_rotary_factor"] % 2 == 0  # NeoX halves
    for key in ("linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim"):
        assert isinstance(c[key], int) and c[key] > 0, key
    assert c["linear_num_key_heads"] == c["linear_num_value_heads"] == 1
    assert c["torch_dtype"] == "bfloat16"
    assert "quantization_config" not in c
    for model in (made.mtp35_gptq, made.mtp35_gptq_mtprule):
        assert model is not None
        other = _config(model.path)
        assert other.pop("quantization_config")
        assert other == c


def test_tensor_names_and_shapes(made: TinyModels, dense: dict[str, npt.NDArray[Any]]) -> None:
    c = _config(made.mtp35.path)
    h, d, i = c["hidden_size"], c["head_dim"], c["intermediate_size"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    key = c["linear_num_key_heads"] * c["linear_key_head_dim"]
    value = c["linear_num_value_heads"] * c["linear_value_head_dim"]
    assert set(dense) == EXPECTED_NAMES
    want = {
        "linear_attn.in_proj_qkv.weight": (2 * key + value, h),
        "linear_attn.in_proj_z.weight": (value, h),
        "linear_attn.in_proj_b.weight": (c["linear_num_value_heads"], h),
        "linear_attn.in_proj_a.weight": (c["linear_num_value_heads"], h),
        "linear_attn.conv1d.weight": (2 * key + value, 1, c["linear_conv_kernel_dim"]),
        "linear_attn.out_proj.weight": (h, value),
        "linear_attn.norm.weight": (c["linear_value_head_dim"],),
        "linear_attn.dt_bias": (c["linear_num_value_heads"],),
        "linear_attn.A_log": (c["linear_num_value_heads"],),
        "self_attn.q_proj.weight": (2 * heads * d, h),  # query and output gate
        "self_attn.k_proj.weight": (kv * d, h),
        "self_attn.v_proj.weight": (kv * d, h),
        "self_attn.o_proj.weight": (h, heads * d),
        "self_attn.q_norm.weight": (d,),
        "self_attn.k_norm.weight": (d,),
        "mlp.gate_proj.weight": (i, h),
        "mlp.up_proj.weight": (i, h),
        "mlp.down_proj.weight": (h, i),
        "fc.weight": (h, 2 * h),
        "embed_tokens.weight": (made.vocab_size, h),
        "lm_head.weight": (made.vocab_size, h),
    }
    for name, values in dense.items():
        suffix = next((s for s in want if name.endswith(s)), None)
        expected = want[suffix] if suffix is not None else (h,)  # every other norm
        assert values.shape == expected, name


def test_every_tensor_loads_into_sglang_parameters(
    dense: dict[str, npt.NDArray[Any]], tensors: Raw
) -> None:
    """The target loads every non-mtp name, the draft every mtp name, into the parameters its
    modules have; the GPTQ checkpoint's packed tensors land on the quantized fused modules."""
    target = {target_param(n) for n in dense} - {None}
    draft = {draft_param(n) for n in dense} - {None}
    assert target == TARGET_PARAMS
    assert draft == DRAFT_PARAMS
    assert all((target_param(n) is None) != (draft_param(n) is None) for n in dense)
    gptq_target = {p for n in tensors if (p := target_param(n)) is not None}
    # the decoder layer holds qkv_proj / o_proj itself: parameter names have no .self_attn
    quantized = {m.replace(".self_attn", "") for m in SGLANG_LINEARS if "in_proj_ba" not in m}
    want = {p for p in TARGET_PARAMS if p.removesuffix(".weight") not in quantized}
    want |= {f"{m}.{suffix}" for m in quantized for suffix in GPTQ_SUFFIXES}
    assert gptq_target == want
    gptq_draft = {p for n in tensors if (p := draft_param(n)) is not None}
    assert gptq_draft == DRAFT_PARAMS  # the names the draft looks up: the weights stay BF16


def test_marlin_shape_rule_for_every_quantized_linear(tensors: Raw) -> None:
    """out % 64 == 0 and in % 128 == 0 at TP 1 (marlin_utils.py:55-57, 178-211), for each
    checkpoint module and for SGLang's fused modules (their summed outputs, gptq_marlin.py:57)."""
    packed = packed_modules(tensors)
    assert packed == QUANTIZED
    size = {}
    for module in packed:
        in_packed, out_features = tensors[module + ".qweight"][1].shape
        in_features = in_packed * 8
        size[module] = (out_features, in_features)
        assert out_features % 64 == 0 and in_features % 128 == 0, (module, out_features)
        assert in_features % 32 == 0
    for fused, parts in SGLANG_LINEARS.items():
        layer = fused.split(".")[2]
        members = [f"model.layers.{layer}.{p}" for p in parts]
        if not any(m in packed for m in members):
            continue
        assert all(m in packed for m in members), fused  # all or none of a fused module
        assert len({size[m][1] for m in members}) == 1
        assert sum(size[m][0] for m in members) % 64 == 0, fused


def test_gptq_tensors_dequantize_to_the_weights_exactly(
    made: TinyModels, dense: dict[str, npt.NDArray[Any]], tensors: Raw
) -> None:
    """Dequantized from the format's definition, every packed module is the dense weight the
    generator says it encodes, exact in bf16; the output projections are exactly zero, as in
    mtp35/; every other tensor is mtp35/'s BF16 tensor, bit for bit."""
    encoded = gptq_qwen35_weights(
        made.spec,
        made.vocab_size,
        dense["model.embed_tokens.weight"],
        dense["lm_head.weight"],
        GptqOptions(),
    ).dense
    packed = packed_modules(tensors)
    for module in sorted(packed):
        weight = dequantize(tensors, module)
        assert np.array_equal(weight, encoded[module + ".weight"].astype(np.float64)), module
        as_bf16 = (weight.astype(np.float32).view(np.uint32) >> 16 << 16).view(np.float32)
        assert np.array_equal(as_bf16, weight), module
        if module.endswith(("o_proj", "out_proj", "down_proj")):
            assert not weight.any() and not dense[module + ".weight"].any(), module
        else:
            assert np.count_nonzero(weight) > weight.size // 2, module
        zeros = unpack_int4(tensors[module + ".qzeros"][1], axis=1) + 1
        assert (zeros == 8).all(), module
        g_idx = tensors[module + ".g_idx"][1]
        assert g_idx.tolist() == [k // 32 for k in range(len(g_idx))]
        assert tensors[module + ".scales"][0] == "F16"
    for name, (dtype, values) in tensors.items():
        if name.rsplit(".", 1)[0] in packed:
            continue
        assert dtype == "BF16", name
        assert np.array_equal(values, dense[name]), name
    unpacked = {n for n in tensors if n.rsplit(".", 1)[0] not in packed}
    assert unpacked | {m + ".weight" for m in packed} == EXPECTED_NAMES


def _rules(config: dict[str, Any]) -> list[re.Pattern[str]]:
    dynamic = config["quantization_config"]["dynamic"]
    assert all(v == {} for v in dynamic.values())
    return [re.compile(k.removeprefix("-:")) for k in dynamic if k.startswith("-:")]


def test_dynamic_rules_as_sglang_matches_them(made: TinyModels, tensors: Raw) -> None:
    assert made.mtp35_gptq is not None and made.mtp35_gptq_mtprule is not None
    plain, ruled = _config(made.mtp35_gptq.path), _config(made.mtp35_gptq_mtprule.path)
    for config, mtp_excluded in ((plain, False), (ruled, True)):
        q = config["quantization_config"]
        assert q["quant_method"] == "gptq" and q["bits"] == 4 and q["group_size"] == 32
        assert q["sym"] is True and q["desc_act"] is False and q["lm_head"] is False
        assert q["checkpoint_format"] == "gptq"
        assert sorted(q["modules_in_block_to_quantize"]) == sorted(QUANTIZED)
        rules = _rules(config)

        def skipped(prefix: str, rules: list[re.Pattern[str]] = rules) -> bool:
            return any(r.match(prefix) for r in rules)

        # SGLang's fused GDN gate projection stays BF16; nothing quantized is excluded
        assert skipped("model.layers.0.linear_attn.in_proj_ba")
        assert skipped("model.layers.0.linear_attn.in_proj_b")
        assert skipped("model.layers.0.linear_attn.in_proj_a")
        for prefix, parts in SGLANG_LINEARS.items():
            if not prefix.endswith("in_proj_ba"):
                assert not skipped(prefix), prefix
                assert not any(skipped(f"model.layers.{prefix.split('.')[2]}.{p}") for p in parts)
        mtp_modules = {n.rsplit(".", 1)[0] for n in tensors if n.startswith("mtp.")}
        for prefix in (*DRAFT_LINEARS, *mtp_modules):
            assert skipped(prefix) is mtp_excluded, prefix
    text = json.dumps(plain["quantization_config"])
    assert "mtp" not in text  # no rule or list entry about mtp.*: the seed's shape
    assert "-:.*mtp.*" in ruled["quantization_config"]["dynamic"]
    assert (
        made.mtp35_gptq.sha256["model.safetensors"]
        == (made.mtp35_gptq_mtprule.sha256["model.safetensors"])
    )


def test_mtp_head_is_bf16(tensors: Raw) -> None:
    mtp = {n: d for n, (d, _) in tensors.items() if n.startswith("mtp.")}
    assert set(mtp) == {n for n in EXPECTED_NAMES if n.startswith("mtp.")}
    assert set(mtp.values()) == {"BF16"}
    for name in ("linear_attn.in_proj_a", "linear_attn.in_proj_b"):
        assert tensors[f"model.layers.0.{name}.weight"][0] == "BF16"


def test_chain_construction(made: TinyModels, dense: dict[str, npt.NDArray[Any]]) -> None:
    """The target: zero output projections, GemmaRMSNorm weights 0 (x * (1 + w)), the GDN output
    norm 1 (x * w). The MTP head: fc = [-I | 0] (SGLang concatenates [embedding, hidden],
    qwen3_5_mtp.py:192), its attention adding nothing (o_proj zero) and its MLP turning the
    negated embedding around, so that it predicts the chain only with its MLP loaded."""
    h = made.spec.hidden_size
    for name, values in dense.items():
        if name.startswith("model.") and name.endswith(
            ("o_proj.weight", "out_proj.weight", "down_proj.weight")
        ):
            assert not values.any(), name
        elif name.endswith("linear_attn.norm.weight"):
            assert (values == 1).all(), name
        elif name.endswith(("layernorm.weight", "norm.weight")) or "pre_fc_norm_" in name:
            assert not values.any(), name
    assert not dense["mtp.layers.0.self_attn.o_proj.weight"].any()
    minus_eye = np.concatenate([-np.eye(h), np.zeros((h, h))], axis=1)
    assert np.array_equal(dense["mtp.fc.weight"], minus_eye)

    def normed(x: npt.NDArray[Any], w: npt.NDArray[Any]) -> npt.NDArray[Any]:
        rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
        out: npt.NDArray[Any] = x / rms * (1 + w)
        return out

    def mlp(x: npt.NDArray[Any]) -> npt.NDArray[Any]:  # Qwen2MoeMLP: down(silu(gate) * up)
        gate = x @ dense["mtp.layers.0.mlp.gate_proj.weight"].T
        up = x @ dense["mtp.layers.0.mlp.up_proj.weight"].T
        out: npt.NDArray[Any] = (gate / (1 + np.exp(-gate)) * up) @ dense[
            "mtp.layers.0.mlp.down_proj.weight"
        ].T
        return out

    tokens = sorted(made.chain_next)
    emb, head = dense["model.embed_tokens.weight"][tokens], dense["lm_head.weight"]
    want = [made.chain_next[t] for t in tokens]
    target = normed(emb, dense["model.norm.weight"]) @ head.T
    assert target.argmax(axis=1).tolist() == want
    hidden = np.random.default_rng(0).standard_normal(emb.shape)  # any target hidden state
    fc_in = np.concatenate(
        [
            normed(emb, dense["mtp.pre_fc_norm_embedding.weight"]),
            normed(hidden, dense["mtp.pre_fc_norm_hidden.weight"]),
        ],
        axis=1,
    )
    residual = fc_in @ dense["mtp.fc.weight"].T  # the attention adds nothing (o_proj zero)
    loaded = residual + mlp(normed(residual, dense["mtp.layers.0.post_attention_layernorm.weight"]))
    mtp = normed(loaded, dense["mtp.norm.weight"]) @ head.T
    assert mtp.argmax(axis=1).tolist() == want
    # the seed's bug: the layer's projections skipped at load (their memory zero): no token right
    skipped = normed(residual, dense["mtp.norm.weight"]) @ head.T
    assert not np.any(skipped.argmax(axis=1) == np.array(want))


def test_the_mtp_check_refuses_a_head_that_predicts_without_its_mlp(made: TinyModels) -> None:
    """check_mtp_head (run by make_tiny_models) fails a construction that would hide the seed's
    bug: fc = [I | 0] predicts the chain from the residual alone (the first construction, which
    an H100 showed accepting 97.7% with its MLP skipped)."""
    from bench.core import InputError
    from bench.tinymodel._chain import chain_cycle, chain_embedding, chain_lm_head
    from bench.tinymodel._qwen35 import check_mtp_head, qwen35_weights

    spec = made.spec
    sigma = chain_cycle(spec.seed, sorted(made.chain_next))
    embedding = chain_embedding(spec.seed, made.vocab_size, spec.hidden_size, made.mask_token_id)
    head = chain_lm_head(embedding, sigma)
    weights = qwen35_weights(spec, made.vocab_size, embedding, head)
    assert check_mtp_head(weights, embedding, head, sigma) >= 8.0
    h = spec.hidden_size
    weights["mtp.fc.weight"] = np.concatenate(
        [np.eye(h, dtype=np.float32), np.zeros((h, h), dtype=np.float32)], axis=1
    )
    with pytest.raises(InputError, match=r"without its MLP"):
        check_mtp_head(weights, embedding, head, sigma)


def test_deterministic_and_only_bf16_unless_asked(made: TinyModels, tmp_path: Path) -> None:
    plain = make_tiny_models(tmp_path / "plain", seed=0)
    assert plain.mtp35.sha256 == made.mtp35.sha256
    assert plain.mtp35_gptq is None and plain.mtp35_gptq_mtprule is None
    assert not (tmp_path / "plain" / "mtp35-gptq").exists()
    again = make_tiny_models(tmp_path / "again", seed=0, gptq=GptqOptions())
    for first, second in (
        (made.mtp35_gptq, again.mtp35_gptq),
        (made.mtp35_gptq_mtprule, again.mtp35_gptq_mtprule),
    ):
        assert first is not None and second is not None
        assert first.sha256 == second.sha256
        assert first.size_bytes < 2_000_000


def test_cli_writes_the_qwen35_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["tiny-model", str(tmp_path), "--quantization", "gptq-4bit", "--json"])
    assert done.value.code in (0, None)
    made = TinyModels.model_validate_json(capsys.readouterr().out)
    assert made.mtp35.path == tmp_path / "mtp35"
    assert made.mtp35_gptq is not None and made.mtp35_gptq_mtprule is not None
    assert made.mtp35_gptq.path == tmp_path / "mtp35-gptq"
    assert made.mtp35_gptq_mtprule.path == tmp_path / "mtp35-gptq-mtprule"
    for name in ("mtp35", "mtp35-gptq", "mtp35-gptq-mtprule"):
        assert (tmp_path / name / "model.safetensors").is_file()
