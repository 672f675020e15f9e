"""Every validity rule, in one place.

The measurement's own rules (``measurement_reasons``): an invalid measured iteration, no valid
iteration at all, a speculative configuration that accepted zero tokens. The matrix's rules on
top (``judge``): skipped or missing draft tensors in the load log, a request's prompt or output
token count other than the workload's, a failed request, a restarted server container, CUDA
graphs not captured at start or not used in the measured windows (``graph_check``: a warning,
invalid where the configuration says ``require_cuda_graphs``). And throttling in the telemetry,
a warning only (``throttle_warnings``). An invalid payload is kept
with its reasons and evidence lines and excluded from rankings (the report filters on ``valid``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bench.core import SpecMethod
from bench.engines import GraphPatterns, LogPattern, WarmupPatterns
from bench.schema import (
    AcceptanceDelta,
    CpuKernel,
    GraphEvidence,
    IterationRecord,
    Payload,
    ServerLogEvidence,
    TelemetrySummary,
    TensorParallelEvidence,
    Validity,
    ValidityReason,
)

MAX_EVIDENCE = 12


@dataclass(frozen=True)
class LogFinding:
    """One load-log line that matched a pattern."""

    code: str
    severity: str
    message: str
    line: str
    source: str
    key: str = ""  # what the line is about (e.g. the tensor name), for counting distinct ones


def scan_log(text: str, patterns: tuple[LogPattern, ...], speculative: bool) -> list[LogFinding]:
    """Every line of ``text`` that matches one of ``patterns`` (in order)."""
    out: list[LogFinding] = []
    for line in text.splitlines():
        for p in patterns:
            if p.speculative_only and not speculative:
                continue
            m = p.search(line)
            if m:
                key = m.group(1) if m.groups() else line.strip()
                out.append(LogFinding(p.code, p.severity, p.message, line.strip(), p.source, key))
    return out


def why_not_ready(
    log: str,
    patterns: tuple[LogPattern, ...],
    graphs: GraphPatterns | None,
    *,
    speculative: bool,
    warmup: WarmupPatterns | None = None,
) -> list[str]:
    """What a server that never got ready had logged that explains it: every 'invalid' load
    rule that matched (distinct keys counted, as for a payload), a CUDA-graph capture that
    began and never ended (a hang inside the capture hides the error that caused it), and an
    engine's own warm-up request that began and never answered (its first forward pass)."""
    out: list[str] = []
    by_code: dict[str, list[LogFinding]] = {}
    for f in scan_log(log, patterns, speculative):
        if f.severity == "invalid":
            by_code.setdefault(f.code, []).append(f)
    for code, found in by_code.items():
        keys = list(dict.fromkeys(f.key for f in found))
        shown = ", ".join(keys[:MAX_EVIDENCE])
        out.append(f"{code}: {found[0].message}: {len(keys)} distinct ({shown})")
    if graphs is not None and graphs.capture_begin is not None:
        lines = log.splitlines()
        begun = [i for i, ln in enumerate(lines) if graphs.capture_begin.search(ln)]
        ended = [i for i, ln in enumerate(lines) if graphs.captured.search(ln)]
        if begun and (not ended or ended[-1] < begun[-1]):
            out.append(
                "cuda_graph_capture_hung: the server stopped in a CUDA graph capture "
                f"({lines[begun[-1]].strip()!r} has no end line); run the configuration eager "
                "to see the error the capture hides"
            )
    if warmup is not None:
        lines = log.splitlines()
        up = [ln for ln in lines if warmup.up.search(ln)]
        if up and not any(warmup.done.search(ln) for ln in lines):
            out.append(
                "warmup_never_answered: the HTTP server started "
                f"({up[-1].strip()!r}) but the engine's own warm-up request never answered: "
                "its first forward pass was still running (SGLang 0.5.17 JIT-compiles a GPTQ "
                "GEMM with nvcc there, for minutes); give it a longer --ready-timeout, or "
                "tests/gpu/stall_probe.py shows where it waits"
            )
    return out


def _reason(code: str, message: str, evidence: list[str]) -> ValidityReason:
    return ValidityReason(code=code, message=message, evidence=evidence[:MAX_EVIDENCE])


def zero_acceptance(
    method: str, accepted: int | None, draft_tokens: int | None, drafts: int | None = None
) -> ValidityReason | None:
    """Speculation on and not one draft token accepted: the draft path is broken (the seed's
    first SGLang MTP attempt). Unknown counters are not zero."""
    if method == "NONE" or accepted != 0:
        return None
    over = f"{drafts} drafts, " if drafts is not None else ""
    return _reason(
        "zero_acceptance",
        f"speculation on ({method}) but 0 accepted tokens over {over}{draft_tokens} draft "
        "tokens in the measured iterations",
        [f"specAcceptedTokens=0 specDraftTokens={draft_tokens}"],
    )


@dataclass(frozen=True)
class MetricsProblem:
    """What went wrong with the /metrics scrapes around one measured iteration: ``scrape``
    (unreachable, an HTTP error, a body that is not Prometheus text) or ``reset`` (counters
    lower after the window than before it)."""

    kind: Literal["scrape", "reset"]
    iteration: int
    message: str
    status: int | None = None


def metrics_reasons(
    problems: list[MetricsProblem], *, speculative: bool, measured: int
) -> list[ValidityReason]:
    """Counters that went back: the engine restarted inside a measured window (invalid; no
    acceptance from a negative delta). A failed scrape: that window's acceptance is unknown
    (invalid with speculation on, a warning without); a server without /metrics at all (404 at
    every scrape) leaves acceptance unknown, a warning, as one without speculative counters."""
    out: list[ValidityReason] = []
    resets = [p for p in problems if p.kind == "reset"]
    if resets:
        out.append(
            _reason(
                "metrics_counters_reset",
                f"/metrics counters went backwards inside {len(resets)} measured window(s) "
                f"({resets[0].message}): the engine restarted mid-run (or lost its counters); "
                "no acceptance is computed from a negative delta",
                [p.message for p in resets],
            )
        )
    failed = [p for p in problems if p.kind == "scrape"]
    if failed:
        never = len(failed) == 2 * measured and all(p.status == 404 for p in failed)
        if never:
            code, what = "no_metrics_endpoint", "the server has no /metrics (HTTP 404)"
        else:
            code = "metrics_scrape_failed"
            windows = len({p.iteration for p in failed})
            what = f"GET /metrics failed around {windows} measured iteration(s)"
        out.append(
            ValidityReason(
                code=code,
                severity="invalid" if speculative and not never else "warning",
                message=f"{what} ({failed[0].message}): the acceptance of "
                f"{'those windows' if not never else 'the run'} is unknown",
                evidence=[p.message for p in failed][:MAX_EVIDENCE],
            )
        )
    return out


def measurement_reasons(
    measured: list[IterationRecord],
    *,
    spec_method: SpecMethod,
    acceptance: AcceptanceDelta | None,
    prompt_tokens: int,
    allow_prompt_mismatch: bool,
    metrics_problems: list[MetricsProblem] | None = None,
) -> tuple[list[ValidityReason], list[str]]:
    """The measurement's verdict on its measured iterations: (reasons, warnings)."""
    valid = [it for it in measured if it.valid]
    reasons = [
        ValidityReason(
            code="invalid_iteration",
            message=f"iteration {it.index}: {'; '.join(it.reasons) or 'invalid request'}",
        )
        for it in measured
        if not it.valid
    ]
    warnings: list[str] = []
    if allow_prompt_mismatch:
        counts = {r.prompt_tokens for it in measured for r in it.requests}
        # None = no usage: that request is invalid for its own reason, not a mismatch.
        if counts - {prompt_tokens, None}:
            warnings.append(
                f"prompt mismatch allowed: server counted {sorted(c for c in counts if c)} "
                f"prompt tokens, requested {prompt_tokens}"
            )
    problems = metrics_problems or []
    reasons += metrics_reasons(problems, speculative=spec_method != "NONE", measured=len(measured))
    if spec_method != "NONE" and valid:
        if acceptance is None:
            if not problems:
                warnings.append("no speculative-decoding counters on /metrics: acceptance unknown")
        else:
            zero = zero_acceptance(
                spec_method, acceptance.accepted_tokens, acceptance.draft_tokens, acceptance.drafts
            )
            if zero is not None:
                reasons.append(zero)
    if not valid:
        reasons.append(
            ValidityReason(code="no_valid_iteration", message="no measured iteration was valid")
        )
    return reasons, warnings


def rule_reasons(
    payload: Payload,
    *,
    speculative: bool,
    findings: list[LogFinding],
    restarts: int,
) -> list[ValidityReason]:
    """The matrix's rules, judged on one payload; each reason carries its evidence lines."""
    reasons: list[ValidityReason] = []
    flags = payload.engineFlags
    zero = zero_acceptance(flags.specMethod, flags.specAcceptedTokens, flags.specDraftTokens)
    if speculative and zero is not None:
        reasons.append(zero)
    bad_load = [f for f in findings if f.severity == "invalid"]
    for code in sorted({f.code for f in bad_load}):
        hits = [f for f in bad_load if f.code == code]
        # Each TP rank logs its own copy of a warning: count what the lines are about.
        keys = list(dict.fromkeys(f.key for f in hits))
        reasons.append(
            _reason(
                code,
                f"{hits[0].message}: {len(keys)} distinct ({', '.join(keys[:8])}), "
                f"{len(hits)} log line(s)",
                [f.line for f in hits],
            )
        )
    want_p = payload.evidence.workload.prompt_tokens
    want_o = payload.evidence.workload.max_tokens
    prompt_bad: list[str] = []
    output_bad: list[str] = []
    failed: list[str] = []
    for it in payload.evidence.iterations:
        if it.warmup:
            continue
        for r in it.requests:
            tag = f"iteration {it.index} request {r.request_id}"
            if r.error is not None or (r.http_status is not None and r.http_status >= 400):
                failed.append(f"{tag}: status={r.http_status} error={r.error}")
                continue
            real_text = payload.evidence.workload.prompt_set is not None
            if r.prompt_tokens is not None and r.prompt_tokens != want_p and not real_text:
                prompt_bad.append(f"{tag}: prompt_tokens={r.prompt_tokens} want {want_p}")
            if r.completion_tokens != want_o:
                output_bad.append(f"{tag}: completion_tokens={r.completion_tokens} want {want_o}")
    if prompt_bad and not payload.evidence.workload.allow_prompt_mismatch:
        reasons.append(
            _reason("prompt_token_mismatch", f"{len(prompt_bad)} request(s)", prompt_bad)
        )
    if output_bad:
        reasons.append(
            _reason("output_token_mismatch", f"{len(output_bad)} request(s)", output_bad)
        )
    if failed:
        reasons.append(_reason("failed_requests", f"{len(failed)} request(s) failed", failed))
    if restarts > 0:
        reasons.append(
            _reason(
                "container_restarted",
                f"the server restarted {restarts} time(s) during the run",
                [f"RestartCount={restarts}"],
            )
        )
    return reasons


@dataclass(frozen=True)
class GraphCheck:
    """The graph rule's verdict on one measured level: evidence, reasons, notes."""

    evidence: GraphEvidence
    reasons: list[ValidityReason]
    notes: list[str]


def graph_check(
    log: str,
    window: str,
    patterns: GraphPatterns,
    *,
    speculative: bool,
    required: bool,
    args: list[str],
) -> GraphCheck:
    """CUDA graphs captured at start (``log``: the whole server log) and used in the measured
    windows (``window``: the lines logged while this level was measured, warmup included).

    Not captured, or captured but no graph-state line of the windows ran on a graph, is a
    warning naming the expected line (``invalid`` when ``required``): an engine that silently
    fell back to eager mode is several times slower and is not the configuration measured. No
    graph-state line at all (the engine logs none without a flag, or the windows were shorter
    than its log interval) is a note, never a verdict."""
    evidence = _graph_evidence(log, window, patterns, speculative=speculative, args=args)
    needed, captured, unobservable = evidence.needed, evidence.captured, evidence.use_unobservable
    use_lines, used = evidence.use_lines, evidence.used
    severity: Literal["invalid", "warning"] = "invalid" if required else "warning"
    what = "target-verify" if speculative else "decode"
    reasons: list[ValidityReason] = []
    notes: list[str] = []
    if not captured:
        reasons.append(
            ValidityReason(
                code="cuda_graphs_not_captured",
                severity=severity,
                message=f"no {what} CUDA graph capture in the server log: no line matching "
                f"'{patterns.captured.regex}' for '{needed}' ({patterns.captured.source}); the "
                "server ran eager",
                evidence=evidence.disabled or ["(no capture line)"],
            )
        )
    elif use_lines and not used:
        reasons.append(
            ValidityReason(
                code="cuda_graphs_unused",
                severity=severity,
                message=f"{what} CUDA graphs were captured but no step of the measured windows ran "
                f"on them: {use_lines} of {use_lines} step(s) eager by the line "
                f"'{patterns.use.regex}' ({patterns.use.source})",
                evidence=evidence.eager,
            )
        )
    elif use_lines and used < use_lines:
        notes.append(
            f"cuda graphs: {use_lines - used} of {use_lines} logged step(s) in the measured "
            "windows ran eager"
        )
    if unobservable is not None and captured:
        notes.append(f"cuda graphs captured; use not observable: {unobservable}")
    return GraphCheck(evidence=evidence, reasons=reasons, notes=notes)


def _graph_evidence(
    log: str, window: str, patterns: GraphPatterns, *, speculative: bool, args: list[str]
) -> GraphEvidence:
    """What the server's log says of its CUDA graphs: the capture lines (and graphs-off lines)
    of the whole ``log``, the steps of the measured ``window`` that ran on a graph or eager,
    and why graph use could not be seen when no graph-state line was logged."""
    needed = patterns.needed(speculative)
    captured: list[str] = []
    disabled: list[str] = []
    for line in log.splitlines():
        m = patterns.captured.search(line)
        if m and (m.group(1) if m.groups() else "") == needed:
            captured.append(line.strip())
        elif any(d.search(line) for d in patterns.disabled):
            disabled.append(line.strip())
    use_lines = used = 0
    eager: list[str] = []
    for line in window.splitlines():
        m = patterns.use.search(line)
        if not m:
            continue
        steps = int(m.group(2)) if len(m.groups()) >= 2 else 1
        use_lines += steps
        if m.group(1) in patterns.used_values:
            used += steps
        else:
            eager.append(line.strip())
    unobservable = None
    if use_lines == 0:
        flag = patterns.use_needs_flag
        unobservable = (
            f"the engine logs graph use only with {flag}"
            if flag is not None and flag not in [a.split("=", 1)[0] for a in args]
            else "no graph-state line was logged inside the measured windows"
        )
    return GraphEvidence(
        needed=needed,
        captured=captured[:MAX_EVIDENCE],
        disabled=disabled[:MAX_EVIDENCE],
        use_lines=use_lines,
        used=used,
        eager=eager[:MAX_EVIDENCE],
        use_unobservable=unobservable,
    )


def accept_lengths(window: str, pattern: LogPattern | None) -> list[float]:
    """The engine's own acceptance length per log window in ``window`` (sampled windows)."""
    if pattern is None:
        return []
    out: list[float] = []
    for line in window.splitlines():
        m = pattern.search(line)
        if m:
            out.append(float(m.group(1)))
    return out


def tensor_parallel_mismatch(tp: TensorParallelEvidence | None) -> ValidityReason | None:
    """The engine ran at another tensor-parallel size than the experiment asked for (its own
    start-up record says so): every figure belongs to another configuration."""
    if tp is None or tp.size is None or tp.size == tp.configured:
        return None
    return _reason(
        "tensor_parallel_mismatch",
        f"the engine ran with tensor parallel {tp.size}, the experiment asked for {tp.configured}",
        [tp.line] if tp.line else [],
    )


def judge(
    payload: Payload,
    *,
    speculative: bool,
    findings: list[LogFinding],
    restarts: int = 0,
    graphs: GraphCheck | None = None,
    load_checks: tuple[str, ...] = (),
    window_accept_lengths: list[float] | None = None,
    cpu_kernel: CpuKernel | None = None,
    tensor_parallel: TensorParallelEvidence | None = None,
    resolved: dict[str, str] | None = None,
) -> Payload:
    """The payload with its validity block extended by the matrix's rules (codes not repeated),
    and, given a graph check or load checks, the server-log evidence block."""
    have = {r.code for r in payload.evidence.validity.reasons}
    rules = rule_reasons(payload, speculative=speculative, findings=findings, restarts=restarts)
    if graphs is not None:
        rules += graphs.reasons
    mismatch = tensor_parallel_mismatch(tensor_parallel)
    if mismatch is not None:
        rules.append(mismatch)
    extra = [r for r in rules if r.code not in have]
    info = [f"{f.code}: {f.line}" for f in findings if f.severity not in ("invalid",)][
        :MAX_EVIDENCE
    ]
    notes = graphs.notes if graphs is not None else []
    reasons = [*payload.evidence.validity.reasons, *extra]
    validity = Validity.from_reasons(reasons)
    server_log = payload.evidence.server_log
    if (
        graphs is not None
        or load_checks
        or cpu_kernel is not None
        or tensor_parallel is not None
        or resolved
    ):
        server_log = ServerLogEvidence(
            load_checks=list(load_checks),
            load_failures=sum(1 for f in findings if f.severity == "invalid"),
            graphs=graphs.evidence if graphs is not None else None,
            accept_lengths=window_accept_lengths or [],
            cpu_kernel=cpu_kernel,
            tensor_parallel=tensor_parallel,
            resolved=resolved or {},
        )
    evidence = payload.evidence.model_copy(
        update={
            "validity": validity,
            "warnings": [
                *payload.evidence.warnings,
                *(f"load log: {i}" for i in info),
                *(f"server log: {n}" for n in notes),
            ],
            "server_log": server_log,
        }
    )
    # Round-trip through validation so the written payload is schema-checked.
    data = payload.model_dump(mode="json")
    data["evidence"] = evidence.model_dump(mode="json")
    return Payload.model_validate(data)


def throttle_warnings(summary: TelemetrySummary) -> list[ValidityReason]:
    """Throttling inside the measured windows -> one validity *warning* per GPU (never invalid:
    the figure is real, but the reader should know the card was held back)."""
    out: list[ValidityReason] = []
    for g in summary.gpus:
        if g.throttleReasons:
            out.append(
                ValidityReason(
                    code="gpu_throttled",
                    severity="warning",
                    message=(
                        f"GPU {g.gpu} was throttled in {g.throttledFraction:.0%} of the samples "
                        f"of the measured windows: {', '.join(g.throttleReasons)}"
                    ),
                    evidence=[
                        f"smClockMinMhz={g.smClockMinMhz}",
                        f"temperatureMaxC={g.temperatureMaxC}",
                        f"powerMaxW={g.powerMaxW}",
                    ],
                )
            )
    return out
