"""Validity rules at their edges: the exact reason a reader sees, which requests count as failed,
which log patterns apply, how the graph rule reads flags and truncates evidence, and what
``judge`` keeps (branches found by mutation testing, docs/MUTATION.md)."""

from __future__ import annotations

from test_validity import make_payload

from bench.engines import GraphPatterns, LogPattern
from bench.measure import GraphCheck, graph_check, judge, scan_log, throttle_warnings
from bench.measure._acceptance import build
from bench.measure._validity import LogFinding, measurement_reasons, rule_reasons, zero_acceptance
from bench.schema import (
    CpuKernel,
    GpuWindowStats,
    IterationRecord,
    Payload,
    RequestRecord,
    TelemetrySummary,
    TensorParallelEvidence,
    ValidityReason,
)


def test_zero_acceptance_message_names_method_drafts_and_tokens() -> None:
    r = zero_acceptance("MTP", 0, 200, 50)
    assert r is not None
    assert r.message == (
        "speculation on (MTP) but 0 accepted tokens over 50 drafts, 200 draft tokens in the "
        "measured iterations"
    )
    assert r.evidence == ["specAcceptedTokens=0 specDraftTokens=200"]
    r2 = zero_acceptance("EAGLE3", 0, 7)
    assert r2 is not None
    assert r2.message == (
        "speculation on (EAGLE3) but 0 accepted tokens over 7 draft tokens in the measured "
        "iterations"
    )
    assert zero_acceptance("NONE", 0, 0) is None
    assert zero_acceptance("MTP", None, 200) is None
    assert zero_acceptance("MTP", 1, 200) is None


def _it(index: int, reasons: list[str], *, failed: bool = False) -> IterationRecord:
    """Valid when it has no reasons and no failed request."""
    reqs = [RequestRecord(request_id="r", sent_at=0.0, error="x")] if failed else []
    return IterationRecord(
        index=index, warmup=False, window_start=0, window_end=1, reasons=reasons, requests=reqs
    )


def test_measurement_reasons_spell_out_each_iteration() -> None:
    measured = [
        _it(3, ["a", "b"]),
        _it(4, [], failed=True),
    ]
    reasons, warnings = measurement_reasons(
        measured,
        spec_method="MTP",
        acceptance=None,
        prompt_tokens=10,
        allow_prompt_mismatch=False,
    )
    assert [(r.code, r.message) for r in reasons] == [
        ("invalid_iteration", "iteration 3: a; b"),
        ("invalid_iteration", "iteration 4: invalid request"),
        ("no_valid_iteration", "no measured iteration was valid"),
    ]
    assert warnings == []
    zero = build(40, 120, 0, [], "s")
    reasons, _ = measurement_reasons(
        [_it(0, [])],
        spec_method="DFLASH",
        acceptance=zero,
        prompt_tokens=10,
        allow_prompt_mismatch=False,
    )
    assert [r.message for r in reasons] == [
        "speculation on (DFLASH) but 0 accepted tokens over 40 drafts, 120 draft tokens in the "
        "measured iterations"
    ]


def _requests(payload: Payload, *reqs: RequestRecord, warmup_first: bool = False) -> Payload:
    its = [
        IterationRecord(index=1, warmup=False, window_start=0, window_end=1, requests=list(reqs))
    ]
    if warmup_first:
        bad = RequestRecord(request_id="w", sent_at=0.0, completion_tokens=1, prompt_tokens=1)
        its.insert(
            0, IterationRecord(index=0, warmup=True, window_start=0, window_end=1, requests=[bad])
        )
    evidence = payload.evidence.model_copy(update={"iterations": its})
    return payload.model_copy(update={"evidence": evidence})


def _req(rid: str, **kw: object) -> RequestRecord:
    base: dict[str, object] = {"prompt_tokens": 1044, "completion_tokens": 512, "http_status": 200}
    base |= kw
    return RequestRecord(request_id=rid, sent_at=0.0, **base)  # type: ignore[arg-type]


def test_failed_requests_status_400_and_every_request_counted() -> None:
    p = _requests(
        make_payload(),
        _req("a", http_status=400),
        _req("b", http_status=399),
        _req("c", error="boom", http_status=None),
        _req("d", completion_tokens=3),
        _req("e", prompt_tokens=5),
        warmup_first=True,
    )
    by = {r.code: r for r in rule_reasons(p, speculative=True, findings=[], restarts=0)}
    assert by["failed_requests"].message == "2 request(s) failed"
    assert by["failed_requests"].evidence == [
        "iteration 1 request a: status=400 error=None",
        "iteration 1 request c: status=None error=boom",
    ]
    assert by["output_token_mismatch"].evidence == [
        "iteration 1 request d: completion_tokens=3 want 512"
    ]
    assert by["prompt_token_mismatch"].evidence == [
        "iteration 1 request e: prompt_tokens=5 want 1044"
    ]
    assert set(by) == {"failed_requests", "output_token_mismatch", "prompt_token_mismatch"}


def test_zero_acceptance_rule_uses_the_payloads_method_and_tokens() -> None:
    [r] = rule_reasons(make_payload(accepted=0), speculative=True, findings=[], restarts=0)
    assert r.message == (
        "speculation on (MTP) but 0 accepted tokens over 200 draft tokens in the measured "
        "iterations"
    )
    assert rule_reasons(make_payload(accepted=0), speculative=False, findings=[], restarts=0) == []


def _finding(code: str, key: str, message: str = "m", severity: str = "invalid") -> LogFinding:
    return LogFinding(code, severity, message, f"line {key}", "src.py:1", key)


def test_load_findings_first_message_and_eight_keys() -> None:
    hits = [_finding("skipped", f"t{i}", message=f"msg{i}") for i in range(9)]
    hits.append(_finding("skipped", "t0", message="again"))
    [r] = rule_reasons(make_payload(), speculative=True, findings=hits, restarts=0)
    assert r.code == "skipped"
    assert r.message == "msg0: 9 distinct (t0, t1, t2, t3, t4, t5, t6, t7), 10 log line(s)"
    assert r.evidence == [f"line t{i}" for i in range(9)] + ["line t0"]


def test_scan_log_applies_speculative_only_patterns_and_keys() -> None:
    spec = LogPattern("draft", r"draft missing", "draft gone", "a.py:1", speculative_only=True)
    keyed = LogPattern("tensor", r"skip (\w+)", "tensor skipped", "b.py:2", severity="warning")
    text = "  draft missing  \nskip lm_head\n"
    got = scan_log(text, (spec, keyed), speculative=False)
    assert got == [
        LogFinding("tensor", "warning", "tensor skipped", "skip lm_head", "b.py:2", "lm_head")
    ]
    got = scan_log(text, (spec, keyed), speculative=True)
    assert got[0] == LogFinding(
        "draft", "invalid", "draft gone", "draft missing", "a.py:1", "draft missing"
    )
    assert len(got) == 2


PATTERNS = GraphPatterns(
    captured=LogPattern("cap", r"captured (\w+)", "captured", "cap.py:1"),
    disabled=(LogPattern("off", r"graphs off", "off", "off.py:1"),),
    use=LogPattern("use", r"graph=(\w+) steps=(\d+)", "use", "use.py:1"),
    used_values=frozenset({"True"}),
    baseline_phase="decode",
    speculative_phase="verify",
    use_needs_flag="--log-graphs",
)


def test_graph_check_not_captured_message_and_evidence() -> None:
    off = "\n".join(f"graphs off {i}" for i in range(14))
    g = graph_check(off, "", PATTERNS, speculative=True, required=False, args=[])
    [r] = g.reasons
    assert (r.code, r.severity) == ("cuda_graphs_not_captured", "warning")
    assert r.message == (
        "no target-verify CUDA graph capture in the server log: no line matching "
        "'captured (\\w+)' for 'verify' (cap.py:1); the server ran eager"
    )
    assert r.evidence == [f"graphs off {i}" for i in range(12)]
    assert g.evidence.disabled == r.evidence
    g2 = graph_check("", "", PATTERNS, speculative=False, required=True, args=[])
    [r2] = g2.reasons
    assert r2.severity == "invalid" and r2.evidence == ["(no capture line)"]
    assert r2.message.startswith("no decode CUDA graph capture")


def test_graph_check_unused_names_the_steps_and_truncates_eager() -> None:
    window = "\n".join(f"graph=False steps=2 #{i}" for i in range(13))
    g = graph_check("captured decode", window, PATTERNS, speculative=False, required=True, args=[])
    [r] = g.reasons
    assert (r.code, r.severity) == ("cuda_graphs_unused", "invalid")
    assert r.message == (
        "decode CUDA graphs were captured but no step of the measured windows ran on them: "
        "26 of 26 step(s) eager by the line 'graph=(\\w+) steps=(\\d+)' (use.py:1)"
    )
    assert len(r.evidence) == 12 and len(g.evidence.eager) == 12
    assert g.evidence.use_lines == 26 and g.evidence.used == 0


def test_graph_use_flag_read_from_either_argv_form() -> None:
    for args in (["--log-graphs=1"], ["--log-graphs", "1"]):
        g = graph_check(
            "captured verify", "", PATTERNS, speculative=True, required=False, args=args
        )
        assert g.evidence.use_unobservable == (
            "no graph-state line was logged inside the measured windows"
        ), args
    g = graph_check(
        "captured verify",
        "",
        PATTERNS,
        speculative=True,
        required=False,
        args=["--log-graphs-more=1", "log-graphs"],
    )
    assert g.evidence.use_unobservable == "the engine logs graph use only with --log-graphs"
    assert g.notes == [
        "cuda graphs captured; use not observable: the engine logs graph use only with --log-graphs"
    ]


def test_graph_capture_without_a_phase_group_needs_an_empty_phase() -> None:
    plain = GraphPatterns(
        captured=LogPattern("cap", r"graphs captured", "captured", "cap.py:1"),
        disabled=(),
        use=LogPattern("use", r"graph=(\w+)", "use", "use.py:1"),
        used_values=frozenset({"True"}),
        baseline_phase="",
        speculative_phase="verify",
    )
    ok = graph_check(
        "graphs captured", "graph=True", plain, speculative=False, required=True, args=[]
    )
    assert ok.reasons == [] and ok.evidence.used == 1
    bad = graph_check("graphs captured", "", plain, speculative=True, required=True, args=[])
    assert [r.code for r in bad.reasons] == ["cuda_graphs_not_captured"]


def test_judge_adds_rule_and_graph_reasons_and_keeps_evidence() -> None:
    graph_reason = ValidityReason(code="cuda_graphs_unused", severity="warning", message="g")
    graphs = GraphCheck(
        evidence=graph_check(
            "captured verify", "", PATTERNS, speculative=True, required=False, args=[]
        ).evidence,
        reasons=[graph_reason],
        notes=["a note"],
    )
    findings = [_finding("skipped", "t1"), _finding("info_code", "t2", severity="warning")]
    out = judge(
        make_payload(accepted=0),
        speculative=True,
        findings=findings,
        restarts=2,
        graphs=graphs,
        load_checks=("x",),
    )
    codes = [r.code for r in out.evidence.validity.reasons]
    assert codes == ["zero_acceptance", "skipped", "container_restarted", "cuda_graphs_unused"]
    assert out.evidence.warnings == ["load log: info_code: line t2", "server log: a note"]
    log = out.evidence.server_log
    assert log is not None and log.load_failures == 1 and log.graphs is not None
    assert log.load_checks == ["x"]
    # load checks alone: an evidence block without graphs
    only = judge(make_payload(), speculative=True, findings=[], load_checks=("x",))
    assert only.evidence.server_log is not None and only.evidence.server_log.graphs is None
    # neither: the payload's own block is kept as it was
    kept = judge(out, speculative=True, findings=[])
    assert kept.evidence.server_log == log


def test_throttle_warning_names_the_gpu_reasons_and_evidence() -> None:
    gpus = [
        GpuWindowStats(gpu=0, samples=10),
        GpuWindowStats(
            gpu=1,
            samples=10,
            throttleReasons=["sw_power_cap", "hw_slowdown"],
            throttledFraction=0.25,
            smClockMinMhz=1200,
            temperatureMaxC=83,
            powerMaxW=350.5,
        ),
    ]
    summary = TelemetrySummary(
        source="t", intervalS=0.1, windowCount=1, measuredSeconds=1.0, gpus=gpus
    )
    [w] = throttle_warnings(summary)
    assert (w.code, w.severity) == ("gpu_throttled", "warning")
    assert w.message == (
        "GPU 1 was throttled in 25% of the samples of the measured windows: "
        "sw_power_cap, hw_slowdown"
    )
    assert w.evidence == ["smClockMinMhz=1200", "temperatureMaxC=83", "powerMaxW=350.5"]


def test_unused_graphs_follow_required_and_the_flag_keeps_its_value() -> None:
    g = graph_check(
        "captured decode",
        "graph=False steps=1",
        PATTERNS,
        speculative=False,
        required=False,
        args=[],
    )
    assert [(r.code, r.severity) for r in g.reasons] == [("cuda_graphs_unused", "warning")]
    # a flag value holding '=' still names the flag
    g2 = graph_check(
        "captured verify", "", PATTERNS, speculative=True, required=False, args=["--log-graphs=a=b"]
    )
    assert g2.evidence.use_unobservable == (
        "no graph-state line was logged inside the measured windows"
    )


def test_load_failures_count_the_invalid_findings() -> None:
    findings = [_finding("a", "1"), _finding("b", "2"), _finding("c", "3", severity="warning")]
    out = judge(make_payload(), speculative=True, findings=findings, load_checks=("x",))
    assert out.evidence.server_log is not None and out.evidence.server_log.load_failures == 2


def test_a_run_at_another_tensor_parallel_size_is_invalid() -> None:
    """The engine's own start-up record decides: a server that ran at TP 1 when the experiment
    asked for 2 measured another configuration; an agreeing or silent record is no reason."""
    other = TensorParallelEvidence(size=1, configured=2, line="tensor_parallel_size=1, ...")
    out = judge(make_payload(), speculative=True, findings=[], tensor_parallel=other)
    [reason] = [r for r in out.evidence.validity.reasons if r.code == "tensor_parallel_mismatch"]
    assert reason.severity == "invalid" and not out.evidence.validity.valid
    assert "ran with tensor parallel 1" in reason.message and "asked for 2" in reason.message
    assert reason.evidence == ["tensor_parallel_size=1, ..."]
    assert out.evidence.server_log is not None
    assert out.evidence.server_log.tensor_parallel == other
    for tp in (
        TensorParallelEvidence(size=2, configured=2, line="tensor_parallel_size=2"),
        TensorParallelEvidence(size=None, configured=2),
    ):
        same = judge(make_payload(), speculative=True, findings=[], tensor_parallel=tp)
        assert "tensor_parallel_mismatch" not in {r.code for r in same.evidence.validity.reasons}
        assert same.evidence.server_log is not None
        assert same.evidence.server_log.tensor_parallel == tp


def test_a_mismatch_without_its_line_carries_no_empty_evidence() -> None:
    tp = TensorParallelEvidence(size=4, configured=2)
    out = judge(make_payload(), speculative=True, findings=[], tensor_parallel=tp)
    [reason] = [r for r in out.evidence.validity.reasons if r.code == "tensor_parallel_mismatch"]
    assert reason.evidence == []


def test_the_cpu_kernel_goes_into_the_server_log_block() -> None:
    kernel = CpuKernel(library="_C_AVX2", isa="AVX2", cpu_flags=["avx2", "fma"])
    out = judge(make_payload(), speculative=False, findings=[], cpu_kernel=kernel)
    assert out.evidence.server_log is not None
    assert out.evidence.server_log.cpu_kernel == kernel
    assert out.evidence.server_log.graphs is None and out.evidence.server_log.load_checks == []
