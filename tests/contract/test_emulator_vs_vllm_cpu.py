"""The emulator's vLLM shape held against recordings of the real vLLM CPU server.

The recordings (tests/fixtures/vllm-cpu: one streamed chat completion, the /metrics page, the
startup log) come from ``tests/engine/record_fixtures.py`` against docker/vllm-cpu serving the
tiny models with a draft model. Checked here: every vllm:* metric family the emulator serves
exists in the real page with the same type and label names; the stream has the same skeleton
(role chunk, content chunks, one finish_reason, a usage chunk with no choices, [DONE]) and the
fields specbench's client reads; the log lines specbench matches are found in both logs.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.emulator import serve_in_thread
from bench.emulator.runner import EmulatorHandle
from bench.engines import get_engine, load_experiment
from bench.schema import EXPERIMENTS_DIR

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-cpu"
# The families bench.acceptance reads (prometheus_client drops a counter's _total suffix).
SPEC_FAMILIES = {
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
}


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[EmulatorHandle, io.StringIO]]:
    log = io.StringIO()
    handle = serve_in_thread("vllm", "vllm-dflash", time_scale=0.05, echo=log)
    assert handle.wait_ready(60)
    yield handle, log
    handle.stop()


def families(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """vllm:* family -> (type, label names of its samples)."""
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("vllm:"):
            labels = frozenset(name for s in family.samples for name in s.labels)
            out[family.name] = (family.type, labels)
    return out


def stream_lines(handle: EmulatorHandle) -> list[str]:
    served = httpx.get(handle.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
    body = {
        "model": served,
        "messages": [{"role": "user", "content": "Tell me about the draft model."}],
        "max_tokens": 24,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    url = handle.base_url + "/v1/chat/completions"
    with httpx.stream("POST", url, json=body, timeout=60) as reply:
        reply.raise_for_status()
        return list(reply.iter_lines())


def skeleton(lines: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Each event's kind (role, content, finish, usage, done) and the parsed chunks."""
    kinds: list[str] = []
    chunks: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        assert line.startswith("data: "), line
        if line == "data: [DONE]":
            kinds.append("done")
            continue
        chunk = json.loads(line[6:])
        chunks.append(chunk)
        choices = chunk["choices"]
        if not choices:
            assert set(chunk["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
            kinds.append("usage")
        elif choices[0].get("finish_reason"):
            kinds.append("finish")
        elif "role" in choices[0]["delta"]:
            kinds.append("role")
        else:
            kinds.append("content")
    return kinds, chunks


def collapse(kinds: list[str]) -> list[str]:
    out: list[str] = []
    for kind in kinds:
        if not out or out[-1] != kind or kind != "content":
            out.append(kind)
    return out


def test_metric_families_match_the_real_server(
    emulator: tuple[EmulatorHandle, io.StringIO],
) -> None:
    handle, _ = emulator
    stream_lines(handle)  # one request, so every counter has samples
    emulated = families(httpx.get(handle.base_url + "/metrics", timeout=30).text)
    real = families((FIXTURES / "metrics.txt").read_text())
    assert set(real) >= SPEC_FAMILIES
    assert set(emulated) >= SPEC_FAMILIES
    for name, (kind, labels) in sorted(emulated.items()):
        assert name in real, f"{name}: the real server has no such family"
        assert real[name] == (kind, labels), name


def test_stream_skeleton_matches_the_real_server(
    emulator: tuple[EmulatorHandle, io.StringIO],
) -> None:
    handle, _ = emulator
    real_kinds, real_chunks = skeleton((FIXTURES / "stream.sse").read_text().splitlines())
    emu_kinds, emu_chunks = skeleton(stream_lines(handle))
    assert collapse(real_kinds) == ["role", "content", "finish", "usage", "done"]
    assert collapse(emu_kinds) == collapse(real_kinds)
    for chunks in (real_chunks, emu_chunks):
        assert len({c["id"] for c in chunks}) == 1
        assert chunks[0]["id"].startswith("chatcmpl-")
        assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    real_choice = set(real_chunks[1]["choices"][0])
    emu_choice = set(emu_chunks[1]["choices"][0])
    assert emu_choice == real_choice
    assert real_chunks[-1]["usage"]["completion_tokens"] == 24


def test_log_lines_specbench_matches_are_in_both_logs(
    emulator: tuple[EmulatorHandle, io.StringIO],
) -> None:
    _, log = emulator
    engine = get_engine("vllm")
    real = (FIXTURES / "startup.log").read_text()
    assert engine.version_from_log(real) == "0.32.0"
    assert engine.version_from_log(log.getvalue()) is not None
    for pattern in engine.load_patterns:
        if pattern.severity == "invalid":
            assert not any(pattern.search(line) for line in real.splitlines()), pattern.code
    assert "Loading weights took" in real and "Loading weights took" in log.getvalue()


def test_every_pattern_matching_an_emulator_line_matches_a_real_line(
    emulator: tuple[EmulatorHandle, io.StringIO],
) -> None:
    """The emulator prints nothing specbench reads that the real server would not. The CUDA
    graph and acceptance-window patterns are left out here: the CPU build captures no graphs
    and the startup recording ends before the first stats interval; they are checked against
    the pinned source's own format strings instead (test_log_renders.py)."""
    _, log = emulator
    engine = get_engine("vllm")
    real = (FIXTURES / "startup.log").read_text().splitlines()
    emulated = log.getvalue().splitlines()
    patterns = [
        ("version", engine.version_regex),
        ("ready", engine.ready_regex),
        *((p.code, p.regex) for p in engine.load_patterns),
    ]
    seen = []
    for code, regex in patterns:
        if any(re.search(regex, line) for line in emulated):
            seen.append(code)
            assert any(re.search(regex, line) for line in real), code
    assert "version" in seen  # (the emulator does not print uvicorn's ready line)


def test_versions_are_the_pins_of_what_each_side_stands_for(
    emulator: tuple[EmulatorHandle, io.StringIO],
) -> None:
    """The recording is the CPU image's vLLM (the tiny experiment's pin), the emulator the GPU
    image's (the seed experiment's pin): each log names its own pin, and they differ."""
    _, log = emulator
    engine = get_engine("vllm")
    seed = load_experiment(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").images["vllm"]
    tiny = load_experiment(EXPERIMENTS_DIR / "tiny-vllm-cpu.yaml").images["vllm"]
    assert engine.version_from_log((FIXTURES / "startup.log").read_text()) == tiny.version
    assert engine.version_from_log(log.getvalue()) == seed.version
    assert json.loads((FIXTURES / "version.json").read_text()) == {"version": tiny.version}


def test_the_recording_says_what_it_recorded() -> None:
    """recording.json is the run behind the fixtures: the CPU image of the tiny experiment, and
    every configuration's payload read its version from the server and its backend from the
    hardware (a recording that says cuda, or no version, came from an older, wrong reader)."""
    rec = json.loads((FIXTURES / "recording.json").read_text())
    tiny = load_experiment(EXPERIMENTS_DIR / "tiny-vllm-cpu.yaml").images["vllm"]
    assert rec["image"] == tiny.image
    measured = {name: c for name, c in rec["configs"].items() if "tokSOut" in c}
    assert {"baseline", "partial_draft"} <= set(measured)
    for name, config in measured.items():
        assert (config["engineVersion"], config["backend"]) == (tiny.version, "cpu"), name
        assert config["valid"], (name, config["validity_reasons"])
