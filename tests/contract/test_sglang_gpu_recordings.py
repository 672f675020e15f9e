"""specbench's SGLang patterns held against recordings of a real GPU server.

The recordings (tests/fixtures/sglang-gpu) come from one H200 run of SGLang 0.5.17, not the
pinned 0.5.19 (0.5.17 is the last SGLang on the device machine's torch 2.11.0), serving the
generated tiny models (REAL ENGINE, TOY MODEL): scripts/gpu_sglang.sh ran the tiny-sglang-gpu*
experiments through `specbench matrix --launcher process --local-engine` and
tests/gpu/record_sglang_gpu.py; scripts/gpu_sglang_fixtures.py trimmed them. Checked here, in
seconds, without a GPU (the numbers are the issue's items):
- (1, 2) CUDA graphs: the target's capture line per phase, the decode-batch graph state, prefill
  graphs off by the seed's flag, the eager run's deprecation line and its resolved 'disabled';
- (4) a decode line every 40 steps: the windows of these runs held several;
- (5) the hybrid (Qwen3-Next) decode line still read by the same patterns;
- (6) the three acceptance figures and why they differ;
- (7) several tokens per SSE event, counted right; (8) DFLASH refuses logprobs with HTTP 400;
- (9) the version only in /server_info; (10) SIGTERM reads as a crash in SGLang's own log and
  matches none of our rules; (11) the attention backend and graph mode the server resolved;
- the seed's bug on a real server: stock SGLang loads the Qwen3.5 MTP draft with GPTQ and skips
  its 7 BF16 projections; the patched tree loads it BF16 and says so; served (later H100
  calls, `gptqs-*`), the stock draft accepts nothing and the patched one accepts the chain;
- the emulator's SGLang decode line against the real one.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpu_recordings import PATCH_LINE, SKIP, SKIPPED, recomputed
from prometheus_client.parser import text_string_to_metric_families

from bench.emulator import formats, serve_in_thread
from bench.engines import get_engine, resolved_settings
from bench.measure import (
    RawResponse,
    accept_lengths,
    graph_check,
    interpret_chat_stream,
    why_not_ready,
)
from bench.measure._acceptance import (
    SGLANG_DRAFT_TOKENS_GAUGE,
    SGLANG_GAUGES,
    SGLANG_GEN,
    SGLANG_REQS,
    SGLANG_VERIFY,
)
from bench.measure._validity import scan_log
from bench.schema import Payload

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-gpu"
SGLANG = get_engine("sglang")
GRAPHS = SGLANG.graph_patterns
assert GRAPHS is not None
ACCEPT = SGLANG.accept_length_pattern
assert ACCEPT is not None
DRAFT_LOAD = re.compile(r"Load weight end\. .*type=Qwen3_5ForCausalLMMTP(?P<rest>.*)$", re.M)


def log(name: str) -> str:
    return (FIXTURES / "logs" / f"{name}.log").read_text(encoding="utf-8")


def rec(name: str) -> str:
    return (FIXTURES / "rec" / name).read_text(encoding="utf-8")


def payload(name: str) -> Payload:
    return Payload.model_validate_json((FIXTURES / "payloads" / f"{name}.json").read_text())


def status(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "status" / f"{name}.json").read_text())
    return data


def decode_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "Decode batch" in line]


# -- CUDA graphs (items 1, 2, 4, 11) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "phase", "speculative"),
    [
        ("dflash-baseline", "target decode", False),
        ("dflash-dflash", "target verify", True),
        ("tiny-standalone", "target verify", True),
        ("mtp-mtp", "target verify", True),
    ],
)
def test_capture_and_use_lines_of_a_graph_server(name: str, phase: str, speculative: bool) -> None:
    text = log(name)
    captured = [m.group(1) for m in map(GRAPHS.captured.search, text.splitlines()) if m]
    assert captured == [phase]  # the target's own capture; the draft's is "draft ..."
    states = [m.group(1) for m in map(GRAPHS.use.search, decode_lines(text)) if m]
    assert len(states) >= 4 and set(states) == {"True"}  # item 4: several 40-step windows
    check = graph_check(text, text, GRAPHS, speculative=speculative, required=True, args=[])
    assert not check.reasons and check.evidence.used == len(states)
    # item 1: the seed's --cuda-graph-backend-prefill disabled; prefill lines carry the state too
    assert "Disable prefill CUDA graph because cuda_graph_config resolved" in text
    prefill = [ln for ln in text.splitlines() if "Prefill batch" in ln]
    assert prefill and all("cuda graph: False" in ln for ln in prefill)
    assert resolved_settings(text, SGLANG.resolved_patterns) == {
        "attention_backend": "triton",
        "decode_graphs": "full",
        "prefill_graphs": "disabled",
    }


def test_the_recorder_server_ran_prefill_graphs_by_default() -> None:
    text = rec("server.log")  # no --cuda-graph-backend-prefill: 0.5.17's default is on
    assert "Capture target prefill CUDA graph end." in text
    prefill = [ln for ln in text.splitlines() if "Prefill batch" in ln]
    assert {"cuda graph: True", "cuda graph: False"} <= {
        m.group(0) for ln in prefill for m in [re.search(r"cuda graph: (True|False)", ln)] if m
    }
    assert resolved_settings(text, SGLANG.resolved_patterns)["prefill_graphs"] == "breakable"


def test_eager_is_stated_only_by_the_deprecation_line_and_the_resolved_config() -> None:
    text = log("tiny-eager")  # item 2 (the run was cut before its first request)
    assert not any(GRAPHS.captured.search(ln) for ln in text.splitlines())
    assert not any(d.search(ln) for d in GRAPHS.disabled for ln in text.splitlines())
    deprecated = [f for f in scan_log(text, SGLANG.load_patterns, False)]
    assert [f.code for f in deprecated] == ["deprecated_flag"]
    assert "'--disable-cuda-graph' is deprecated" in deprecated[0].line
    assert resolved_settings(text, SGLANG.resolved_patterns)["decode_graphs"] == "disabled"
    check = graph_check(text, "", GRAPHS, speculative=False, required=True, args=[])
    assert [r.code for r in check.reasons] == ["cuda_graphs_not_captured"]


def test_is_cuda_graph_reads_zero_at_idle_and_the_pass_counter_grows() -> None:
    idle, after = metric_samples(rec("metrics-idle.txt")), metric_samples(rec("metrics.txt"))
    assert idle["sglang:is_cuda_graph"] == [0.0]  # item 3: a gauge of the last batch, not a mode
    passes = {
        s.labels["mode"]: s.value
        for fam in text_string_to_metric_families(rec("metrics.txt"))
        for s in fam.samples
        if s.name == "sglang:cuda_graph_passes_total"
    }
    idle_passes = {
        s.labels["mode"]: s.value
        for fam in text_string_to_metric_families(rec("metrics-idle.txt"))
        for s in fam.samples
        if s.name == "sglang:cuda_graph_passes_total"
    }
    assert passes["decode_cuda_graph"] > idle_passes["decode_cuda_graph"]
    assert after["sglang:is_cuda_graph"] in ([0.0], [1.0])


# -- acceptance (items 5, 6) ----------------------------------------------------------------


def test_hybrid_decode_lines_are_read_by_the_same_patterns() -> None:
    lines = decode_lines(log("mtp-mtp"))
    assert lines and all("#full token:" in ln and "mamba num:" in ln for ln in lines)  # item 5
    assert accept_lengths("\n".join(lines), ACCEPT) == [3.0] * len(lines)  # k=2, all accepted
    assert all(GRAPHS.use.search(ln) for ln in lines)


def test_dflash_accepts_as_constructed_in_the_log_and_counters() -> None:
    # The copy draft: token 1 always right, tokens 2..3 always wrong, so 2 tokens per step.
    lens = accept_lengths(log("dflash-dflash"), ACCEPT)
    assert lens and all(v == 2.0 for v in lens[1:])  # the first window holds the warm-up
    p = payload("dflash-dflash-c1")
    acc = p.evidence.acceptance
    assert acc is not None
    # item 6: 3 requests of 128 tokens: 1 from prefill, 127 from verify steps of 2, the last cut
    # by max_tokens, so 64 steps each: 192 drafts, 381 tokens after prefill, 189 accepted
    assert (acc.drafts, acc.draft_tokens, acc.accepted_tokens) == (192, 576, 189)
    assert acc.mean_acceptance_length == pytest.approx(1 + 189 / 192)  # 1.984, not the log's 2.00
    gauges = p.evidence.acceptance_raw["sglang_gauges_after_each_iteration"]
    assert all(g["sglang:spec_accept_length"] == 2.0 for g in gauges)  # the last interval only
    info = json.loads(rec("server_info.json"))  # cumulative since start, warm-up included
    assert info["internal_states"][0]["avg_spec_accept_length"] == pytest.approx(2.0, abs=0.01)


def metric_samples(text: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s.value)
    return out


def test_the_families_specbench_scrapes_exist() -> None:
    have = metric_samples(rec("metrics.txt"))
    for name in (SGLANG_VERIFY, SGLANG_GEN, SGLANG_REQS, SGLANG_DRAFT_TOKENS_GAUGE, *SGLANG_GAUGES):
        assert name in have, name
    assert have[SGLANG_DRAFT_TOKENS_GAUGE] == [4.0]  # block of 4 = 3 drafts + the anchor


# -- stream, logprobs, version, shutdown (items 7-10) ----------------------------------------


def test_several_tokens_per_sse_event_are_counted_from_usage() -> None:
    lines = rec("stream.sse").splitlines()
    events = [(0.001 * i, ln[6:].encode()) for i, ln in enumerate(lines) if ln.startswith("data: ")]
    chunks = [json.loads(d) for _, d in events if d != b"[DONE]"]
    usage = chunks[-1]["usage"]
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(content) < usage["completion_tokens"]  # item 7
    raw = RawResponse(sent_at=0.0, status=200, events=events, complete=True, ended_at=1.0)
    got = interpret_chat_stream(raw, "r", 0, usage["completion_tokens"])
    assert got.error is None and not got.reasons
    assert got.completion_tokens == usage["completion_tokens"] == 64


def test_dflash_refuses_logprobs_and_the_probes_say_so() -> None:
    reply = json.loads(rec("logprobs-reply.json"))
    assert reply["status"] == 400  # item 8
    assert "DFLASH speculative decoding does not support return_logprob" in reply["body"]
    probes = payload("dflash-dflash-c1").evidence.logprob_probes
    assert probes is not None and probes.requests
    assert all(r.error and r.error.startswith("HTTP 400:") for r in probes.requests)
    assert payload("dflash-dflash-c1").evidence.validity.valid  # a refusal is not a divergence


def test_version_only_from_server_info() -> None:
    assert json.loads(rec("version-reply.json"))["status"] == 404  # item 9
    assert json.loads(rec("server_info.json"))["version"] == "0.5.17"
    assert SGLANG.version_path == "/server_info" and SGLANG.version_key == "version"
    assert re.search(SGLANG.version_regex, log("dflash-dflash")) is None  # not in the log
    assert payload("dflash-dflash-c1").engineVersion == "0.5.17"


def test_sigterm_reads_as_a_crash_upstream_and_as_nothing_here() -> None:
    text = rec("server.log")
    tail = text[text.index("SIGTERM received") :]
    assert "crashed with exit code -15" in tail  # item 10: SGLang's own wording at shutdown
    assert json.loads(rec("recording.json"))["exit_code_after_sigterm"] == -9  # its tree kill
    assert not [f for f in scan_log(tail, SGLANG.load_patterns, True) if f.severity == "invalid"]


def test_ready_and_tensor_parallel_lines() -> None:
    text = log("dflash-dflash")
    assert re.search(SGLANG.ready_regex, text)
    m = re.search(SGLANG.tensor_parallel_regex, text)
    assert m is not None and m.group(1) == "1"


# -- the seed's bug on a real server ---------------------------------------------------------


def test_stock_sglang_loads_the_mtp_draft_gptq_and_skips_its_projections() -> None:
    text = log("gptq-mtp-stock")
    draft = DRAFT_LOAD.search(text)
    assert draft is not None and "quant=gptq, bits=4" in draft["rest"]
    findings = [f for f in scan_log(text, SGLANG.load_patterns, True) if f.severity == "invalid"]
    assert {f.code for f in findings} == {"draft_tensors_skipped"}
    names = {m.group(1) for f in findings for m in [re.search(r"Parameter (\S+) not", f.line)] if m}
    assert names == SKIPPED  # the seed's seven
    assert PATCH_LINE not in text


def test_patched_sglang_loads_the_mtp_draft_bf16() -> None:
    text = log("gptq-mtp")
    assert PATCH_LINE in text
    draft = DRAFT_LOAD.search(text)
    assert draft is not None and "quant=" not in draft["rest"]
    assert not [f for f in scan_log(text, SGLANG.load_patterns, True) if f.severity == "invalid"]


def test_the_gptq_target_stalls_at_its_first_graph_capture_on_both_trees() -> None:
    """The first GPU session (0.5.17, bf16, graphs on): every server of the dense Qwen3.5 GPTQ
    target stopped logging after 'Capture target ... CUDA graph begin' (bs=4 first), with and
    without speculation, stock and patched. The second session found why: its first forward
    JIT-compiles the GPTQ Marlin GEMM with nvcc (6 min on a 16-core host), inside the first
    capture. With the built modules carried, the same experiment served with graphs on
    (docs/gpu-sglang-example/README.md, third session)."""
    for name in ("gptq-baseline", "gptq-mtp", "gptq-mtp-stock"):
        text = log(name)
        assert re.search(r"Capture target (decode|verify) CUDA graph begin", text), name
        assert not any(GRAPHS.captured.search(ln) for ln in text.splitlines()), name
        assert "The server is fired up" not in text, name
    # the last call's matrix (--only baseline --only mtp, 150 s to ready): the baseline timed
    # out, the call's budget cut mtp; mtp-stock had timed out at 420 s in the call before
    configs = status("gptq")["configurations"]
    assert {k: v["status"] for k, v in configs.items()} == {
        "baseline": "failed",
        "mtp": "interrupted",
    }
    assert "not ready after 150 s" in configs["baseline"]["reasons"][0]


# -- the emulator against the real lines -----------------------------------------------------


def shape(line: str) -> str:
    """A decode line with its numbers and booleans blanked."""
    msg = line.split("] ", 1)[1]
    return re.sub(r"\b(True|False)\b", "B", re.sub(r"\d+(\.\d+)?", "#", msg))


def test_the_emulator_decode_line_has_the_real_hybrid_shape() -> None:
    real = {shape(ln) for ln in decode_lines(log("mtp-mtp"))}
    emulated = formats.SGLANG_DECODE_LINE.format(
        running=1, full_tokens=233, full_usage=0.0, mamba_num=4, mamba_usage=0.0,
        spec=formats.SGLANG_SPEC_PART.format(accept_len=3.0, accept_rate=1.0),
        graph=True, gen_tput=22.0, queue=0,
    )  # fmt: skip
    assert real == {shape("] " + emulated)}


def not_ready(name: str, speculative: bool = True) -> list[str]:
    return why_not_ready(
        log(name), SGLANG.load_patterns, GRAPHS, speculative=speculative,
        warmup=SGLANG.warmup_patterns,
    )  # fmt: skip


def test_a_server_that_never_got_ready_is_explained_by_its_log() -> None:
    stock = not_ready("gptq-mtp-stock")
    assert [w.split(":", 1)[0] for w in stock] == [
        "draft_tensors_skipped",
        "cuda_graph_capture_hung",
    ]
    assert "7 distinct" in stock[0] and all(n in stock[0] for n in SKIPPED)
    assert "Capture target verify CUDA graph begin" in stock[1]
    patched = not_ready("gptq-mtp")
    assert [w.split(":", 1)[0] for w in patched] == ["cuda_graph_capture_hung"]
    base = not_ready("gptq-baseline", speculative=False)
    assert [w.split(":", 1)[0] for w in base] == ["cuda_graph_capture_hung"]
    # a server that got ready: nothing to explain
    assert not_ready("dflash-dflash") == []
    assert not_ready("tiny-eager", speculative=False) == []


def test_an_eager_server_stuck_in_its_warm_up_request_is_named() -> None:
    # 2026-12-06, H100, SGLang 0.5.17, the GPTQ target eager: the HTTP side came up, SGLang's own
    # warm-up /generate never answered (its first forward JIT-compiling the Marlin GEMM with nvcc,
    # tests/gpu/stall_probe.py's stacks), /health 503 until the 240 s ready timeout
    stock = not_ready("gptqe-mtp-stock-eager")
    assert [w.split(":", 1)[0] for w in stock] == [
        "draft_tensors_skipped",
        "warmup_never_answered",
    ]
    assert "Uvicorn running on http://127.0.0.1:" in stock[1]
    patched = not_ready("gptqe-mtp-eager")
    assert [w.split(":", 1)[0] for w in patched] == ["warmup_never_answered"]
    # the stock draft still inherited the target's GPTQ on the eager server (the seed's bug)
    assert "type=Qwen3_5ForCausalLMMTP, quant=gptq, bits=4" in log("gptqe-mtp-stock-eager")
    assert "specbench patch:" in log("gptqe-mtp-eager")


def test_the_seeds_story_served_stock_accepts_nothing_patched_accepts_the_chain() -> None:
    """The seed's bug end to end on a real server (third H100 call series, 2026-12-06, eager,
    the GPTQ JIT modules carried so no server compiled): the MTP head predicts right only
    with its MLP loaded (bench/tinymodel/_qwen35.py), so the stock draft, its 7 projections
    skipped, accepted 0 of 762 draft tokens, as the seed's stayed at zero, and the run is
    rejected on both counts; the patched draft accepts the chain (252 of 258: only the
    truncated last step of each request is lost)."""
    stock_log, patched_log = log("gptqs-mtp-stock-eager"), log("gptqs-mtp-eager")
    for text in (stock_log, patched_log):
        assert "The server is fired up and ready to roll!" in text
    assert "type=Qwen3_5ForCausalLMMTP, quant=gptq, bits=4" in stock_log
    assert PATCH_LINE in patched_log and PATCH_LINE not in stock_log
    rates = {m.group(1) for m in re.finditer(r"accept rate: (\S+),", stock_log)}
    assert rates == {"0.00"}
    # the skipped tensors as the served log names them, read by the engine's own load rules
    skipped = {f.key for f in scan_log(stock_log, SGLANG.load_patterns, True) if f.code == SKIP}
    assert skipped == SKIPPED
    assert not [f for f in scan_log(patched_log, SGLANG.load_patterns, True) if f.code == SKIP]
    # acceptance recomputed from the raw /metrics snapshots around each measured window, never
    # read from the figures stored beside them
    stock = recomputed(payload("gptqs-mtp-stock-eager-c1"))
    patched = recomputed(payload("gptqs-mtp-eager-c1"))
    assert (stock.accepted_tokens, stock.draft_tokens) == (0, 762)
    assert (patched.drafts, patched.draft_tokens, patched.accepted_tokens) == (129, 258, 252)
    for name, again in (("gptqs-mtp-stock-eager-c1", stock), ("gptqs-mtp-eager-c1", patched)):
        stored = payload(name).evidence.acceptance
        assert stored is not None
        assert (stored.drafts, stored.draft_tokens, stored.accepted_tokens) == (
            again.drafts,
            again.draft_tokens,
            again.accepted_tokens,
        ), name
    verdicts = status("gptqs")["configurations"]
    assert verdicts["mtp-stock-eager"]["valid"] is False
    assert verdicts["mtp-stock-eager"]["expected_invalid"] is True
    codes = [r.split(": ", 1)[0].split(" ", 1)[1] for r in verdicts["mtp-stock-eager"]["reasons"]]
    assert codes == ["zero_acceptance", "draft_tensors_skipped"]
    assert verdicts["mtp-eager"]["valid"] is True and verdicts["baseline-eager"]["valid"] is True


def test_mtp_counters_lose_only_the_truncated_last_step() -> None:
    # NEXTN k=2 accepts every draft (log: 3.00); per request 127 tokens after prefill come in
    # ceil(127 / 3) = 43 verify steps, the last one cut by max_tokens: 3 requests -> 129 steps,
    # 258 draft tokens, 3 * (127 - 43) = 252 accepted (97.67%), never a lost draft
    acc = payload("mtp-mtp-c1").evidence.acceptance
    assert acc is not None
    assert (acc.drafts, acc.draft_tokens, acc.accepted_tokens) == (129, 258, 252)
    assert set(accept_lengths(log("mtp-mtp"), ACCEPT)) == {3.0}


def families(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("sglang:"):
            out[family.name] = (family.type, frozenset(n for s in family.samples for n in s.labels))
    return out


def test_emulator_metric_families_exist_on_the_gpu_server() -> None:
    handle = serve_in_thread("sglang", "sglang-dflash", time_scale=0.05, echo=io.StringIO())
    try:
        assert handle.wait_ready(60)
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        httpx.post(handle.base_url + "/v1/chat/completions", json=body, timeout=30)
        emulated = families(httpx.get(handle.base_url + "/metrics", timeout=30).text)
    finally:
        handle.stop()
    real = families(rec("metrics.txt"))
    assert emulated
    for name, (kind, labels) in sorted(emulated.items()):
        assert name in real, f"{name}: the GPU server has no such family"
        assert real[name] == (kind, labels), name
