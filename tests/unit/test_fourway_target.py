"""The four-way's one target in two layouts (bench/tinymodel/_qwen35vl.py): mtp35vl-gptq/ holds
exactly mtp35-gptq/'s tensors under the names vLLM 0.26.0's Qwen3_5ForConditionalGeneration
maps (models/qwen3_vl.py:1705-1711: ``model.language_model.`` -> ``language_model.model.``),
its quantization_config names the same modules in that layout, and no ``mtp`` module; a
configuration serving it names it as its own ``target_model``, and every served folder is
identified by content (bench/matrix/_served.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_tinymodel_gptq import read_raw

from bench.core import InputError
from bench.engines import get_engine, load_experiment
from bench.matrix._served import engine_install, model_files, tensor_digests
from bench.tinymodel import GptqOptions, TinyModels, make_tiny_models

FOURWAY = Path("bench/experiments/tiny-fourway-gpu.yaml")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("tiny"), gptq=GptqOptions())


def _config(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return data


def test_the_vl_layout_holds_the_same_tensors_under_the_wrapper_names(made: TinyModels) -> None:
    assert made.mtp35_gptq is not None and made.mtp35vl_gptq is not None
    text = read_raw(made.mtp35_gptq.path / "model.safetensors")
    vl = read_raw(made.mtp35vl_gptq.path / "model.safetensors")
    renamed = {
        ("model.language_model." + n.removeprefix("model.")) if n.startswith("model.") else n: v
        for n, v in text.items()
    }
    assert sorted(renamed) == sorted(vl)
    assert any(n.startswith("mtp.") for n in vl) and any(n.startswith("lm_head.") for n in vl)
    for name, (dtype, values) in renamed.items():
        assert vl[name][0] == dtype and (vl[name][1] == values).all(), name


def test_the_vl_config_wraps_the_text_config_and_renames_the_quantized_modules(
    made: TinyModels,
) -> None:
    assert made.mtp35_gptq is not None and made.mtp35vl_gptq is not None
    text, vl = _config(made.mtp35_gptq.path), _config(made.mtp35vl_gptq.path)
    assert vl["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    assert vl["model_type"] == "qwen3_5" and vl["text_config"]["model_type"] == "qwen3_5_text"
    assert "quantization_config" not in vl["text_config"]
    assert vl["vision_config"]["out_hidden_size"] == text["hidden_size"]
    tq, vq = text["quantization_config"], vl["quantization_config"]
    assert vq["dynamic"] == tq["dynamic"] and not any("mtp" in r for r in vq["dynamic"])
    assert vq["modules_in_block_to_quantize"] == [
        "model.language_model." + m.removeprefix("model.")
        for m in tq["modules_in_block_to_quantize"]
    ]
    assert not any("mtp" in m for m in vq["modules_in_block_to_quantize"])
    for key in ("hidden_size", "num_hidden_layers", "vocab_size", "mtp_num_hidden_layers"):
        assert vl["text_config"][key] == text[key]


def test_served_digests_tell_one_checkpoint_in_two_layouts_from_another(made: TinyModels) -> None:
    assert made.mtp35_gptq and made.mtp35vl_gptq and made.mtp35_gptq_mtprule
    text = model_files("target", "a", "a", made.mtp35_gptq.path)
    vl = model_files("target", "b", "b", made.mtp35vl_gptq.path)
    bf16 = model_files("target", "c", "c", made.mtp35.path)
    assert text.tensors_sha256 == vl.tensors_sha256  # the same tensors
    assert text.weights_sha256 != vl.weights_sha256  # in files that differ (the names)
    assert text.tensors_sha256 != bf16.tensors_sha256  # the unquantized model is another one
    assert text.tokenizer_sha256 == vl.tokenizer_sha256 == text.files["tokenizer.json"]
    assert text.files["model.safetensors"] == made.mtp35_gptq.sha256["model.safetensors"]


def test_a_tensor_past_the_end_of_its_file_is_named_unreadable(tmp_path: Path) -> None:
    header = json.dumps({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    with pytest.raises(InputError, match="ends before byte"):
        tensor_digests(path)
    assert model_files("target", "k", "h", tmp_path).tensors_sha256 == "unreadable: InputError"


def _wheel_install(site: Path, files: dict[str, bytes]) -> None:
    import base64
    import hashlib

    rows = []
    for name, data in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{name},sha256={digest},{len(data)}")
    info = site / "eng-1.2.3.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("\n".join([*rows, "eng-1.2.3.dist-info/RECORD,,"]) + "\n")


def test_engine_install_names_each_file_that_differs_from_the_wheel(tmp_path: Path) -> None:
    _wheel_install(tmp_path, {"eng/__init__.py": b"x = 1\n", "eng/a.py": b"a\n", "eng/b.so": b"\0"})
    assert engine_install("eng", [tmp_path]) == engine_install("eng", [tmp_path])
    clean = engine_install("eng", [tmp_path])
    assert clean is not None
    assert (clean.version, clean.record_files, clean.modified, clean.missing) == (
        "1.2.3",
        3,
        [],
        [],
    )
    (tmp_path / "eng/a.py").write_text("a  # patched\n")
    (tmp_path / "eng/b.so").unlink()
    patched = engine_install("eng", [tmp_path / "nowhere", tmp_path])
    assert patched is not None
    assert patched.modified == ["eng/a.py"] and patched.missing == ["eng/b.so"]
    assert engine_install("other", [tmp_path]) is None


def test_each_engine_serves_its_own_layout_of_the_one_target() -> None:
    exp = load_experiment(FOURWAY)
    for cfg in exp.configurations:
        argv = get_engine(cfg.engine).server_argv(cfg, exp)
        # SGLang 0.5.17's DFLASH needs the conditional-generation class (its deviation)
        vl = cfg.engine == "vllm" or cfg.method == "DFLASH"
        want = "/models/mtp35vl-gptq" if vl else "/models/mtp35-gptq"
        assert want in argv, (cfg.name, argv)
        assert exp.target_for(cfg).path == want


def test_an_unknown_target_model_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = FOURWAY.read_text(encoding="utf-8").replace(
        "target_model: mtp35vlgptq", "target_model: nosuch", 1
    )
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_experiment(path)
    assert "configurations.0.target_model" in info.value.where
    assert "'nosuch' not in 'models'" in info.value.reason
