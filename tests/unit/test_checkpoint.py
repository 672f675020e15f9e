"""Preflight checks on fake checkpoints written here (bench.matrix, specbench preflight)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.engines import load_experiment
from bench.engines.checkpoint_rules import vllm_dflash_arch
from bench.matrix import CheckReport, Finding, check_checkpoint, check_models_dir
from bench.schema import Experiment

EXPERIMENT = Path(__file__).resolve().parents[2] / "bench/experiments/qwen38-27b-gptq-2x3090.yaml"
TARGET = "Qwen3.8-27B-GPTQ-4bit"
DRAFT = "Qwen3.8-27B-DFlash2"
TARGET_ID = "btbtyler09/Qwen3.8-27B-GPTQ-4bit"
DRAFT_ID = "z-lab/Qwen3.8-27B-DFlash2"


@pytest.fixture(scope="module")
def experiment() -> Experiment:
    return load_experiment(EXPERIMENT)


def gptq(**over: Any) -> dict[str, Any]:
    """The pinned target's quantization: 4-bit, group 32, symmetric, desc_act false."""
    q: dict[str, Any] = {
        "quant_method": "gptq",
        "bits": 4,
        "group_size": 32,
        "desc_act": False,
        "sym": True,
        "lm_head": False,
        "checkpoint_format": "gptq",
    }
    q.update(over)
    return {k: v for k, v in q.items() if v is not None}


def write_target(root: Path, q: dict[str, Any] | None = None, *, in_config: bool = True) -> Path:
    d = root / TARGET
    d.mkdir(parents=True, exist_ok=True)
    q = gptq() if q is None else q
    cfg: dict[str, Any] = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": {"model_type": "qwen3_5_text", "num_hidden_layers": 64},
    }
    if in_config:
        cfg["quantization_config"] = q
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (d / "quantize_config.json").write_text(json.dumps(q), encoding="utf-8")
    return d


def dflash2(**over: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "target_layer_ids": [5, 19, 33, 47, 61],
        "selector_rank": 256,
        "selector_top_k": 8,
        "conv_kernel_size": 4,
        "conv_group_size": 8,
        "block_size": 8,
        "mask_token_id": 248077,
    }
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def write_draft(
    root: Path, arch: str = "DFlash2DraftModel", dcfg: dict[str, Any] | None = None
) -> Path:
    d = root / DRAFT
    d.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": [arch],
        "model_type": "qwen3",
        "num_hidden_layers": 5,
        "dflash_config": dflash2() if dcfg is None else dcfg,
    }
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return d


def only(report: CheckReport, field: str, engine: str | None = None) -> list[Finding]:
    return [
        f for f in report.findings if f.field == field and (engine is None or f.engine == engine)
    ]


# -- target ------------------------------------------------------------------------------------


def test_good_checkpoints_pass(tmp_path: Path, experiment: Experiment) -> None:
    report = check_checkpoint(write_target(tmp_path), write_draft(tmp_path), experiment)
    assert report.findings == []
    assert report.ok and report.exit_code == 0
    assert {(m.role, m.checkpoint) for m in report.checked} == {
        ("target", TARGET_ID),
        ("draft", DRAFT_ID),
    }
    assert all(m.engines == ["sglang", "vllm"] for m in report.checked)


def test_desc_act_with_groups_is_refused_by_vllm(tmp_path: Path, experiment: Experiment) -> None:
    report = check_checkpoint(write_target(tmp_path, gptq(desc_act=True)), None, experiment)
    [f] = report.errors
    assert (f.engine, f.engine_version, f.field, f.value) == (
        "vllm",
        "0.33.0",
        "quantization_config.desc_act",
        "true",
    )
    assert f.checkpoint == TARGET_ID and f.file.endswith(f"{TARGET}/config.json")
    assert "gptq_utils.py" in f.source and "desc_act" in f.rule
    # The message names the checkpoint, the field and the pinned version.
    for part in (TARGET_ID, "desc_act=true", "vllm 0.33.0"):
        assert part in f.message
    # SGLang's Marlin path handles act-order: nothing for it.
    assert not [x for x in report.findings if x.engine == "sglang"]
    assert report.exit_code == 1


def test_desc_act_with_channelwise_groups_is_fine(tmp_path: Path, experiment: Experiment) -> None:
    report = check_checkpoint(
        write_target(tmp_path, gptq(desc_act=True, group_size=-1)), None, experiment
    )
    assert report.findings == []


def test_desc_act_turned_on_by_a_dynamic_rule(tmp_path: Path, experiment: Experiment) -> None:
    dyn = {r"+:.*\.mlp\..*": {"desc_act": True}, r"-:.*mtp.*": {}}
    report = check_checkpoint(write_target(tmp_path, gptq(dynamic=dyn)), None, experiment)
    [f] = report.errors
    assert f.engine == "vllm"
    assert f.field == 'quantization_config.dynamic["+:.*\\\\.mlp\\\\..*"].desc_act'
    assert "dynamic rule" in f.rule


def test_asymmetric_is_an_error(tmp_path: Path, experiment: Experiment) -> None:
    report = check_checkpoint(write_target(tmp_path, gptq(sym=False)), None, experiment)
    [err] = report.errors
    assert (err.engine, err.field, err.value) == ("vllm", "quantization_config.sym", "false")
    # SGLang loads it, but on the slow non-Marlin kernel: a warning.
    [warn] = only(report, "quantization_config.sym", "sglang")
    assert warn.severity == "warning" and "gptq_marlin" in warn.rule


@pytest.mark.parametrize("group", [16, 256])
def test_unsupported_group_size(tmp_path: Path, experiment: Experiment, group: int) -> None:
    report = check_checkpoint(write_target(tmp_path, gptq(group_size=group)), None, experiment)
    [err] = report.errors
    assert (err.engine, err.field, err.value) == (
        "vllm",
        "quantization_config.group_size",
        str(group),
    )
    assert "[-1, 32, 64, 128]" in err.rule
    assert only(report, "quantization_config.group_size", "sglang")[0].severity == "warning"


def test_three_bit_is_refused_by_vllm_only(tmp_path: Path, experiment: Experiment) -> None:
    report = check_checkpoint(write_target(tmp_path, gptq(bits=3)), None, experiment)
    assert [(f.engine, f.field) for f in report.errors] == [("vllm", "quantization_config.bits")]


def test_missing_required_key(tmp_path: Path, experiment: Experiment) -> None:
    report = check_checkpoint(write_target(tmp_path, gptq(sym=None)), None, experiment)
    [err] = report.errors
    assert (err.engine, err.field, err.value) == ("vllm", "quantization_config.sym", "<missing>")


def test_wrong_type_is_an_error_not_a_crash(tmp_path: Path, experiment: Experiment) -> None:
    report = check_checkpoint(write_target(tmp_path, gptq(desc_act="false")), None, experiment)
    assert {f.field for f in report.errors} == {"quantization_config.desc_act"}
    assert {f.engine for f in report.errors} == {"vllm", "sglang"}


def test_quantize_config_json_alone_is_not_read(tmp_path: Path, experiment: Experiment) -> None:
    """Without quantization_config in config.json (and no --quantization) the engines load
    the weights unquantized."""
    report = check_checkpoint(write_target(tmp_path, in_config=False), None, experiment)
    assert {(f.engine, f.field) for f in report.errors} == {
        ("vllm", "quantization_config"),
        ("sglang", "quantization_config"),
    }


def test_vllm_reads_text_config_quantization(tmp_path: Path, experiment: Experiment) -> None:
    d = write_target(tmp_path, in_config=False)
    cfg = json.loads((d / "config.json").read_text())
    cfg["text_config"]["quantization_config"] = gptq(desc_act=True)
    (d / "config.json").write_text(json.dumps(cfg))
    report = check_checkpoint(d, None, experiment)
    assert [(f.engine, f.field) for f in report.errors if f.engine == "vllm"] == [
        ("vllm", "text_config.quantization_config.desc_act")
    ]


# -- drafter -----------------------------------------------------------------------------------


def test_dflash2_drafter_ok(tmp_path: Path, experiment: Experiment) -> None:
    report = check_checkpoint(write_target(tmp_path), write_draft(tmp_path), experiment)
    assert [f for f in report.findings if f.checkpoint == DRAFT_ID] == []


def test_unknown_architecture(tmp_path: Path, experiment: Experiment) -> None:
    draft = write_draft(tmp_path, arch="Qwen3ForCausalLM")
    report = check_checkpoint(write_target(tmp_path), draft, experiment)
    errs = only(report, "architectures")
    assert {(f.engine, f.engine_version) for f in errs} == {
        ("vllm", "0.33.0"),
        ("sglang", "0.5.19"),
    }
    assert all(f.checkpoint == DRAFT_ID and f.value == '["Qwen3ForCausalLM"]' for f in errs)
    assert "DFlash2DraftModel" in errs[0].rule
    assert report.exit_code == 1


def test_vllm_rewrites_bare_names_like_upstream() -> None:
    assert vllm_dflash_arch("DFlash2DraftModel") == "DFlash2DraftModel"
    assert vllm_dflash_arch("MuseGlimmerAssistantModel") == "DFlashMuseGlimmerAssistantModel"
    assert vllm_dflash_arch("LiLiCorrDraftModel") == "LiLiCorrDraftModel"


def test_architecture_registered_by_one_engine_only(tmp_path: Path, experiment: Experiment) -> None:
    """DFlash2BeamDraftModel is in vLLM 0.33.0's registry but not in SGLang 0.5.19's."""
    draft = write_draft(tmp_path, arch="DFlash2BeamDraftModel", dcfg={"target_layer_ids": [1]})
    report = check_checkpoint(write_target(tmp_path), draft, experiment)
    assert [(f.engine, f.field) for f in report.errors] == [("sglang", "architectures")]


def test_missing_target_layer_ids(tmp_path: Path, experiment: Experiment) -> None:
    draft = write_draft(tmp_path, dcfg=dflash2(target_layer_ids=None))
    report = check_checkpoint(write_target(tmp_path), draft, experiment)
    errs = report.errors
    assert {(f.engine, f.field, f.value) for f in errs} == {
        ("vllm", "dflash_config.target_layer_ids", "<missing>"),
        ("sglang", "dflash_config.target_layer_ids", "<missing>"),
    }
    assert "acceptance collapses" in errs[0].rule


def test_target_layer_ids_out_of_range(tmp_path: Path, experiment: Experiment) -> None:
    draft = write_draft(tmp_path, dcfg=dflash2(target_layer_ids=[5, 64]))
    report = check_checkpoint(write_target(tmp_path), draft, experiment)
    assert {f.field for f in report.errors} == {"dflash_config.target_layer_ids"}
    assert "64 layers" in report.errors[0].rule


def test_missing_selector_rank(tmp_path: Path, experiment: Experiment) -> None:
    draft = write_draft(tmp_path, dcfg=dflash2(selector_rank=None))
    report = check_checkpoint(write_target(tmp_path), draft, experiment)
    assert {(f.engine, f.field) for f in report.errors} == {
        ("vllm", "dflash_config.selector_rank"),
        ("sglang", "dflash_config.selector_rank"),
    }


def test_selector_rank_only_matters_for_dflash2(tmp_path: Path, experiment: Experiment) -> None:
    draft = write_draft(tmp_path, arch="DFlashDraftModel", dcfg={"target_layer_ids": [1, 30, 61]})
    assert check_checkpoint(write_target(tmp_path), draft, experiment).findings == []


def test_vllm_needs_the_conv_keys(tmp_path: Path, experiment: Experiment) -> None:
    draft = write_draft(tmp_path, dcfg=dflash2(conv_kernel_size=None, conv_group_size=None))
    report = check_checkpoint(write_target(tmp_path), draft, experiment)
    # SGLang treats both absent as "no convolution"; vLLM's DFlash2 reads both unconditionally.
    assert {(f.engine, f.field) for f in report.errors} == {
        ("vllm", "dflash_config.conv_kernel_size"),
        ("vllm", "dflash_config.conv_group_size"),
    }


# -- experiment-level and CLI ------------------------------------------------------------------


def test_other_pinned_version_gives_a_warning(tmp_path: Path, experiment: Experiment) -> None:
    data = experiment.lock_dict()
    data["images"]["vllm"]["version"] = "0.34.0"
    other = Experiment.model_validate(data)
    report = check_checkpoint(write_target(tmp_path), None, other)
    [w] = report.findings
    assert (w.severity, w.field, w.engine_version) == ("warning", "images.vllm.version", "0.34.0")
    assert report.ok


def test_missing_model_folder(tmp_path: Path, experiment: Experiment) -> None:
    write_target(tmp_path)
    report = check_models_dir(experiment, tmp_path)
    assert {(f.checkpoint, f.rule) for f in report.errors} == {(DRAFT_ID, "file not found")}


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["preflight", str(EXPERIMENT), *args])


def test_cli_ok_and_json(tmp_path: Path) -> None:
    write_target(tmp_path)
    write_draft(tmp_path)
    res = run_cli("--models-dir", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert "preflight OK: 0 error(s)" in res.output
    res = run_cli("--models-dir", str(tmp_path), "--json")
    assert res.exit_code == 0
    report = CheckReport.model_validate_json(res.output)
    assert len(report.checked) == 2 and report.findings == []


def test_cli_errors_exit_1(tmp_path: Path) -> None:
    write_target(tmp_path, gptq(desc_act=True))
    write_draft(tmp_path)
    res = run_cli("--models-dir", str(tmp_path))
    assert res.exit_code == 1
    assert "ERROR btbtyler09/Qwen3.8-27B-GPTQ-4bit" in res.output
    assert "quantization_config.desc_act=true" in res.output and "vllm 0.33.0" in res.output


def test_cli_bad_input_exit_2(tmp_path: Path) -> None:
    from bench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["preflight", str(EXPERIMENT), "--models-dir", str(tmp_path / "nope")])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["preflight", str(tmp_path / "none.yaml"), "--models-dir", str(tmp_path)])
    assert exc.value.code == 2
