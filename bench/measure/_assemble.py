"""A measured level's payload, assembled from its iterations: the figures over the valid
measured ones, the verdict, and the evidence they rest on (_loop.py sends the iterations and
keeps their bookkeeping; this module only reads what it is given)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench import __version__
from bench.core import summarize, utc_now
from bench.machine import measured_summary, no_telemetry_note
from bench.measure._acceptance import SGLANG_GAUGES, combine
from bench.measure._request import chat_template_record, sampling_record
from bench.measure._requestacc import category_windows
from bench.measure._runspec import RunSpec
from bench.measure._validity import MetricsProblem, measurement_reasons, throttle_warnings
from bench.measure._workload import prompt_sha256
from bench.schema import (
    PAYLOAD_SCHEMA,
    AcceptanceDelta,
    EngineFlags,
    Evidence,
    Figures,
    IterationRecord,
    Payload,
    RunInfo,
    SampleStats,
    Validity,
    Workload,
)

if TYPE_CHECKING:
    from bench.machine import Sampler

NO_SAMPLER = "no telemetry sampler was running for this measurement"


def with_telemetry(
    payload: Payload, sampler: Sampler | None, no_telemetry_reason: str | None = None
) -> Payload:
    """The payload with ``evidence.telemetry`` (cut to its measured iterations) and throttling
    as validity warnings; without a sampler, telemetry stays absent and a warning says why."""

    ev = payload.evidence
    if sampler is None:
        note = no_telemetry_note(no_telemetry_reason or NO_SAMPLER)
        update: dict[str, Any] = {"warnings": [*ev.warnings, note]}
    else:
        summary = measured_summary(sampler, ev.iterations)
        reasons = [*ev.validity.reasons, *throttle_warnings(summary)]
        validity = Validity.from_reasons(reasons)
        update = {"telemetry": summary, "validity": validity}
    return payload.model_copy(update={"evidence": ev.model_copy(update=update)})


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def level_payload(
    spec: RunSpec,
    iterations: list[IterationRecord],
    prompt: str,
    is_emulator: bool,
    started: str,
    warnings: list[str],
    metrics_problems: list[MetricsProblem] | None = None,
    series: dict[str, Any] | None = None,
    engine_template: str | None = None,
) -> Payload:
    """The payload of a measured level: its figures over the valid measured iterations, its
    verdict, and the evidence it rests on (every iteration, the counters, the workload)."""
    measured = [it for it in iterations if not it.warmup]
    valid = [it for it in measured if it.valid]
    acc = combine([it.acceptance for it in valid if it.acceptance is not None])
    prompt_tokens = _prompt_tokens(spec, measured)
    reasons, more_warnings = measurement_reasons(
        measured,
        spec_method=spec.spec_method,
        acceptance=acc,
        prompt_tokens=prompt_tokens,
        allow_prompt_mismatch=spec.allow_prompt_mismatch,
        metrics_problems=metrics_problems or [],
    )
    categories = category_windows(spec.prompt_set, spec.spec_num_tokens, iterations)
    warnings += [
        f"category {c.category}: per-request counts disagree with the counters: "
        f"{c.request_acceptance.check}"
        for c in categories
        if c.request_acceptance is not None and c.request_acceptance.agrees_with_counters is False
    ]
    warnings = [*warnings, *more_warnings]
    simulated = spec.simulated or is_emulator
    decode = [it.per_stream_mean_tok_s for it in valid if it.per_stream_mean_tok_s is not None]
    figures = _figures(valid, decode)
    total_rate = [
        (prompt_tokens + spec.max_tokens) / (r.e2e_ms / 1e3)
        for it in valid
        for r in it.requests
        if r.e2e_ms
    ]
    first_req = valid[0].requests[0] if valid else None
    evidence = Evidence(
        run=_run_info(spec, started, simulated),
        workload=_workload_record(spec, prompt_tokens, engine_template),
        figures=figures,
        categories=categories,
        iterations=iterations,
        acceptance=acc,
        acceptance_raw=_acceptance_raw(spec, valid, series),
        validity=Validity.from_reasons(reasons),
        warnings=warnings,
    )
    return Payload(
        schemaVersion=PAYLOAD_SCHEMA,
        simulated=simulated,
        hfId=spec.hf_id,
        modelRevision=spec.model_revision,
        hardware=spec.hardware,
        engineName=spec.engine,
        engineVersion=spec.engine_version,
        # The hardware that ran the engine, never a constant: no GPU means the CPU backend.
        backend="cuda" if spec.hardware.gpuCount > 0 else "cpu",
        quantization=spec.quantization,
        tokSOut=figures.decode_tok_s.mean if figures.decode_tok_s else 0.0,
        ttftMs=figures.ttft_ms.mean if figures.ttft_ms else 0.0,
        tokSTotal=_mean(total_rate) if total_rate else None,
        promptTokens=prompt_tokens,
        outputTokens=spec.max_tokens,
        samples=decode,
        sampleStats=_sample_stats(figures),
        promptSha256=prompt_sha256(prompt),
        outputSha256=(first_req.output_sha256 or "") if first_req else "",
        engineFlags=_engine_flags(spec, acc),
        evidence=evidence,
    )


def _prompt_tokens(spec: RunSpec, measured: list[IterationRecord]) -> int:
    """The prompt length the payload states: the exact P of a synthetic workload; for real
    text, the mean of what the server counted."""
    if spec.prompt_set is None:
        return spec.prompt_tokens
    counts = [r.prompt_tokens for it in measured for r in it.requests if r.prompt_tokens]
    return max(1, round(_mean(counts))) if counts else spec.prompt_tokens


def _figures(valid: list[IterationRecord], decode: list[float]) -> Figures:
    """Each headline figure summarised over the valid iterations (``decode``: their per-stream
    mean rates), one sample per iteration; None where no iteration has it."""
    ttft = [_mean([r.ttft_ms for r in it.requests if r.ttft_ms is not None]) for it in valid]
    e2e = [_mean([r.e2e_ms for r in it.requests if r.e2e_ms is not None]) for it in valid]
    agg = [it.aggregate_tok_s for it in valid if it.aggregate_tok_s is not None]
    return Figures(
        decode_tok_s=summarize(decode) if decode else None,
        ttft_ms=summarize(ttft) if ttft else None,
        e2e_ms=summarize(e2e) if e2e else None,
        aggregate_tok_s=summarize(agg) if agg else None,
    )


def _sample_stats(figures: Figures) -> SampleStats:
    """The decode figure as the payload's sampleStats (zeros without one)."""
    d = figures.decode_tok_s
    if not d:
        return SampleStats(min=0, p50=0, mean=0, max=0, stddev=0)
    return SampleStats(min=d.min, p50=d.median, mean=d.mean, max=d.max, stddev=d.stddev)


def _engine_flags(spec: RunSpec, acc: AcceptanceDelta | None) -> EngineFlags:
    """What the engine ran with, and the acceptance it measured."""
    return EngineFlags(
        specDecoding=spec.spec_method != "NONE",
        specMethod=spec.spec_method,
        specModel=spec.spec_draft_model,
        specNumTokens=spec.spec_num_tokens,
        specDraftTokens=acc.draft_tokens if acc else None,
        specAcceptedTokens=acc.accepted_tokens if acc else None,
        specAcceptanceRate=acc.acceptance_rate if acc else None,
        specMeanAcceptedLength=acc.mean_acceptance_length if acc else None,
        tensorParallel=spec.tensor_parallel,
        concurrency=spec.concurrency,
        temperature=spec.temperature,
        prefixCaching=spec.prefix_caching,
        gpuMemUtil=spec.gpu_mem_util,
        commandSnippet=spec.command_snippet,
    )


def _acceptance_raw(
    spec: RunSpec, valid: list[IterationRecord], series: dict[str, Any] | None
) -> dict[str, Any]:
    """Which /metrics series the counters were read from (model_name of the served model),
    and SGLang's acceptance gauges after each valid iteration."""
    raw_acc: dict[str, Any] = {"metrics_series": series} if series else {}
    if spec.engine == "sglang":
        gauges = [
            it.acceptance.after.values for it in valid if it.acceptance and it.acceptance.after
        ]
        raw_acc["sglang_gauges_after_each_iteration"] = [
            {g: v[g] for g in SGLANG_GAUGES if g in v} for v in gauges
        ]
    return raw_acc


def _run_info(spec: RunSpec, started: str, simulated: bool) -> RunInfo:
    """Who measured what, when (finished now), against which server."""
    return RunInfo(
        specbench_version=__version__,
        started_at=started,
        finished_at=utc_now(),
        base_url=spec.base_url,
        served_model=spec.served_model,
        command=spec.command,
        run_id=spec.run_id,
        config_name=spec.config_name,
        simulated=simulated,
        toy_model=spec.toy_model,
    )


def _workload_record(spec: RunSpec, prompt_tokens: int, engine_template: str | None) -> Workload:
    """The workload as it was sent: sizes, sampling, prompts and the chat template."""
    return Workload(
        prompt_tokens=prompt_tokens,
        max_tokens=spec.max_tokens,
        concurrency=spec.concurrency,
        warmup=spec.warmup,
        iterations=spec.iterations,
        temperature=spec.temperature,
        tokenizer=str(spec.tokenizer) if spec.tokenizer else None,
        prompt_seed=spec.prompt_seed,
        allow_prompt_mismatch=spec.allow_prompt_mismatch,
        prompt_set=spec.prompt_set.record() if spec.prompt_set is not None else None,
        sampling=sampling_record(spec),
        chat_template=chat_template_record(spec, engine_template),
    )
