"""The four-way GPU experiment (bench/experiments/tiny-fourway-gpu.yaml) through the whole
pipeline on the emulator: each engine serves its own layout of the one target (``target_model``),
the run folder still reads as one run, the report opens with the stock-vs-patched finding
computed from the payloads' own counters, and a payload of another target or other tensors is
refused by name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from report_factory import write_sums

from bench.cli import main
from bench.engines import load_experiment
from bench.matrix import MatrixOptions, run_matrix
from bench.schema import ModelFiles, Payload, ServedModels, read_payload

FOURWAY = Path("bench/experiments/tiny-fourway-gpu.yaml")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fourway") / "run"
    opts = MatrixOptions(
        out=out, launcher="process", time_scale=0.02, warmup=0, iterations=2, show_progress=False
    )
    result = run_matrix(load_experiment(FOURWAY), opts, experiment_path=FOURWAY)
    assert {o.status for o in result.outcomes} == {"done"}
    return out


def _report(run: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """specbench report's exit code, and REPORT.md (0) or what it printed (else)."""
    code = 0
    try:
        main(["report", str(run), "--out", str(out)])
    except SystemExit as ex:
        code = int(ex.code or 0)
    err = capsys.readouterr().err
    return code, (out / "REPORT.md").read_text(encoding="utf-8") if code == 0 else err


def test_each_engine_is_held_to_its_own_layout_and_the_report_leads_with_the_finding(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payloads = {p.stem: read_payload(p) for p in (run_dir / "payloads").glob("*.json")}
    assert payloads["vllm-mtp-c1"].hfId == "specbench/tiny-qwen3_5-mtp-gptq-vl"
    assert payloads["sglang-mtp-c1"].hfId == "specbench/tiny-qwen3_5-mtp-gptq"
    code, text = _report(run_dir, tmp_path / "report", capsys)
    assert code == 0, text
    summary = text.split("## Executive summary", 1)[1].split("##", 1)[0]
    first = summary.strip().splitlines()[0]
    assert first.startswith("**SGLang + MTP on 2 trees** (concurrency 1):")
    for name in ("sglang-mtp", "sglang-mtp-stock"):
        acc = payloads[f"{name}-c1"].evidence.acceptance
        assert acc is not None
        assert f"`{name}` on `" in first
        assert f"accepted {acc.accepted_tokens} of {acc.draft_tokens} draft tokens" in first
    assert "is **INVALID** (`zero_acceptance` and `draft_tensors_skipped`)" in first
    assert "in 2 layouts, one per engine" in summary


def _edited(run_dir: Path, tmp_path: Path, name: str, update: dict[str, object]) -> Path:
    """A copy of the run with payload ``name`` changed and SHA256SUMS signed again (so only the
    one-run rules can refuse it)."""
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    path = copy / "payloads" / f"{name}.json"
    p = Payload.model_validate_json(path.read_text(encoding="utf-8"))
    ev = p.evidence.model_copy(update={k: v for k, v in update.items() if k == "served"})
    top = {k: v for k, v in update.items() if k != "served"}
    path.write_text(p.model_copy(update={**top, "evidence": ev}).model_dump_json(indent=2) + "\n")
    write_sums(copy)
    return copy


def test_a_payload_of_the_other_layout_is_refused_naming_the_field(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = _edited(run_dir, tmp_path, "vllm-mtp-c1", {"hfId": "specbench/tiny-qwen3_5-mtp-gptq"})
    code, out = _report(copy, tmp_path / "report", capsys)
    assert code == 2
    assert "vllm-mtp-c1.json: target model" in out
    assert "'specbench/tiny-qwen3_5-mtp-gptq-vl' in experiment.lock.json" in " ".join(out.split())


def _served(tensors: str) -> ServedModels:
    files = ModelFiles(
        role="target",
        key="k",
        hf_id="h",
        path="/models/x",
        files={"model.safetensors": "0" * 64},
        weights_sha256="1" * 64,
        tensors_sha256=tensors,
    )
    return ServedModels(target=files)


def test_payloads_whose_servers_read_other_tensors_are_refused(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _edited(run_dir, tmp_path / "a", "sglang-baseline-c1", {"served": _served("a" * 64)})
    copy = tmp_path / "b"
    shutil.copytree(first, copy)
    path = copy / "payloads" / "vllm-mtp-c1.json"
    p = Payload.model_validate_json(path.read_text(encoding="utf-8"))
    ev = p.evidence.model_copy(update={"served": _served("b" * 64)})
    path.write_text(p.model_copy(update={"evidence": ev}).model_dump_json(indent=2) + "\n")
    write_sums(copy)
    code, out = _report(copy, tmp_path / "report", capsys)
    assert code == 2, out
    flat = " ".join(out.split())
    assert "evidence.served.target.tensors_sha256" in flat
    assert "one run folder is one target" in flat
    # the same tensors in both: the folder reads as one run
    path.write_text(
        p.model_copy(
            update={"evidence": p.evidence.model_copy(update={"served": _served("a" * 64)})}
        ).model_dump_json(indent=2)
        + "\n"
    )
    write_sums(copy)
    assert _report(copy, tmp_path / "report2", capsys)[0] == 0
    assert json.loads((copy / "experiment.lock.json").read_text())["experiment"]["name"] == (
        "tiny-fourway-gpu"
    )
