"""Issue 42 class 4, numbers that are not numbers: every float of a model is finite and in its
range (bench.core._numbers), and every float option of the command line is parsed against the
same range before the command does anything (bench.commands._params): exit 2 naming the
option or the field, never a hang, a file written, or another option blamed."""

from __future__ import annotations

import copy
import json
import math
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from pydantic import ValidationError

import bench.commands.matrix as matrix_cmd
from bench.cli import build_app, main
from bench.core import InputError
from bench.emulator.profile import Profile
from bench.schema import Experiment, Payload, RunLock, read_payload
from bench.schema._experiment import EXPERIMENTS_DIR
from bench.tinymodel import TinyModelSpec

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = REPO / "tests/fixtures/payloads/vllm-dflash-c1.json"
HARDWARE = REPO / "tests/fixtures/hardware/h200-hardware.json"
SEED = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
NOT_NUMBERS = [math.inf, -math.inf, math.nan]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, " ".join((out + err).replace("│", " ").split())


def float_options() -> Iterator[tuple[str, str, Any]]:
    """(command path, --option, its typer OptionInfo) for every float option of the CLI."""

    def walk(app: typer.Typer, prefix: str) -> Iterator[tuple[str, str, Any]]:
        for cmd in app.registered_commands:
            assert cmd.callback is not None
            name = cmd.name or cmd.callback.__name__.replace("_", "-")
            hints = typing.get_type_hints(cmd.callback, include_extras=True)
            for param, hint in hints.items():
                if typing.get_origin(hint) is not typing.Annotated:
                    continue
                base, *extras = typing.get_args(hint)
                if float not in (base, *typing.get_args(base)):
                    continue
                info = next(e for e in extras if isinstance(e, typer.models.OptionInfo))
                flag = next(
                    (d for d in info.param_decls or () if d.startswith("--")),
                    "--" + param.replace("_", "-"),
                )
                yield f"{prefix}{name}", flag, info
        for group in app.registered_groups:
            assert group.typer_instance is not None
            yield from walk(group.typer_instance, f"{prefix}{group.name} ")

    yield from walk(build_app(), "")


def test_every_float_option_is_parsed_against_a_range() -> None:
    from bench.commands._params import Number

    found = list(float_options())
    assert {(c, f) for c, f, _ in found} >= {
        ("matrix", "--time-scale"),
        ("demo", "--time-scale"),
        ("emulate", "--time-scale"),
        ("run", "--temperature"),
        ("tiny-model", "--draft-noise"),
        ("roofline", "--weights-gb"),
    }
    unchecked = [f"{c} {f}" for c, f, info in found if not isinstance(info.parser, Number)]
    assert unchecked == []


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999", "-1"])
def test_every_float_option_refuses_what_is_not_in_its_range(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # a command that got past its options must not run: today's demo and matrix hang on inf
    def reached(*_: object, **__: object) -> None:
        raise AssertionError("the command ran with a bad option")

    monkeypatch.setattr(matrix_cmd, "run_demo", reached)
    monkeypatch.setattr(matrix_cmd, "run_matrix", reached)
    for command, flag, _ in float_options():
        # the bad option first: it is parsed before any missing argument is noticed
        code, text = cli(capsys, *command.split(), f"{flag}={value}")
        assert code == 2, (command, flag, text)
        assert f"Invalid value for '{flag}'" in text, (command, flag, text)


def test_time_scale_inf_is_refused_before_the_demo_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def reached(*_: object, **__: object) -> None:
        raise AssertionError("the demo started")

    monkeypatch.setattr(matrix_cmd, "run_demo", reached)
    code, text = cli(capsys, "demo", "--out", str(tmp_path / "d"), "--time-scale", "inf")
    assert code == 2
    assert "'--time-scale': inf is not a finite number > 0 and <= 100" in text
    assert not (tmp_path / "d").exists()


def test_draft_noise_inf_writes_no_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import bench.tinymodel

    def reached(*_: object, **__: object) -> None:
        raise AssertionError("models were written")

    monkeypatch.setattr(bench.tinymodel, "make_tiny_models", reached)
    code, text = cli(capsys, "tiny-model", str(tmp_path / "m"), "--draft-noise", "inf")
    assert code == 2 and "'--draft-noise'" in text
    assert not (tmp_path / "m").exists()
    with pytest.raises(ValidationError):
        TinyModelSpec(draft_noise=math.inf)


def test_infinite_temperature_is_named_not_the_base_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, text = cli(
        capsys, "run", "vllm", "--base-url", "http://127.0.0.1:9", "--hf-id", "Qwen/X",
        "--served-model", "x", "--quantization", "q", "--hardware", str(HARDWARE),
        "--prompt-tokens", "16", "--max-tokens", "8", "--out", str(tmp_path / "p.json"),
        "--no-telemetry", "--request-timeout", "2", "--temperature", "inf",
    )  # fmt: skip
    assert code == 2
    assert "'--temperature'" in text and "--base-url" not in text


def _seed_with(**changes: Any) -> Path:
    data = yaml.safe_load(SEED.read_text())
    data.update(changes)
    return data  # type: ignore[no-any-return]


def test_gpu_mem_util_above_one_is_refused_by_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(_seed_with(gpu_mem_util={"vllm": 1.5, "sglang": 0.87})))
    code, text = cli(capsys, "plan", str(exp))
    assert code == 2
    assert f"{exp}: gpu_mem_util.vllm" in text and "less than or equal to 1" in text


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("gpu_mem_util", "vllm"), 0.0),
        (("gpu_mem_util", "vllm"), math.inf),
        (("workload", "request_timeout_s"), math.inf),
        (("workload", "request_timeout_s"), 1e300),
        (("server", "ready_timeout_s"), math.inf),
    ],
)
def test_experiment_numbers_out_of_range(path: tuple[str, ...], value: float) -> None:
    data = _seed_with()
    node: Any = data
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    with pytest.raises(ValidationError) as info:
        Experiment.model_validate(data)
    assert info.value.errors()[0]["loc"][:2] == path


def _payload() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PAYLOAD.read_text())
    return data


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("ttftMs",), math.inf),
        (("tokSTotal",), math.nan),
        (("samples", 0), -math.inf),
        (("samples", 0), -1.0),
        (("sampleStats", "stddev"), math.inf),
        (("engineFlags", "temperature"), math.inf),
        (("evidence", "workload", "temperature"), -1.0),
        (("evidence", "iterations", 1, "requests", 0, "ttft_ms"), math.inf),
        (("evidence", "iterations", 1, "requests", 0, "e2e_ms"), -5.0),
        (("evidence", "iterations", 1, "requests", 0, "sent_at"), math.nan),
        (("evidence", "iterations", 1, "requests", 0, "chunk_chars", 1), -3),
        (("evidence", "iterations", 1, "window_start"), math.inf),
        (("hardware", "vramGb"), math.inf),
    ],
)
def test_a_payload_of_python_values_refuses_what_is_not_a_number(
    path: tuple[str | int, ...], value: float
) -> None:
    # the JSON reader refuses NaN/Infinity literals; a model built from Python values must too
    data = _payload()
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValidationError) as info:
        Payload.model_validate(data)
    assert tuple(info.value.errors()[0]["loc"][: len(path)]) == path


def _backwards(data: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    times = out["evidence"]["iterations"][1]["requests"][0]["chunk_times"]
    times[2], times[3] = times[3], times[2]
    assert times[2] > times[3]
    return out


def test_chunk_times_running_backwards_make_an_invalid_payload(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps(_backwards(_payload())))
    with pytest.raises(InputError) as info:
        read_payload(bad)
    assert info.value.where == f"{bad}: evidence.iterations.1.requests.0.chunk_times"
    assert "arrival times never go backwards" in info.value.reason


def test_validate_names_the_backwards_chunk_times(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps(_backwards(_payload())))
    code, text = cli(capsys, "validate", str(bad))
    assert code == 1
    assert "$.evidence.iterations[1].requests[0].chunk_times" in text


def test_last_token_before_first_is_refused() -> None:
    data = _payload()
    req = data["evidence"]["iterations"][1]["requests"][0]
    req["first_token_at"], req["last_token_at"] = req["last_token_at"], req["first_token_at"]
    with pytest.raises(ValidationError, match=r"last_token_at .* is before first_token_at"):
        Payload.model_validate(data)


def test_the_shipped_payloads_still_validate() -> None:
    for path in sorted((REPO / "tests/fixtures/payloads").glob("*.json")):
        read_payload(path)


def test_run_lock_time_scale_and_overrides_in_range() -> None:
    for bad in ({"time_scale": math.inf}, {"time_scale": 0.0}, {"iterations": 0}):
        with pytest.raises(ValidationError):
            RunLock.model_validate(
                {
                    "schema": "specbench.lock/1", "run_id": "r", "created_at": "t",
                    "simulated": True, "launcher": "process", "overrides": bad,
                    "prompt_seed": 1, "experiment": _seed_with(),
                }
            )  # fmt: skip


def test_an_emulator_profile_refuses_infinite_durations() -> None:
    from bench.emulator.profile import load_profile

    base = load_profile("vllm-dflash").model_dump()
    for key, value in (("time_scale", math.inf), ("load_s", math.inf), ("load_s", math.nan)):
        with pytest.raises(ValidationError) as info:
            Profile.model_validate({**base, key: value})
        assert info.value.errors()[0]["loc"] == (key,)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        # a negative GPU index reached torch; an exit code past 255 is another code mod 256
        (["probe", "bandwidth", "--device", "-1"], "--device"),
        (["emulate", "vllm", "--port", "1", "--exit-code", "300"], "--exit-code"),
        (["emulate", "vllm", "--port", "1", "--exit-code", "-1"], "--exit-code"),
    ],
)
def test_integer_options_out_of_range_are_named(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    flag: str,
) -> None:
    import bench.commands.emulate as emulate_cmd
    import bench.commands.hardware as hardware_cmd

    def reached(*_: object, **__: object) -> None:
        raise AssertionError("the command ran with a bad option")

    monkeypatch.setattr(hardware_cmd, "probe_bandwidth", reached)
    monkeypatch.setattr(emulate_cmd, "run_process", reached)
    code, text = cli(capsys, *argv)
    assert code == 2 and f"Invalid value for '{flag}'" in text, text


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        # a typo of a few digits: a prompt of gigabytes built after the run folder was written
        ("prompt_tokens", 10**9, "less than or equal to 16777216"),
        ("max_tokens", 10**12, "less than or equal to 16777216"),
        ("iterations", 10**7, "less than or equal to 100000"),
        ("concurrency", [1, 10**6], "every concurrency level must be <= 4096"),
    ],
)
def test_absurd_workloads_are_refused_by_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str, value: object, reason: str
) -> None:
    data = _seed_with()
    data["workload"][key] = value
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(data))
    code, text = cli(capsys, "plan", str(exp))
    assert code == 2
    assert f"{exp}: workload.{key}" in text and reason in text


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--concurrency", "100000"),
        ("--prompt-tokens", "1000000000"),
        ("--iterations", "1000000000"),
    ],
)
def test_absurd_run_options_are_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str, value: str
) -> None:
    code, text = cli(
        capsys, "run", "vllm", "--base-url", "http://127.0.0.1:9",
        "--hf-id", "Qwen/X", "--served-model", "x", "--quantization", "q",
        "--hardware", str(HARDWARE), "--prompt-tokens", "16", "--max-tokens", "8",
        "--out", str(tmp_path / "p.json"), "--no-telemetry", option, value,
    )  # fmt: skip
    assert code == 2 and f"Invalid value for '{option}'" in text, text


def test_a_payload_of_an_absurd_size_is_refused() -> None:
    data = _payload()
    data["promptTokens"] = 10**30
    with pytest.raises(ValidationError) as info:
        Payload.model_validate(data)
    assert info.value.errors()[0]["loc"] == ("promptTokens",)
