"""The experiment file: the seed experiment loads, and bad files fail with exit 2 and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from bench.cli import app
from bench.core import InputError
from bench.engines import load_experiment
from bench.schema import EXPERIMENTS_DIR

SEED = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"


def seed_data() -> dict[str, Any]:
    data = yaml.safe_load(SEED.read_text())
    assert isinstance(data, dict)
    return data


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_seed_experiment_matches_the_seed_report() -> None:
    exp = load_experiment(SEED)
    by_name = {c.name: c for c in exp.configurations}
    assert exp.workload.prompt_tokens == 1044
    assert exp.workload.max_tokens == 512
    assert (exp.workload.warmup, exp.workload.iterations) == (2, 5)
    assert exp.target.hf_id == "btbtyler09/Qwen3.8-27B-GPTQ-4bit"
    assert exp.models["dflash-draft"].hf_id == "z-lab/Qwen3.8-27B-DFlash2"
    for name in ("vllm-dflash", "sglang-dflash", "vllm-mtp", "sglang-mtp"):
        assert exp.levels_for(by_name[name]) == [1, 2, 4, 8, 16]
    assert by_name["vllm-dflash"].spec_num_tokens == 4
    assert by_name["vllm-mtp"].spec_num_tokens == 2
    baselines = [c for c in exp.configurations if c.method == "NONE"]
    assert sorted(c.engine for c in baselines) == ["sglang", "vllm"]
    assert exp.images["vllm"].version == "0.33.0"
    assert exp.images["sglang"].version == "0.5.19"
    assert by_name["sglang-mtp-stock"].expect_invalid


def test_seed_mtp_commands_are_verbatim() -> None:
    exp = load_experiment(SEED)
    sgl = exp.configuration("sglang-mtp").args
    seed = (
        "--tp-size 2 --context-length 8192 --mem-fraction-static 0.87 --max-running-requests 4 "
        "--disable-custom-all-reduce --attention-backend fa3 --cuda-graph-backend-prefill "
        "disabled --speculative-algorithm NEXTN --speculative-num-steps 2 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3 "
        "--speculative-draft-model-quantization unquant --mamba-scheduler-strategy extra_buffer"
    )
    assert " ".join(sgl) == seed
    vl = exp.configuration("vllm-mtp").args
    assert vl[-1] == '{"method":"qwen3_next_mtp","num_speculative_tokens":2}'


def test_unresolved_pins_are_listed() -> None:
    exp = load_experiment(SEED)
    pins = exp.unresolved_pins()
    assert any(p.startswith("images.vllm.digest") for p in pins)
    assert any(p.startswith("models.target.revision") for p in pins)


def _mutate(data: dict[str, Any], path: str, value: Any) -> None:
    *head, last = path.split(".")
    node: Any = data
    for key in head:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


_DELETE = object()

BAD_CASES = [
    ("unknown top-level key", "colour", "blue", "colour"),
    ("unknown configuration key", "configurations.0.flavour", "x", "configurations.0.flavour"),
    ("missing digest", "images.vllm.digest", _DELETE, "images.vllm.digest"),
    ("malformed digest", "images.vllm.digest", "sha256:abc", "images.vllm.digest"),
    ("missing revision", "models.target.revision", _DELETE, "models.target.revision"),
    ("unknown engine", "configurations.0.engine", "tgi", "configurations.0.engine"),
    ("unknown method", "configurations.0.method", "medusa", "configurations.0.method"),
    ("duplicate name", "configurations.1.name", "vllm-dflash", "configurations.1.name"),
    ("concurrency zero", "workload.concurrency", [0, 1], "workload.concurrency"),
    (
        "config concurrency < 1",
        "configurations.2.concurrency",
        [-1],
        "configurations.2.concurrency",
    ),
    ("unknown image key", "configurations.0.image", "nope", "configurations.0.image"),
    ("tokens disagree with flags", "configurations.0.spec_num_tokens", 7, "configurations.0.args"),
    ("plumbing flag repeated", "configurations.5.args", ["--port", "1"], "configurations.5.args"),
]


@pytest.mark.parametrize(
    ("label", "path", "value", "field"), BAD_CASES, ids=[c[0] for c in BAD_CASES]
)
def test_bad_file_names_the_field(
    tmp_path: Path, label: str, path: str, value: Any, field: str
) -> None:
    data = seed_data()
    _mutate(data, path, value)
    with pytest.raises(InputError) as info:
        load_experiment(write(tmp_path, data))
    assert field in info.value.where, (label, str(info.value))


def test_bad_file_exits_2_through_the_cli(tmp_path: Path) -> None:
    data = seed_data()
    data["configurations"][0]["engine"] = "tgi"
    from bench.cli import main

    p = write(tmp_path, data)
    with pytest.raises(SystemExit) as info:
        main(["plan", str(p)])
    assert info.value.code == 2


def test_plan_cli_prints_every_configuration() -> None:
    result = CliRunner().invoke(app, ["plan", str(SEED)])
    assert result.exit_code == 0, result.output
    exp = load_experiment(SEED)
    for name in exp.names():
        assert f"## {name} " in result.output
    assert "docker run" in result.output


def test_the_workloads_stall_timeout(tmp_path: Path) -> None:
    # seconds without a byte once a stream has begun (issue 38): 120 unless the file says
    assert load_experiment(SEED).workload.stall_timeout_s == 120.0
    data = seed_data()
    data["workload"]["stall_timeout_s"] = 30
    assert load_experiment(write(tmp_path, data)).workload.stall_timeout_s == 30.0
    for bad in (0, -5, float("inf")):
        data["workload"]["stall_timeout_s"] = bad
        with pytest.raises(InputError) as info:
            load_experiment(write(tmp_path, data))
        assert "workload.stall_timeout_s" in info.value.where
