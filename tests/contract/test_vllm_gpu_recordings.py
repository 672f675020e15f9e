"""specbench's vLLM patterns held against recordings of a real GPU server.

The recordings (tests/fixtures/vllm-gpu) come from one H200 run of vLLM 0.26.0, not the pinned
0.33.0 (0.26.0 is the last vLLM pinned to the device machine's torch 2.11.0), serving the
generated tiny models (REAL ENGINE, TOY MODEL): scripts/gpu_tiny.sh ran
bench/experiments/tiny-vllm-gpu.yaml through `specbench matrix --launcher process
--local-engine` and tests/gpu/record_vllm_gpu.py; scripts/gpu_tiny_fixtures.py trimmed them.
Checked here, in seconds, without a GPU:
- CUDA graphs: the capture line of both model runners (V2 for the baseline, V1 for every
  speculative method, which V2 does not support in 0.26.0), the eager lines, graph use from the
  --cudagraph-metrics table, and the graph rule's verdicts on the real logs;
- the version from the ASCII-logo line, the only place the GPU log names it;
- the metric families specbench scrapes, and every family the emulator serves;
- several tokens per SSE event under speculation, counted right by specbench's client;
- logprobs returned with speculation (one entry per token, top 2 each);
- the emulator's GPU log lines against the real ones (process, file, message template);
- the backend-aware oracle: the target as its own draft accepts >= 0.98 on the GPU.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from oracles import SELF_DRAFT_MIN_ACCEPTANCE
from prometheus_client.parser import text_string_to_metric_families

from bench.emulator import formats, serve_in_thread
from bench.emulator.server import _vllm_worker
from bench.engines import get_engine
from bench.measure import graph_check
from bench.measure._client import RawResponse, interpret_chat_stream
from bench.schema import Payload

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-gpu"
VLLM = get_engine("vllm")
GRAPHS = VLLM.graph_patterns
assert GRAPHS is not None
# vLLM's record prefix (vllm/logger.py): "(PROCESS pid=N) LEVEL MM-DD HH:MM:SS [file.py:N] msg"
RECORD = re.compile(
    r"^\((?P<proc>\w+) pid=\d+\) (?P<level>[A-Z]+) \d\d-\d\d \d\d:\d\d:\d\d "
    r"\[(?P<file>[\w.]+?):\d+\] (?P<msg>.*)$"
)
# vllm/config/vllm.py:584-587 (0.26.0): why a speculative server runs the V1 model runner
V1_FALLBACK = "using the V1 model runner instead"
SPEC_FAMILIES = {
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
}


def log(name: str) -> str:
    return (FIXTURES / "logs" / f"{name}.log").read_text(encoding="utf-8")


def records(text: str, needle: str) -> list[re.Match[str]]:
    found = [RECORD.match(line) for line in text.splitlines() if needle in line]
    return [m for m in found if m is not None]


def template(msg: str) -> str:
    """A message with its numbers blanked: what the emulator must share with the engine."""
    return re.sub(r"\d+(\.\d+)?", "#", msg.strip())


def payload(name: str) -> Payload:
    return Payload.model_validate_json((FIXTURES / "payloads" / f"{name}.json").read_text())


# -- CUDA graphs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "runner_file", "v1"),
    [("baseline", "model_runner.py", False), ("self-draft", "gpu_model_runner.py", True)],
)
def test_capture_line_of_each_model_runner(name: str, runner_file: str, v1: bool) -> None:
    text = log(name)
    assert (V1_FALLBACK in text) is v1
    captured = [
        m for m in records(text, "Graph capturing finished") if GRAPHS.captured.search(m[0])
    ]
    assert [m["file"] for m in captured] == [runner_file]
    assert captured[0]["proc"] == "EngineCore"  # TP 1: the engine core, no _DP0, no Worker_TP
    check = graph_check(text, "", GRAPHS, speculative=v1, required=True, args=[])
    assert check.evidence.captured and not check.reasons


def test_eager_lines_make_the_required_graph_rule_fail() -> None:
    text = log("eager")
    assert not any(GRAPHS.captured.search(line) for line in text.splitlines())
    disabled = [line for line in text.splitlines() if any(d.search(line) for d in GRAPHS.disabled)]
    assert {RECORD.match(line)["proc"] for line in disabled} == {"APIServer", "EngineCore"}  # type: ignore[index]
    check = graph_check(
        text, "", GRAPHS, speculative=False, required=True, args=["--enforce-eager"]
    )
    assert [r.code for r in check.reasons] == ["cuda_graphs_not_captured"]
    assert check.reasons[0].severity == "invalid"
    assert payload("eager-c1").evidence.validity.valid is False


def test_graph_use_from_the_cudagraph_metrics_table() -> None:
    text = log("spec-server")
    rows = [GRAPHS.use.search(line) for line in text.splitlines()]
    steps = {m.group(1): 0 for m in rows if m}
    for m in rows:
        if m:
            steps[m.group(1)] += int(m.group(2))
    assert steps and set(steps) <= {"NONE", "PIECEWISE", "FULL"}
    assert sum(steps[v] for v in GRAPHS.used_values if v in steps) > 0
    check = graph_check(
        text, text, GRAPHS, speculative=True, required=True, args=["--cudagraph-metrics"]
    )
    assert check.evidence.used == check.evidence.use_lines > 0 and not check.reasons


# -- version, metrics, stream -------------------------------------------------------------------


def test_version_from_the_logo_line() -> None:
    served = json.loads((FIXTURES / "version.json").read_text())["version"]
    for name in ("baseline", "self-draft", "eager", "spec-server"):
        text = log(name)
        assert "vLLM server version" not in text  # the plain form is absent on this server
        assert VLLM.version_from_log(text) == served
    assert payload("baseline-c1").engineVersion == served


def families(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("vllm:"):
            out[family.name] = (family.type, frozenset(n for s in family.samples for n in s.labels))
    return out


def test_metric_families_specbench_reads() -> None:
    real = families((FIXTURES / "metrics.txt").read_text())
    assert set(real) >= SPEC_FAMILIES
    assert "position" in real["vllm:spec_decode_num_accepted_tokens_per_pos"][1]
    for name in SPEC_FAMILIES:
        assert real[name][0] == "counter", name


def test_emulator_metric_families_exist_on_the_gpu_server() -> None:
    handle = serve_in_thread("vllm", "vllm-dflash", time_scale=0.05, echo=io.StringIO())
    try:
        assert handle.wait_ready(60)
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        httpx.post(handle.base_url + "/v1/chat/completions", json=body, timeout=30)
        emulated = families(httpx.get(handle.base_url + "/metrics", timeout=30).text)
    finally:
        handle.stop()
    real = families((FIXTURES / "metrics.txt").read_text())
    for name, (kind, labels) in sorted(emulated.items()):
        assert name in real, f"{name}: the GPU server has no such family"
        assert real[name] == (kind, labels), name


def sse_events(name: str) -> list[tuple[float, bytes]]:
    lines = (FIXTURES / name).read_text().splitlines()
    return [
        (0.001 * i, line[6:].encode()) for i, line in enumerate(lines) if line.startswith("data: ")
    ]


def test_several_tokens_per_sse_event_are_counted_from_usage() -> None:
    events = sse_events("stream.sse")
    chunks = [json.loads(d) for _, d in events if d != b"[DONE]"]
    usage = chunks[-1]["usage"]
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(content) < usage["completion_tokens"]  # speculation: several tokens per event
    raw = RawResponse(sent_at=0.0, status=200, events=events, complete=True, ended_at=1.0)
    rec = interpret_chat_stream(raw, "r", 0, usage["completion_tokens"])
    assert rec.error is None and not rec.reasons
    assert rec.completion_tokens == usage["completion_tokens"]
    assert sum(1 for n in rec.chunk_chars if n) == len(content)  # events, never tokens
    text = "".join(c["choices"][0]["delta"]["content"] for c in content)
    assert sum(rec.chunk_chars) == len(text)


def test_logprobs_come_back_with_speculation() -> None:
    chunks = [json.loads(d) for _, d in sse_events("stream-logprobs.sse") if d != b"[DONE]"]
    entries: list[dict[str, Any]] = []
    multi = 0
    for c in chunks:
        if c["choices"] and c["choices"][0].get("logprobs"):
            got = c["choices"][0]["logprobs"]["content"]
            multi += len(got) > 1
            entries += got
    assert len(entries) == chunks[-1]["usage"]["completion_tokens"]
    assert multi > 0  # one event carries several tokens, each with its own logprobs
    assert all(len(e["top_logprobs"]) == 2 for e in entries)
    # greedy: the sampled token is the top-1 (ties aside), so the gap to the runner-up is >= 0
    assert all(e["logprob"] >= e["top_logprobs"][1]["logprob"] for e in entries)


# -- the emulator's GPU log lines against the real ones ----------------------------------------


def emulated(process: str, source: str, message: str) -> re.Match[str]:
    m = RECORD.match(formats.vllm_log(process, 1, "INFO", source, message).splitlines()[0])
    assert m is not None
    return m


def test_emulator_graph_capture_line_matches_the_real_one() -> None:
    src, tmpl = formats.VLLM_GRAPH_CAPTURED_LINE
    emu = emulated(_vllm_worker(0, 1), src, tmpl % (1, 0.04))
    real = records(log("baseline"), "Graph capturing finished")[0]
    assert (emu["proc"], emu["level"], emu["file"]) == (real["proc"], real["level"], real["file"])
    assert template(emu["msg"]) == template(real["msg"])
    assert GRAPHS.captured.search(emu[0]) and GRAPHS.captured.search(real[0])


def test_emulator_eager_line_matches_the_real_one() -> None:
    emu = emulated("APIServer", *formats.VLLM_EAGER_LINE)
    real = [m for m in records(log("eager"), "Cudagraph is disabled") if m["proc"] == "APIServer"]
    assert (emu["file"], emu["msg"]) == (real[0]["file"], real[0]["msg"])


def test_emulator_spec_and_cudagraph_lines_match_the_real_ones() -> None:
    text = log("spec-server")
    src, tmpl = formats.VLLM_SPEC_LINE
    emu = emulated("APIServer", src, tmpl % (2.25, 6.5, 15.7, 70, 168, "0.500, 0.429, 0.321", 41.7))
    real = records(text, "SpecDecoding metrics")[0]
    assert (emu["proc"], emu["file"]) == (real["proc"], real["file"])
    assert template(emu["msg"]) == template(real["msg"])
    assert VLLM.accept_length_pattern is not None
    assert VLLM.accept_length_pattern.search(emu[0]) and VLLM.accept_length_pattern.search(real[0])
    table = formats.vllm_cudagraph_table("FULL_AND_PIECEWISE", [1, 2, 4], [(4, 4, "FULL", 56)])
    emu_lines = formats.vllm_log("APIServer", 1, "INFO", formats.VLLM_CUDAGRAPH_SETTINGS[0], table)
    real_lines = [m for m in records(text, "") if m["file"] == "cuda_graph.py"]
    emu_records = [RECORD.match(line) for line in emu_lines.splitlines()]
    assert {m["file"] for m in emu_records if m} == {"cuda_graph.py"}
    head = next(m["msg"].split("|") for m in real_lines if "Runtime Mode" in m["msg"])
    emu_head = next(m["msg"].split("|") for m in emu_records if m and "Runtime Mode" in m["msg"])
    assert [c.strip() for c in emu_head] == [c.strip() for c in head]
    assert any(GRAPHS.use.search(m[0]) for m in emu_records if m)


# -- the backend-aware oracle -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["self-draft-c1", "self-draft-c4"])
def test_target_as_own_draft_on_the_gpu(name: str) -> None:
    """The floor holds for the configuration's measured windows pooled (the payload's figure),
    not for each window: a window drafts 48 tokens at c=1, and one token lost to a bf16 near-tie
    is already 47/48 = 0.979."""
    p = payload(name)
    assert p.backend == "cuda"
    floor = SELF_DRAFT_MIN_ACCEPTANCE[p.backend]
    windows = [it.acceptance for it in p.evidence.iterations if not it.warmup]
    assert windows and all(a is not None and a.draft_tokens == 3 * a.drafts > 0 for a in windows)
    total = p.evidence.acceptance
    assert total is not None
    assert total.accepted_tokens == sum(a.accepted_tokens for a in windows if a is not None)
    assert floor <= total.acceptance_rate <= 1.0
    per_pos = total.accepted_per_position
    assert per_pos == sorted(per_pos, reverse=True) and per_pos[0] <= total.drafts


def test_partial_draft_on_the_gpu() -> None:
    acc = payload("partial-draft-c1").evidence.acceptance
    assert acc is not None and 0.0 < acc.acceptance_rate < 1.0
    per_pos = acc.accepted_per_position
    assert per_pos == sorted(per_pos, reverse=True)


# -- DFlash (tiny-vllm-gpu-dflash: the chain target and its copy draft) --------------------------


def test_dflash_runs_on_the_v2_model_runner_with_its_own_graphs() -> None:
    """Unlike draft_model and ngram, DFlash kept 0.26.0's V2 model runner: the speculator
    captures its own FULL graphs (vllm/v1/worker/gpu/spec_decode/dflash/speculator.py:127 in
    0.26.0) before the
    runner's capture line."""
    text = log("dflash")
    assert V1_FALLBACK not in text
    assert "Capturing model for DFlash speculator" in text
    captured = [
        m for m in records(text, "Graph capturing finished") if GRAPHS.captured.search(m[0])
    ]
    assert [m["file"] for m in captured] == ["model_runner.py"]
    assert VLLM.version_from_log(text) == "0.26.0"


def test_dflash_copy_draft_accepts_exactly_its_first_token() -> None:
    """bench/tinymodel/_dflash.py: against the chain target, draft token 1 is always right and
    tokens 2..k always wrong, on any backend (the chain's margin dwarfs bf16 rounding)."""
    p = payload("dflash-c1")
    assert p.backend == "cuda" and p.evidence.validity.valid
    for it in p.evidence.iterations:
        if it.warmup:
            continue
        acc = it.acceptance
        assert acc is not None and acc.drafts > 0
        assert acc.accepted_per_position == [acc.drafts, 0, 0]
        assert acc.mean_acceptance_length == 2.0


# -- MTP (tiny-vllm-gpu-mtp: the Qwen3-Next chain target with one MTP layer) ---------------------


def test_mtp_seed_shape_is_normalised_then_the_dense_tiny_target_is_refused() -> None:
    """The seed's '{"method":"qwen3_next_mtp"}' reached vLLM 0.26.0 and was renamed to mtp (the
    line specbench's mtp_method_renamed pattern reads, here from a real server); the engine
    then refused the tiny target: Qwen3NextForCausalLM.set_moe_parameters
    (vllm/model_executor/models/qwen3_next.py:745-756 in 0.26.0) needs at least one sparse-MoE
    layer, and the tiny target's MLPs are dense (num_experts 0). A Qwen3-Next target for this
    engine needs one MoE layer."""
    text = log("mtp-refused")
    renamed = next(p for p in VLLM.load_patterns if p.code == "mtp_method_renamed")
    hits = [m for line in text.splitlines() if (m := renamed.search(line))]
    assert [m.group(1) for m in hits] == ["qwen3_next_mtp"]
    assert "Resolved architecture: Qwen3NextMTP" in text
    assert "RuntimeError: No Qwen3Next layer found in the model.layers." in text
    assert VLLM.version_from_log(text) == "0.26.0"
