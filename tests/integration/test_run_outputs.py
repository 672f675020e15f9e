"""`specbench run` never writes its payload over a file it reads (issue 47, class 5): `--out`
that is `--prompt-set` or `--hardware` is refused before anything is measured, the input left
as it was. On main 101bc6e the payload replaced it once the run ended."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_run_fake_engine import cli
from test_run_fake_engine import hardware as hardware  # the fixture

from bench.emulator import serve_in_thread
from bench.emulator.runner import EmulatorHandle

PROMPTS = '{"category": "code", "prompt": "Write a loop."}\n'


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    handle = serve_in_thread("vllm", "vllm-mtp", time_scale=0.05)
    assert handle.wait_ready(60)
    yield handle
    handle.stop()


def run_args(h: EmulatorHandle, hw: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run", "vllm", "--mode", "remote", "--base-url", h.base_url,
        "--hf-id", "btbtyler09/Qwen3.8-27B-GPTQ-4bit", "--served-model", "qwen38-27b-gptq",
        "--quantization", "GPTQ-4bit", "--hardware", str(hw), "--spec-method", "mtp",
        "--spec-num-tokens", "2", "--prompt-tokens", "64", "--max-tokens", "16",
        "--concurrency", "1", "--warmup", "0", "--iterations", "1", "--out", str(out), *extra,
    ]  # fmt: skip


def test_out_that_is_the_prompt_set_is_refused(
    emulator: EmulatorHandle, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(PROMPTS)
    code, _, err = cli(capsys, *run_args(emulator, hardware, prompts, "--prompt-set", str(prompts)))
    assert code == 2 and "--out" in err and "is the input" in err, err
    assert prompts.read_text() == PROMPTS


def test_out_that_is_the_hardware_record_is_refused(
    emulator: EmulatorHandle, hardware: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = hardware.read_bytes()
    code, _, err = cli(capsys, *run_args(emulator, hardware, hardware))
    assert code == 2 and "--out" in err and "is the input" in err, err
    assert hardware.read_bytes() == before


def test_another_out_still_gets_the_payload(
    emulator: EmulatorHandle, hardware: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "payload.json"
    code, _, err = cli(capsys, *run_args(emulator, hardware, out))
    assert code == 0 and out.is_file(), err
