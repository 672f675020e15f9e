"""bench.tinymodel's GPTQ 4-bit MTP chain target: the packing checked against a dequantization
written here from the format's definition (not the generator's code), the BF16 MTP head, and
the quantization_config an engine reads."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from bench.cli import main
from bench.core import InputError
from bench.tinymodel import GptqOptions, TinyModels, make_tiny_models, read_bf16_safetensors
from bench.tinymodel._gptq import GptqLinear, pack

#: safetensors dtype -> little-endian numpy dtype (the format's own names)
NUMPY = {"BF16": "<u2", "F16": "<f2", "I32": "<i4"}


def read_raw(path: Path) -> dict[str, tuple[str, npt.NDArray[Any]]]:
    """A safetensors file parsed from its definition: {name: (dtype, raw values)}; BF16 as
    float32 by shifting its 16 bits up."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    out: dict[str, tuple[str, npt.NDArray[Any]]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        values = np.frombuffer(raw[8 + size + begin : 8 + size + end], dtype=NUMPY[info["dtype"]])
        if info["dtype"] == "BF16":
            values = (values.astype(np.uint32) << 16).view(np.float32)
        out[name] = (info["dtype"], values.reshape(info["shape"]))
    return out


def unpack_int4(words: npt.NDArray[np.int32], axis: int) -> npt.NDArray[np.int64]:
    """Eight 4-bit values per int32 along ``axis``, the lowest nibble first."""
    unsigned = words.astype(np.int64) & 0xFFFFFFFF
    nibbles = [(unsigned >> (4 * i)) & 0xF for i in range(8)]
    stacked = np.stack(nibbles, axis=axis + 1)  # [..., word, nibble, ...]
    shape = list(words.shape)
    shape[axis] *= 8
    return stacked.reshape(shape)


def dequantize(tensors: dict[str, tuple[str, npt.NDArray[Any]]], module: str) -> npt.NDArray[Any]:
    """GPTQ ``checkpoint_format: gptq`` (v1): ``qweight`` [in/8, out] packed along the input,
    ``qzeros`` [groups, out/8] packed along the output and stored minus one, ``scales``
    [groups, out], ``g_idx`` [in]; W[n, k] = (q[k, n] - (z[g, n] + 1)) * s[g, n], g = g_idx[k].
    Returns W as [out, in] float64."""
    q = unpack_int4(tensors[f"{module}.qweight"][1], axis=0)  # [in, out]
    zeros = unpack_int4(tensors[f"{module}.qzeros"][1], axis=1) + 1  # [groups, out]
    scales = tensors[f"{module}.scales"][1].astype(np.float64)  # [groups, out]
    g_idx = tensors[f"{module}.g_idx"][1]
    weight = (q - zeros[g_idx, :]).astype(np.float64) * scales[g_idx, :]
    return weight.T


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("gptq"), seed=0, gptq=GptqOptions())


@pytest.fixture(scope="module")
def tensors(made: TinyModels) -> dict[str, tuple[str, npt.NDArray[Any]]]:
    assert made.mtp_gptq is not None
    return read_raw(made.mtp_gptq.path / "model.safetensors")


@pytest.fixture(scope="module")
def config(made: TinyModels) -> dict[str, Any]:
    assert made.mtp_gptq is not None
    loaded: dict[str, Any] = json.loads((made.mtp_gptq.path / "config.json").read_text())
    return loaded


def quantized(tensors: dict[str, tuple[str, npt.NDArray[Any]]]) -> set[str]:
    return {n.removesuffix(".qweight") for n in tensors if n.endswith(".qweight")}


def test_packing_by_hand() -> None:
    """One row 0..15 over 16 inputs, one group: nibble i of word j is q[8j + i]; zero 8 is
    stored as 7 in each nibble of qzeros (0x77777777)."""
    q = np.arange(16, dtype=np.int32).reshape(1, 16)
    q = np.repeat(q, 8, axis=0)  # 8 output rows (one qzeros word)
    linear = GptqLinear(
        q=q,
        zeros=np.full((8, 1), 8, dtype=np.int32),
        scales=np.full((8, 1), 0.5, dtype=np.float16),
        group_size=16,
    )
    packed = pack(linear)
    assert packed["qweight"].shape == (2, 8)
    assert packed["qweight"].dtype == np.int32
    assert int(packed["qweight"][0, 0]) == 0x76543210
    assert int(packed["qweight"][1, 0]) & 0xFFFFFFFF == 0xFEDCBA98
    assert packed["qzeros"].shape == (1, 1)
    assert int(packed["qzeros"][0, 0]) == 0x77777777
    assert packed["scales"].dtype == np.float16
    assert packed["g_idx"].tolist() == [0] * 16


def test_every_packed_layer_dequantizes_to_the_intended_weights_exactly(
    made: TinyModels, tensors: dict[str, tuple[str, npt.NDArray[Any]]]
) -> None:
    """The BF16 mtp/ model is the construction; the GPTQ one encodes the same chain: its
    unquantized tensors are the same bits, the output projections dequantize to exactly zero
    (nothing joins the residual stream), the others to 4-bit values times power-of-two scales
    that are exact in bf16."""
    dense = read_bf16_safetensors(made.mtp.path / "model.safetensors")
    packed = quantized(tensors)
    assert packed
    for module in sorted(packed):
        weight = dequantize(tensors, module)
        assert weight.shape == dense[module + ".weight"].shape
        assert np.array_equal(weight.astype(np.float32).astype(np.float64), weight)
        bf16 = (weight.astype(np.float32).view(np.uint32) >> 16 << 16).view(np.float32)
        assert np.array_equal(bf16, weight), module  # exact in bf16: what the engine computes
        if not dense[module + ".weight"].any():
            assert not weight.any(), module
        else:
            assert np.count_nonzero(weight) > weight.size // 2, module
    for name, (dtype, values) in tensors.items():
        if name.rsplit(".", 1)[0] in packed:
            continue
        assert dtype == "BF16", name
        assert np.array_equal(values, dense[name]), name
    assert {n for n in tensors if n.rsplit(".", 1)[0] not in packed} | {
        m + ".weight" for m in packed
    } == set(dense)


def test_symmetric_zero_and_groups(tensors: dict[str, tuple[str, npt.NDArray[Any]]]) -> None:
    for module in quantized(tensors):
        zeros = unpack_int4(tensors[f"{module}.qzeros"][1], axis=1) + 1
        assert (zeros == 8).all(), module
        g_idx = tensors[f"{module}.g_idx"][1]
        assert g_idx.tolist() == [k // 32 for k in range(len(g_idx))]
        assert tensors[f"{module}.scales"][0] == "F16"
        assert tensors[f"{module}.qweight"][0] == tensors[f"{module}.qzeros"][0] == "I32"
        out_features = tensors[f"{module}.qweight"][1].shape[1]
        assert tensors[f"{module}.scales"][1].shape == (len(g_idx) // 32, out_features)


def test_mtp_head_is_bf16_and_unquantized(
    tensors: dict[str, tuple[str, npt.NDArray[Any]]],
) -> None:
    mtp = {n: d for n, (d, _) in tensors.items() if n.startswith("mtp.")}
    assert "mtp.fc.weight" in mtp
    assert any(".self_attn." in n for n in mtp)
    assert any(".mlp.experts." in n for n in mtp)
    assert set(mtp.values()) == {"BF16"}
    assert all(n.endswith(".weight") or n.endswith(("dt_bias", "A_log")) for n in mtp)


def test_only_what_the_engine_quantizes_is_packed(
    tensors: dict[str, tuple[str, npt.NDArray[Any]]],
) -> None:
    packed = quantized(tensors)
    assert all(m.startswith("model.layers.") for m in packed)
    kinds = {m.split(".", 3)[3] for m in packed}
    assert {"self_attn.q_proj", "self_attn.o_proj", "linear_attn.in_proj_qkvz"} <= kinds
    assert {"linear_attn.out_proj", "mlp.shared_expert.down_proj"} <= kinds
    # vLLM builds these without the quantization config, or they cannot be packed (2 outputs)
    for kept in ("mlp.gate", "mlp.shared_expert_gate", "linear_attn.in_proj_ba", "mlp.experts."):
        assert not any(k.startswith(kept) for k in kinds), kept
    for name in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
        assert tensors[name][0] == "BF16"


def test_quantization_config(
    config: dict[str, Any], tensors: dict[str, tuple[str, npt.NDArray[Any]]]
) -> None:
    q = config["quantization_config"]
    assert q["quant_method"] == "gptq"
    assert q["bits"] == 4
    assert q["group_size"] == 32
    assert q["sym"] is True
    assert q["desc_act"] is False
    assert q["checkpoint_format"] == "gptq"
    assert q["lm_head"] is False
    assert sorted(q["modules_in_block_to_quantize"]) == sorted(quantized(tensors))
    negative = [re.compile(k.removeprefix("-:")) for k in q["dynamic"] if k.startswith("-:")]
    assert negative and all(v == {} for v in q["dynamic"].values())

    def skipped(module: str) -> bool:  # GPTQModel / vLLM: re.match of a "-:" rule skips it
        return any(rule.match(module) for rule in negative)

    modules = {n.rsplit(".", 1)[0] for n in tensors}
    assert all(skipped(m) for m in modules if m.startswith("mtp."))
    assert skipped("mtp.fc") and skipped("mtp.layers.0.mlp.experts")  # vLLM's prefixes
    assert not any(skipped(m) for m in quantized(tensors))
    assert skipped("model.layers.1.mlp.experts")  # the routed experts stay BF16 by default
    assert not skipped("model.layers.1.mlp.shared_expert.gate_up_proj")
    assert config["architectures"] == ["Qwen3NextForCausalLM"]
    assert config["torch_dtype"] == "bfloat16"


def test_experts_packed_when_asked(tmp_path: Path, made: TinyModels) -> None:
    other = make_tiny_models(tmp_path, seed=0, gptq=GptqOptions(quantize_experts=True))
    assert other.mtp_gptq is not None
    tensors = read_raw(other.mtp_gptq.path / "model.safetensors")
    packed = quantized(tensors)
    experts = {m for m in packed if ".mlp.experts." in m}
    assert experts and all(m.startswith("model.layers.") for m in experts)
    dense = read_bf16_safetensors(made.mtp.path / "model.safetensors")
    for module in experts:
        weight = dequantize(tensors, module)
        assert not dense[module + ".weight"].any() or weight.any()
        if not dense[module + ".weight"].any():
            assert not weight.any()
    dynamic = json.loads((other.mtp_gptq.path / "config.json").read_text())["quantization_config"][
        "dynamic"
    ]
    assert not any(re.match(k.removeprefix("-:"), "model.layers.1.mlp.experts") for k in dynamic)


def test_group_size_is_honoured_and_checked(tmp_path: Path) -> None:
    other = make_tiny_models(tmp_path / "g64", seed=0, gptq=GptqOptions(group_size=64))
    assert other.mtp_gptq is not None
    tensors = read_raw(other.mtp_gptq.path / "model.safetensors")
    g_idx = tensors["model.layers.1.self_attn.q_proj.g_idx"][1]
    assert g_idx.tolist() == [k // 64 for k in range(len(g_idx))]
    assert (
        json.loads((other.mtp_gptq.path / "config.json").read_text())["quantization_config"][
            "group_size"
        ]
        == 64
    )
    (tmp_path / "g48" / "target").mkdir(parents=True)
    (tmp_path / "g48" / "target" / "config.json").write_text("earlier")
    with pytest.raises(InputError, match="48 does not divide") as caught:
        make_tiny_models(tmp_path / "g48", seed=0, gptq=GptqOptions(group_size=48))
    # the option is named, and it was refused before any model was written (issue 39 class 4)
    assert caught.value.where == "--gptq-group-size"
    assert [p.name for p in (tmp_path / "g48").iterdir()] == ["target"]
    assert (tmp_path / "g48" / "target" / "config.json").read_text() == "earlier"


def test_same_bytes_and_no_gptq_unless_asked(made: TinyModels, tmp_path: Path) -> None:
    again = make_tiny_models(tmp_path / "again", seed=0, gptq=GptqOptions())
    assert made.mtp_gptq is not None and again.mtp_gptq is not None
    assert again.mtp_gptq.sha256 == made.mtp_gptq.sha256
    assert again.mtp.sha256 == made.mtp.sha256
    plain = make_tiny_models(tmp_path / "plain", seed=0)
    assert plain.mtp_gptq is None
    assert not (tmp_path / "plain" / "mtp-gptq").exists()
    assert plain.mtp.sha256 == made.mtp.sha256  # asking for GPTQ changes nothing else


def test_cli_writes_the_gptq_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["tiny-model", str(tmp_path), "--quantization", "gptq-4bit", "--json"])
    assert done.value.code in (0, None)
    made = TinyModels.model_validate_json(capsys.readouterr().out)
    assert made.mtp_gptq is not None
    assert made.mtp_gptq.path == tmp_path / "mtp-gptq"
    assert (tmp_path / "mtp-gptq" / "model.safetensors").is_file()
