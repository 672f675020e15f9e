"""A small factory of synthetic, schema-valid payloads and artifacts folders for report tests.

Everything it builds stands for emulator output unless told otherwise, so it is SIMULATED by
default. Figures are derived from the per-iteration samples passed in, never typed twice."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core import sha256_file, summarize
from bench.engines import get_engine, load_experiment
from bench.matrix import launch_record
from bench.measure._acceptance import (
    SGLANG_DRAFT_TOKENS_GAUGE,
    SGLANG_GEN,
    SGLANG_REQS,
    SGLANG_VERIFY,
    VLLM_ACCEPTED,
    VLLM_DRAFT_TOKENS,
    VLLM_DRAFTS,
    VLLM_PER_POS,
    combine,
    delta,
)
from bench.schema import (
    AcceptanceDelta,
    AccuracyRecord,
    EngineFlags,
    Evidence,
    Experiment,
    Figures,
    GpuEntry,
    Hardware,
    HardwareExtended,
    IterationRecord,
    LaunchRecord,
    MetricSnapshot,
    Payload,
    RequestRecord,
    RequestSpecTokens,
    RunInfo,
    RunLock,
    SampleStats,
    SpeculationMode,
    SyntheticAcceptance,
    Validity,
    ValidityReason,
    Workload,
    write_payload,
)

HARDWARE = Hardware(
    hwClass="DISCRETE_GPU",
    gpuName="NVIDIA GeForce RTX 3090",
    gpuCount=2,
    vramGb=48.0,
    gpus=[GpuEntry(name="NVIDIA GeForce RTX 3090", vramGb=24.0)] * 2,
    cpu="Test CPU",
    ramGb=64.0,
    os="Linux",
    extended=HardwareExtended(source="fixture", driverVersion="580.00"),
)

OFFSETS = (-0.1, 0.05, 0.0, 0.1, -0.05)


def jitter(mean: float, scale: float = 1.0) -> list[float]:
    """Five samples around ``mean`` whose mean is exactly ``mean``."""
    return [mean + o * scale for o in OFFSETS]


@dataclass
class Spec:
    config: str
    engine: str
    method: str
    decode: list[float]
    ttft: list[float]
    concurrency: int = 1
    aggregate: list[float] | None = None
    spec_tokens: int | None = None
    draft_model: str | None = None
    acceptance: tuple[int, int, int] | None = (1000, 4000, 2400)  # drafts, draft tokens, accepted
    acceptance_raw: dict[str, Any] = field(default_factory=dict)
    accepted_per_position: tuple[int, ...] = ()
    reasons: list[ValidityReason] = field(default_factory=list)
    simulated: bool = True
    toy_model: bool = False
    served_model: str = "qwen"
    launch: LaunchRecord | None = None
    command: list[str] | None = None  # evidence.run.command (a matrix records the server argv)
    # issue 48: how the engine verified its drafts, a control's forced acceptance, the accuracy
    # task's answers (lowest level only), each request's own (verify steps, accepted) counts
    speculation: SpeculationMode | None = None
    synthetic: SyntheticAcceptance | None = None
    accuracy: AccuracyRecord | None = None
    request_counts: list[tuple[int, int]] | None = None


#: the client's clock at the first send of every factory payload, and the gap between windows
T0, GAP = 1000.0, 100.0
PROMPT, OUTPUT = 1044, 512
HF_ID = "btbtyler09/Qwen3.8-27B-GPTQ-4bit"


def _requests(s: Spec, i: int, sent: float) -> list[RequestRecord]:
    """The iteration's streams: TTFT and decode rate as given, 512 tokens each."""
    first = s.ttft[i] / 1000
    last = first + (OUTPUT - 1) / s.decode[i]
    ended = first + OUTPUT / s.decode[i]
    return [
        RequestRecord(
            request_id=f"{s.config}-{i}-{k}",
            stream_index=k,
            sent_at=sent,
            first_token_at=first,
            last_token_at=last,
            ended_at=ended,
            ttft_ms=first * 1e3,
            decode_tok_s=(OUTPUT - 1) / (last - first),
            e2e_ms=ended * 1e3,
            completion_tokens=OUTPUT,
            prompt_tokens=PROMPT,
            finish_reason="length",
            spec_tokens=_request_tokens(s, i * s.concurrency + k),
        )
        for k in range(s.concurrency)
    ]


def _snapshots(s: Spec, k: int | None) -> tuple[dict[str, float], dict[str, float]]:
    """/metrics counters before and after a window: the whole delta ``s.acceptance`` in the
    first window (zero in the others), in the engine's own counter names, so that every reader
    recomputes the figures from them (bench.schema._counters)."""
    d, dt, a = s.acceptance or (0, 0, 0)
    if s.engine == "vllm":
        after = {VLLM_DRAFTS: d, VLLM_DRAFT_TOKENS: dt, VLLM_ACCEPTED: a}
        after |= {
            f'{VLLM_PER_POS}{{position="{j}"}}': v for j, v in enumerate(s.accepted_per_position)
        }
        before = dict.fromkeys(after, 0.0)
    else:
        assert dt or not d, "SGLang counts draft tokens as drafts x (draft tokens per round - 1)"
        c = s.concurrency
        after = {SGLANG_VERIFY: d, SGLANG_GEN: a + c + d, SGLANG_REQS: c}
        if d:
            after[SGLANG_DRAFT_TOKENS_GAUGE] = dt / d + 1
        before = {SGLANG_VERIFY: 0.0, SGLANG_GEN: 0.0, SGLANG_REQS: 0.0}
    return (before if k == 0 else after), after


def _iteration_acceptance(s: Spec, i: int, start: float, end: float) -> AcceptanceDelta | None:
    if s.method == "NONE" or s.acceptance is None:
        return None
    b, a = _snapshots(s, i)
    tokens = s.spec_tokens or (4 if s.method == "DFLASH" else 2)
    acc = delta(
        s.engine,
        MetricSnapshot(at=start - 0.001, values=b),
        MetricSnapshot(at=end + 0.001, values=a),
        tokens,
    )
    assert acc is not None
    return acc


def _iterations(s: Spec, agg: list[float]) -> list[IterationRecord]:
    out = []
    for i in range(len(s.decode)):
        sent = T0 + GAP * i
        reqs = _requests(s, i, sent)
        end = sent + max(r.ended_at or 0.0 for r in reqs)
        out.append(
            IterationRecord(
                index=i,
                warmup=False,
                window_start=sent,
                window_end=end,
                requests=reqs,
                per_stream_mean_tok_s=math.fsum(r.decode_tok_s or 0 for r in reqs) / len(reqs),
                aggregate_tok_s=agg[i],
                acceptance=_iteration_acceptance(s, i, sent, end),
            )
        )
    return out


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def payload(s: Spec) -> Payload:
    """A valid Payload whose figures are computed from the samples in ``s``, with the evidence
    they are computed from (requests, windows, counter snapshots): every reader's recomputation
    (bench.schema._invariants) agrees with it."""
    n = len(s.decode)
    agg = s.aggregate or [d * s.concurrency for d in s.decode]
    iterations = _iterations(s, agg)
    decode = [it.per_stream_mean_tok_s or 0.0 for it in iterations]
    ttft = [_mean([r.ttft_ms or 0.0 for r in it.requests]) for it in iterations]
    e2e = [_mean([r.e2e_ms or 0.0 for r in it.requests]) for it in iterations]
    total = [
        (PROMPT + OUTPUT) / ((r.e2e_ms or 1.0) / 1e3) for it in iterations for r in it.requests
    ]
    dec = summarize(decode)
    acc = combine([it.acceptance for it in iterations if it.acceptance is not None])
    if acc is not None:
        acc = acc.model_copy(update={"source": f"{s.engine} /metrics"})
    invalid = any(r.severity == "invalid" for r in s.reasons)
    tokens = s.spec_tokens or (4 if s.method == "DFLASH" else 2 if s.method == "MTP" else None)
    return Payload(
        simulated=s.simulated,
        hfId=HF_ID,
        hardware=HARDWARE,
        engineName=s.engine,  # type: ignore[arg-type]
        engineVersion="0.0-test",
        quantization="GPTQ-4bit",
        tokSOut=dec.mean,
        ttftMs=summarize(ttft).mean,
        tokSTotal=_mean(total),
        promptTokens=PROMPT,
        outputTokens=OUTPUT,
        samples=decode,
        sampleStats=SampleStats(
            min=dec.min, p50=dec.median, mean=dec.mean, max=dec.max, stddev=dec.stddev
        ),
        promptSha256="0" * 64,
        outputSha256="1" * 64,
        engineFlags=EngineFlags(
            specDecoding=s.method != "NONE",
            specMethod=s.method,  # type: ignore[arg-type]
            specModel=s.draft_model,
            specNumTokens=tokens if s.method != "NONE" else None,
            specDraftTokens=acc.draft_tokens if acc else None,
            specAcceptedTokens=acc.accepted_tokens if acc else None,
            specAcceptanceRate=acc.acceptance_rate if acc else None,
            specMeanAcceptedLength=acc.mean_acceptance_length if acc else None,
            tensorParallel=2,
            concurrency=s.concurrency,
            temperature=0.0,
        ),
        evidence=Evidence(
            run=RunInfo(
                specbench_version="0.1.0",
                started_at="2026-01-01T00:00:00Z",
                finished_at="2026-01-01T00:01:00Z",
                base_url="http://127.0.0.1:1",
                served_model=s.served_model,
                command=s.command or ["specbench", "measure", s.config],
                config_name=s.config,
                simulated=s.simulated,
                toy_model=s.toy_model,
            ),
            workload=Workload(
                prompt_tokens=PROMPT,
                max_tokens=OUTPUT,
                concurrency=s.concurrency,
                warmup=2,
                iterations=n,
            ),
            figures=Figures(
                decode_tok_s=dec,
                ttft_ms=summarize(ttft),
                e2e_ms=summarize(e2e),
                aggregate_tok_s=summarize(agg),
            ),
            iterations=iterations,
            acceptance=acc,
            acceptance_raw=s.acceptance_raw,
            validity=Validity(valid=not invalid, reasons=s.reasons),
            launch=s.launch,
            speculation=s.speculation,
            synthetic=s.synthetic,
            accuracy=s.accuracy,
        ),
    )


def _request_tokens(s: Spec, n: int) -> RequestSpecTokens | None:
    """The n-th request's own counts from ``s.request_counts`` (cycled), as vLLM sends them."""
    if not s.request_counts:
        return None
    steps, accepted = s.request_counts[n % len(s.request_counts)]
    return RequestSpecTokens(
        source="vllm metrics.speculative_decoding",
        verify_steps=steps,
        accepted_tokens=accepted,
        draft_tokens=steps * (s.spec_tokens or (4 if s.method == "DFLASH" else 2)),
    )


def seed_matrix(simulated: bool = True, sweep: bool = True) -> list[Spec]:
    """The seed's four configurations with its means, plus a DFlash concurrency sweep."""
    specs = [
        Spec("vllm-dflash", "vllm", "DFLASH", jitter(109.36), jitter(74.0, 2), draft_model="d"),
        Spec("sglang-dflash", "sglang", "DFLASH", jitter(97.54), jitter(67.40, 2), draft_model="d"),
        Spec(
            "vllm-mtp", "vllm", "MTP", jitter(92.78), jitter(70.0, 2), acceptance=(1000, 2000, 1500)
        ),
        Spec(
            "sglang-mtp",
            "sglang",
            "MTP",
            jitter(86.98),
            jitter(69.30, 2),
            acceptance=(1000, 2000, 1450),
        ),
    ]
    if sweep:
        for c, v_agg, s_agg in (
            (2, 200.0, 180.0),
            (4, 330.0, 300.0),
            (8, 390.0, 240.0),
            (16, 430.67, 250.0),
        ):
            specs.append(
                Spec(
                    "vllm-dflash",
                    "vllm",
                    "DFLASH",
                    jitter(v_agg / c),
                    jitter(80.0 + c),
                    concurrency=c,
                    aggregate=jitter(v_agg),
                )
            )
            ttft = 70.0 if c <= 4 else 70.0 * c
            specs.append(
                Spec(
                    "sglang-dflash",
                    "sglang",
                    "DFLASH",
                    jitter(s_agg / c),
                    jitter(ttft),
                    concurrency=c,
                    aggregate=jitter(s_agg),
                )
            )
    for s in specs:
        s.simulated = simulated
    return specs


def _seed_experiment() -> Experiment:
    return load_experiment("bench/experiments/qwen38-27b-gptq-2x3090.yaml")


def _lock(exp: Experiment) -> str:
    lock = RunLock(
        run_id="test",
        prompt_seed=0,
        created_at="2026-12-03T00:00:00+00:00",
        simulated=True,
        launcher="process",
        experiment=exp,
    )
    return lock.model_dump_json(by_alias=True)


def lock_for(specs: list[Spec]) -> str:
    """The lock of a matrix that ran exactly these specs: the seed experiment cut to their
    configurations and concurrency levels, with the SGLang DFlash admission cap at the five
    live requests the seed's Mamba cache admitted."""
    exp = _seed_experiment()
    levels: dict[str, list[int]] = {}
    for s in specs:
        levels[s.config] = sorted({*levels.get(s.config, []), s.concurrency})
    configs = []
    for cfg in exp.configurations:
        if cfg.name not in levels:
            continue
        args = list(cfg.args)
        if cfg.name == "sglang-dflash":  # the seed's five live requests (Mamba cache)
            args += ["--max-running-requests", "5"]
        configs.append(cfg.model_copy(update={"concurrency": levels[cfg.name], "args": args}))
    return _lock(exp.model_copy(update={"configurations": configs}))


def depth_lock(specs: list[Spec]) -> str:
    """The lock of the depth experiment cut to the specs' configurations and levels."""
    exp = load_experiment("bench/experiments/qwen38-27b-gptq-2x3090-depth.yaml")
    levels: dict[str, list[int]] = {}
    for s in specs:
        levels[s.config] = sorted({*levels.get(s.config, []), s.concurrency})
    configs = [
        c.model_copy(update={"concurrency": levels[c.name]})
        for c in exp.configurations
        if c.name in levels
    ]
    return _lock(exp.model_copy(update={"configurations": configs}))


def experiment_lock() -> str:
    """The lock the matrix writes for the whole seed experiment."""
    return _lock(_seed_experiment())


def write_artifacts(
    root: Path,
    specs: list[Spec],
    logs: dict[str, str] | None = None,
    lock: str | None = None,
    stems: dict[int, str] | None = None,
    record_launch: bool = True,
) -> Path:
    """An artifacts folder as the matrix writes it (payloads, logs, lock, hardware, sums).

    With ``record_launch`` each payload whose configuration is in the lock records its launch
    as the matrix does (``bench.matrix.launch_record``: a docker launcher, the logged
    admission cap from ``logs``); without, the folder is one written before launch records."""
    (root / "payloads").mkdir(parents=True, exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    # Every folder is its own run, as a matrix writes it: a run id of its own, in the lock and
    # in each payload (compare refuses two folders of one run).
    run_id = "test-" + hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    locked = RunLock.model_validate_json(lock or lock_for(specs))
    simulated = any(s.simulated for s in specs)  # the lock says what its payloads are
    lock = locked.model_copy(update={"run_id": run_id, "simulated": simulated}).model_dump_json(
        by_alias=True
    )
    exp = locked.experiment
    for i, s in enumerate(specs):
        stem = (stems or {}).get(i, f"{s.config}-c{s.concurrency}")
        cfg = next((c for c in exp.configurations if c.name == s.config), None)
        if record_launch and s.launch is None and cfg is not None:
            engine = get_engine(cfg.engine)
            spec = engine.container_spec(
                cfg,
                exp,
                host_port=40000 + exp.configurations.index(cfg),
                model_cache="/models-host",
                run_id="test",
            )
            log = (logs or {}).get(s.config, "")
            s = dataclasses.replace(s, launch=launch_record(engine, cfg, exp, spec, "docker", log))
        p = payload(s)
        run = p.evidence.run.model_copy(update={"run_id": run_id})
        p = p.model_copy(update={"evidence": p.evidence.model_copy(update={"run": run})})
        write_payload(root / "payloads" / f"{stem}.json", p)
    for name, text in (logs or {}).items():
        (root / "logs" / f"{name}.log").write_text(text, encoding="utf-8")
    (root / "experiment.lock.json").write_text(lock)
    (root / "hardware.json").write_text(HARDWARE.model_dump_json())
    (root / "provenance.json").write_text(json.dumps({"git": {"sha": "abc123"}}))
    write_sums(root)
    return root


def set_hardware(root: Path, hw: Hardware) -> None:
    """The run folder's machine made ``hw``, in hardware.json and in every payload alike (the
    matrix writes both from one capture), with SHA256SUMS written again."""
    for f in sorted((root / "payloads").glob("*.json")):
        p = Payload.model_validate_json(f.read_text())
        write_payload(f, p.model_copy(update={"hardware": hw}))
    (root / "hardware.json").write_text(hw.model_dump_json())
    write_sums(root)


def write_sums(root: Path) -> None:
    """SHA256SUMS over every file of the folder, as the matrix leaves it."""
    lines = [
        f"{sha256_file(f)}  {f.relative_to(root).as_posix()}"
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.name != "SHA256SUMS"
    ]
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")
