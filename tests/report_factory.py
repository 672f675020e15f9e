"""A small factory of synthetic, schema-valid payloads and artifacts folders for report tests.

Everything it builds stands for emulator output unless told otherwise, so it is SIMULATED by
default. Figures are derived from the per-iteration samples passed in, never typed twice."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core import sha256_file, summarize
from bench.engines import get_engine, load_experiment
from bench.matrix import launch_record
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


def payload(s: Spec) -> Payload:
    """A valid Payload whose figures are computed from the samples in ``s``."""
    n = len(s.decode)
    agg = s.aggregate or [d * s.concurrency for d in s.decode]
    iterations = []
    for i in range(n):
        reqs = [
            RequestRecord(
                request_id=f"{s.config}-{i}-{k}",
                stream_index=k,
                sent_at=0.0,
                first_token_at=s.ttft[i] / 1000,
                last_token_at=s.ttft[i] / 1000 + 511 / s.decode[i],
                ttft_ms=s.ttft[i],
                decode_tok_s=s.decode[i],
                completion_tokens=512,
                prompt_tokens=1044,
                finish_reason="length",
                spec_tokens=_request_tokens(s, i * s.concurrency + k),
            )
            for k in range(s.concurrency)
        ]
        iterations.append(
            IterationRecord(
                index=i,
                warmup=False,
                window_start=0.0,
                window_end=1.0,
                requests=reqs,
                per_stream_mean_tok_s=s.decode[i],
                aggregate_tok_s=agg[i],
            )
        )
    dec = summarize(s.decode)
    acc = None
    if s.method != "NONE" and s.acceptance is not None:
        d, dt, a = s.acceptance
        acc = AcceptanceDelta(
            drafts=d,
            draft_tokens=dt,
            accepted_tokens=a,
            acceptance_rate=a / dt if dt else None,
            mean_acceptance_length=1 + a / d if d else None,
            accepted_per_position=list(s.accepted_per_position),
            source=f"{s.engine} /metrics",
        )
    invalid = any(r.severity == "invalid" for r in s.reasons)
    tokens = s.spec_tokens or (4 if s.method == "DFLASH" else 2 if s.method == "MTP" else None)
    return Payload(
        simulated=s.simulated,
        hfId="btbtyler09/Qwen3.8-27B-GPTQ-4bit",
        hardware=HARDWARE,
        engineName=s.engine,  # type: ignore[arg-type]
        engineVersion="0.0-test",
        quantization="GPTQ-4bit",
        tokSOut=dec.mean,
        ttftMs=summarize(s.ttft).mean,
        promptTokens=1044,
        outputTokens=512,
        samples=list(s.decode),
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
                prompt_tokens=1044,
                max_tokens=512,
                concurrency=s.concurrency,
                warmup=2,
                iterations=n,
            ),
            figures=Figures(
                decode_tok_s=dec,
                ttft_ms=summarize(s.ttft),
                e2e_ms=summarize(
                    [t + 512 / d * 1000 for t, d in zip(s.ttft, s.decode, strict=True)]
                ),
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
        draft_tokens=steps * (s.spec_tokens or 1),
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
    lines = [
        f"{sha256_file(f)}  {f.relative_to(root).as_posix()}"
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.name != "SHA256SUMS"
    ]
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return root
