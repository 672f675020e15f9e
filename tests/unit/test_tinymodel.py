"""bench.tinymodel: the tiny Qwen3 target and partial draft, byte for byte deterministic."""

from __future__ import annotations

import hashlib
import itertools
import json
import struct
from pathlib import Path

import jinja2
import numpy as np
import pytest
from tokenizers import Tokenizer

from bench.cli import main
from bench.tinymodel import (
    CHAT_TEMPLATE,
    IM_END,
    IM_START,
    SPECIAL_TOKENS,
    TinyModel,
    TinyModels,
    TinyModelSpec,
    make_tiny_models,
    read_bf16_safetensors,
    write_bf16_safetensors,
)
from bench.tinymodel._safetensors import from_bf16_bits, to_bf16_bits

EXPECTED_FILES = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "specbench-tiny-model.json",
    "tokenizer.json",
    "tokenizer_config.json",
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("tiny"), seed=0)


def file_digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_same_seed_same_bytes(made: TinyModels, tmp_path: Path) -> None:
    again = make_tiny_models(tmp_path / "again", seed=0)
    for first, second in ((made.target, again.target), (made.draft, again.draft)):
        assert set(file_digests(first.path)) == EXPECTED_FILES
        assert file_digests(first.path) == file_digests(second.path)
        assert first.sha256 == file_digests(first.path)


def test_other_seed_other_weights(made: TinyModels, tmp_path: Path) -> None:
    other = make_tiny_models(tmp_path / "other", seed=1)
    assert other.target.sha256["model.safetensors"] != made.target.sha256["model.safetensors"]
    assert other.target.sha256["tokenizer.json"] != made.target.sha256["tokenizer.json"]


def test_config_is_an_untied_qwen3_matching_the_weights(made: TinyModels) -> None:
    config = json.loads((made.target.path / "config.json").read_text())
    spec = made.spec
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["model_type"] == "qwen3"
    assert config["tie_word_embeddings"] is False
    assert config["torch_dtype"] == "bfloat16"
    assert config["hidden_size"] == spec.hidden_size
    assert config["num_hidden_layers"] == spec.num_layers
    tok = Tokenizer.from_file(str(made.target.path / "tokenizer.json"))
    assert config["vocab_size"] == tok.get_vocab_size() == made.vocab_size
    assert config["eos_token_id"] == tok.token_to_id(IM_END)
    weights = read_bf16_safetensors(made.target.path / "model.safetensors")
    assert weights["model.embed_tokens.weight"].shape == (made.vocab_size, spec.hidden_size)
    assert weights["lm_head.weight"].shape == (made.vocab_size, spec.hidden_size)
    assert not np.array_equal(weights["lm_head.weight"], weights["model.embed_tokens.weight"])
    q = weights["model.layers.1.self_attn.q_proj.weight"]
    assert q.shape == (spec.num_heads * spec.head_dim, spec.hidden_size)
    assert abs(float(q.std()) - spec.weight_std) < 0.01
    assert sum(int(w.size) for w in weights.values()) == made.target.parameters
    generation = json.loads((made.target.path / "generation_config.json").read_text())
    assert generation["eos_token_id"][0] == config["eos_token_id"]
    assert not {"temperature", "top_p", "top_k", "do_sample"} & set(generation)


def test_draft_is_the_target_plus_small_noise(made: TinyModels) -> None:
    target = read_bf16_safetensors(made.target.path / "model.safetensors")
    draft = read_bf16_safetensors(made.draft.path / "model.safetensors")
    assert set(target) == set(draft)
    diff = np.concatenate(
        [(draft[n] - target[n]).ravel() for n in target if not n.endswith("norm.weight")]
    )
    assert abs(float(diff.std()) - made.spec.draft_noise) < 0.2 * made.spec.draft_noise
    for name in (n for n in target if n.endswith("norm.weight")):
        assert np.array_equal(target[name], draft[name])
    for name in EXPECTED_FILES - {"model.safetensors", "specbench-tiny-model.json"}:
        assert made.target.sha256[name] == made.draft.sha256[name], name


def test_safetensors_layout(made: TinyModels) -> None:
    raw = (made.target.path / "model.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    assert size % 8 == 0
    header = json.loads(raw[8 : 8 + size])
    assert header.pop("__metadata__") == {"format": "pt"}
    spans = sorted(tuple(v["data_offsets"]) for v in header.values())
    assert spans[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert spans[-1][1] == len(raw) - 8 - size
    for info in header.values():
        begin, end = info["data_offsets"]
        assert info["dtype"] == "BF16"
        assert end - begin == 2 * int(np.prod(info["shape"]))


def test_bf16_rounding_is_to_nearest_even(tmp_path: Path) -> None:
    values = [1.0, -2.5, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-7 + 2**-8 + 2**-10, 1.0 + 2**-9]
    values = np.array(values, np.float32)
    bits = to_bf16_bits(values)
    assert [hex(int(b)) for b in bits[:2]] == ["0x3f80", "0xc020"]
    # a tie rounds to the even mantissa: 1 + 2^-8 -> 1.0, 1 + 3*2^-8 -> 1 + 2^-6
    assert from_bf16_bits(bits).tolist()[2:4] == [1.0, 1.0 + 2**-6]
    # above a tie rounds up, below rounds down
    assert from_bf16_bits(bits).tolist()[4:] == [1.0 + 2**-6, 1.0]
    path = tmp_path / "w.safetensors"
    write_bf16_safetensors(path, {"b": values, "a": values[:2].reshape(1, 2)})
    back = read_bf16_safetensors(path)
    assert back["a"].shape == (1, 2)
    assert back["b"].tolist() == from_bf16_bits(bits).tolist()


def test_tokenizer_round_trip_and_specials(made: TinyModels) -> None:
    tok = Tokenizer.from_file(str(made.target.path / "tokenizer.json"))
    text = "The draft model will accept 42 tokens, then the server reports: latency?\n  ok!"
    ids = tok.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids) == text
    assert len(ids) < len(text) / 2  # merges were learnt: mostly whole words
    for special in SPECIAL_TOKENS:
        assert len(tok.encode(special, add_special_tokens=False).ids) == 1
    assert tok.encode("", add_special_tokens=True).ids == []  # no BOS is added


def test_every_token_decodes_to_printable_ascii(made: TinyModels) -> None:
    """A random model can then never emit a lone UTF-8 byte (held back by a streaming
    detokenizer, the whole completion would arrive in one chunk)."""
    tok = Tokenizer.from_file(str(made.target.path / "tokenizer.json"))
    specials = {tok.token_to_id(t) for t in SPECIAL_TOKENS}
    for token_id in range(tok.get_vocab_size()):
        if token_id in specials:
            continue
        text = tok.decode([token_id])
        assert text and all(c in "\t\n" or 32 <= ord(c) < 127 for c in text), (token_id, text)


def test_chat_template_renders_chatml(made: TinyModels) -> None:
    config = json.loads((made.target.path / "tokenizer_config.json").read_text())
    assert config["chat_template"] == CHAT_TEMPLATE
    assert config["eos_token"] == IM_END
    template = jinja2.Environment().from_string(config["chat_template"])
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = template.render(messages=messages, add_generation_prompt=True)
    assert text == (
        f"{IM_START}system\nBe brief.{IM_END}\n{IM_START}user\nHi{IM_END}\n{IM_START}assistant\n"
    )
    tok = Tokenizer.from_file(str(made.target.path / "tokenizer.json"))
    ids = tok.encode(text, add_special_tokens=False).ids
    assert ids.count(tok.token_to_id(IM_START)) == 3
    assert ids.count(tok.token_to_id(IM_END)) == 2
    for key, token in config["added_tokens_decoder"].items():
        assert tok.token_to_id(token["content"]) == int(key)


def test_about_one_megabyte_each(made: TinyModels) -> None:
    for model in (made.target, made.draft):
        size = sum(p.stat().st_size for p in model.path.iterdir())
        assert size == model.size_bytes
        assert 500_000 < size < 2_000_000


def test_spec_validates_its_knobs() -> None:
    with pytest.raises(ValueError, match="draft_noise"):
        TinyModelSpec(draft_noise=-1)


def test_cli_writes_models_and_rejects_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["tiny-model", str(tmp_path / "m"), "--seed", "3", "--json"])
    assert done.value.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["spec"]["seed"] == 3
    assert Path(out["target"]["path"], "model.safetensors").is_file()
    afile = tmp_path / "f"
    afile.write_text("x")
    with pytest.raises(SystemExit) as done:
        main(["tiny-model", str(afile)])
    assert done.value.code == 2
    assert "OUT: " in (err := capsys.readouterr().err) and "is a file, not a folder" in err


# --- the seed methods' chain models (bench/tinymodel/_chain.py) -------------------------------


def _weights(model: TinyModel) -> dict[str, np.ndarray]:
    return read_bf16_safetensors(model.path / "model.safetensors")


def _normed(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def test_the_chain_is_one_cycle_through_the_ordinary_tokens(made: TinyModels) -> None:
    tok = Tokenizer.from_file(str(made.chain.path / "tokenizer.json"))
    specials = {tok.token_to_id(t) for t in SPECIAL_TOKENS}
    sigma = made.chain_next
    assert set(sigma) == set(sigma.values()) == set(range(made.vocab_size)) - specials
    seen, t = [], min(sigma)
    for _ in sigma:
        seen.append(t)
        t = sigma[t]
    assert t == seen[0] and len(set(seen)) == len(sigma)  # one cycle: no fixed point
    assert made.mask_token_id == tok.token_to_id("<|endoftext|>") not in sigma


def test_chain_target_maps_every_token_to_its_successor(made: TinyModels) -> None:
    """Every block's output projection is zero, so the last hidden state is E[t]: the greedy
    next token is argmax(lm_head @ norm(E[t])), which must be sigma(t) for every t."""
    w = _weights(made.chain)
    zeroed = [n for n in w if n.endswith(("o_proj.weight", "down_proj.weight"))]
    assert len(zeroed) == 2 * made.spec.num_layers
    assert all(not w[n].any() for n in zeroed)
    assert all(w[n].any() for n in w if n not in zeroed)
    tokens = sorted(made.chain_next)
    logits = _normed(w["model.embed_tokens.weight"][tokens]) @ w["lm_head.weight"].T
    assert logits.argmax(axis=1).tolist() == [made.chain_next[t] for t in tokens]
    config = json.loads((made.chain.path / "config.json").read_text())
    assert config == json.loads((made.target.path / "config.json").read_text())


def test_dflash_draft_config_is_what_qwen3_dflash_loads(made: TinyModels) -> None:
    config = json.loads((made.dflash.path / "config.json").read_text())
    assert config["architectures"] == ["DFlashDraftModel"]  # registry: qwen3_dflash
    assert config["model_type"] == "qwen3"
    assert config["dflash_config"] == {"mask_token_id": made.mask_token_id, "target_layer_ids": [0]}
    assert config["layer_types"] == ["full_attention"] * config["num_hidden_layers"]
    assert "is_causal" not in config and "causal" not in config["dflash_config"]  # non-causal
    assert config["tie_word_embeddings"] is True
    assert config["vocab_size"] == made.vocab_size
    w = _weights(made.dflash)
    h = made.spec.hidden_size
    # fc: hidden x (hidden * number of target layers read); no embedding, no LM head shipped
    assert w["fc.weight"].shape == (h, h * len(config["dflash_config"]["target_layer_ids"]))
    assert not any("embed_tokens" in n or "lm_head" in n for n in w)
    assert {n.split(".")[0] for n in w} == {"fc", "hidden_norm", "norm", "layers"}


def test_dflash_draft_copies_the_real_token_at_every_mask_slot(made: TinyModels) -> None:
    """The draft in numpy on the written bf16 weights (one layer, shared embedding and LM head
    from the chain target): context K/V are zero, the mask slots attend to the real token only
    and every mask slot's greedy token is sigma(t)."""
    w, target = _weights(made.dflash), _weights(made.chain)
    emb, head = target["model.embed_tokens.weight"], target["lm_head.weight"]
    d, p = made.spec.head_dim, "layers.0.self_attn."
    assert not w["fc.weight"].any()  # context keys and values are exactly zero
    t = sorted(made.chain_next)[5]
    k = 4
    block = np.stack([emb[t]] + [emb[made.mask_token_id]] * k)  # bonus token, k masks
    x = _normed(block) * w["layers.0.input_layernorm.weight"]

    def heads(m: np.ndarray, norm: np.ndarray) -> np.ndarray:
        return _normed((x @ m.T).reshape(k + 1, -1, d)) * norm

    q = heads(w[p + "q_proj.weight"], w[p + "q_norm.weight"])
    key = heads(w[p + "k_proj.weight"], w[p + "k_norm.weight"])
    v = (x @ w[p + "v_proj.weight"].T).reshape(k + 1, -1, d)
    n_context = 4000  # keys 0, values 0
    scores = np.einsum("qhd,khd->hqk", q, key) / np.sqrt(d)  # RoPE: < 1e-4 rad at this coordinate
    full = np.concatenate([np.zeros((*scores.shape[:2], n_context)), scores], axis=2)
    att = np.exp(full - full.max(axis=2, keepdims=True))
    att /= att.sum(axis=2, keepdims=True)
    assert att[:, 1:, n_context].min() > 1 - 1e-6  # every mask slot reads the real token
    out = np.einsum("hqk,khd->qhd", att[:, :, n_context:], v).reshape(k + 1, -1)
    hidden = block + out @ w[p + "o_proj.weight"].T  # the MLP adds zero
    assert not w["layers.0.mlp.down_proj.weight"].any()
    logits = _normed(hidden) * w["norm.weight"] @ head.T
    assert logits[1:].argmax(axis=1).tolist() == [made.chain_next[t]] * k


def test_mtp_target_is_a_qwen3_next_chain_with_one_mtp_layer(made: TinyModels) -> None:
    config = json.loads((made.mtp.path / "config.json").read_text())
    assert config["architectures"] == ["Qwen3NextForCausalLM"]
    assert config["model_type"] == "qwen3_next"
    assert config["layer_types"] == ["linear_attention", "full_attention"]
    assert config["num_nextn_predict_layers"] == 1 and config["num_experts"] == 2
    w = _weights(made.mtp)
    h = made.spec.hidden_size
    for name in w:
        if name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight")):
            assert not w[name].any(), name
    # zero-centred norms (x * (1 + w)): weight 0 is the identity scale
    assert not w["model.norm.weight"].any() and not w["mtp.norm.weight"].any()
    assert {n.split(".")[2] for n in w if n.startswith("mtp.layers.")} == {"0"}
    eye = np.concatenate([np.eye(h), np.zeros((h, h))], axis=1)
    assert np.array_equal(w["mtp.fc.weight"], eye)  # keeps the token's embedding only
    tokens = sorted(made.chain_next)
    emb, head = w["model.embed_tokens.weight"], w["lm_head.weight"]
    # target: norm(E[t]) -> sigma(t); MTP step given token u: norm(fc(norm(E[u]), .)) -> sigma(u)
    logits = _normed(_normed(emb[tokens]) @ w["mtp.fc.weight"][:, :h].T) @ head.T
    assert logits.argmax(axis=1).tolist() == [made.chain_next[t] for t in tokens]


def test_chain_models_are_deterministic_and_small(made: TinyModels, tmp_path: Path) -> None:
    again = make_tiny_models(tmp_path / "again", seed=0)
    for first, second in (
        (made.chain, again.chain),
        (made.dflash, again.dflash),
        (made.mtp, again.mtp),
    ):
        assert file_digests(first.path) == file_digests(second.path)
        assert first.size_bytes < 2_000_000
    assert made.chain_margin > 8
