"""Validity rules: each rule turns a payload invalid with its reason and evidence lines."""

from __future__ import annotations

from bench.core import summarize
from bench.engines import get_engine
from bench.measure import judge, scan_log
from bench.schema import (
    EngineFlags,
    Evidence,
    Figures,
    Hardware,
    IterationRecord,
    Payload,
    RequestRecord,
    RunInfo,
    SampleStats,
    Validity,
    Workload,
)

HW = Hardware(hwClass="CPU_ONLY", gpuName="none", gpuCount=0, vramGb=0, cpu="x", ramGb=1, os="l")


def make_payload(
    *,
    accepted: int | None = 10,
    prompt_tokens: int = 1044,
    completion_tokens: int = 512,
    error: str | None = None,
) -> Payload:
    req = RequestRecord(
        request_id="r0",
        sent_at=0.0,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        http_status=200 if error is None else 500,
        error=error,
    )
    it = IterationRecord(index=2, warmup=False, window_start=0, window_end=1, requests=[req])
    s = summarize([100.0, 101.0])
    return Payload(
        simulated=True,
        hfId="a/b",
        hardware=HW,
        engineName="sglang",
        quantization="GPTQ-4bit",
        tokSOut=100.5,
        ttftMs=60,
        promptTokens=1044,
        outputTokens=512,
        samples=[100.0, 101.0],
        sampleStats=SampleStats(min=100, p50=100.5, mean=100.5, max=101, stddev=0.7),
        promptSha256="0" * 64,
        outputSha256="0" * 64,
        engineFlags=EngineFlags(
            specDecoding=True,
            specMethod="MTP",
            specNumTokens=2,
            specDraftTokens=None if accepted is None else 200,
            specAcceptedTokens=accepted,
            tensorParallel=2,
            concurrency=1,
            temperature=0,
        ),
        evidence=Evidence(
            run=RunInfo(
                specbench_version="0",
                started_at="t",
                finished_at="t",
                base_url="http://127.0.0.1:1",
                served_model="m",
                simulated=True,
            ),
            workload=Workload(
                prompt_tokens=1044, max_tokens=512, concurrency=1, warmup=0, iterations=1
            ),
            figures=Figures(decode_tok_s=s, ttft_ms=s, e2e_ms=s, aggregate_tok_s=s),
            iterations=[it],
            validity=Validity(valid=True),
        ),
    )


BROKEN_LOG = "\n".join(
    [
        "[2026-12-02 10:00:00 TP0] Load weight begin.",
        *(
            f"[2026-12-02 10:00:01 TP0] Parameter model.layers.0.{t}.weight not found in "
            "params_dict, skip loading"
            for t in ("q_proj", "k_proj", "v_proj", "o_proj", "mlp.gate_proj", "mlp.up_proj")
        ),
        "[2026-12-02 10:00:01 TP0] Parameter model.layers.0.mlp.down_proj.weight not found in "
        "params_dict, skip loading",
        "[2026-12-02 10:00:09 TP0] The server is fired up and ready to roll!",
    ]
)


def codes(p: Payload) -> list[str]:
    return [r.code for r in p.evidence.validity.reasons if r.severity == "invalid"]


def test_clean_payload_stays_valid() -> None:
    p = judge(make_payload(), speculative=True, findings=[])
    assert p.evidence.validity.valid
    assert codes(p) == []


def test_skipped_draft_tensors_invalidate_with_all_seven_lines() -> None:
    findings = scan_log(BROKEN_LOG, get_engine("sglang").load_patterns, speculative=True)
    p = judge(make_payload(), speculative=True, findings=findings)
    assert not p.evidence.validity.valid
    (reason,) = [r for r in p.evidence.validity.reasons if r.code == "draft_tensors_skipped"]
    assert len(reason.evidence) == 7
    assert all("skip loading" in line for line in reason.evidence)


def test_zero_acceptance_in_speculative_configuration() -> None:
    p = judge(make_payload(accepted=0), speculative=True, findings=[])
    assert codes(p) == ["zero_acceptance"]
    # A baseline has no acceptance to judge.
    assert judge(make_payload(accepted=0), speculative=False, findings=[]).evidence.validity.valid


def test_token_mismatches_and_failures() -> None:
    assert codes(judge(make_payload(prompt_tokens=1040), speculative=True, findings=[])) == [
        "prompt_token_mismatch"
    ]
    assert codes(judge(make_payload(completion_tokens=300), speculative=True, findings=[])) == [
        "output_token_mismatch"
    ]
    assert codes(judge(make_payload(error="HTTP 500"), speculative=True, findings=[])) == [
        "failed_requests"
    ]


def test_container_restart_invalidates() -> None:
    p = judge(make_payload(), speculative=True, findings=[], restarts=1)
    assert codes(p) == ["container_restarted"]


def test_info_patterns_do_not_invalidate() -> None:
    log = "'--mamba-scheduler-strategy' is deprecated and will be removed"
    findings = scan_log(log, get_engine("sglang").load_patterns, speculative=True)
    p = judge(make_payload(), speculative=True, findings=findings)
    assert p.evidence.validity.valid
    assert any("deprecated_flag" in w for w in p.evidence.warnings)
