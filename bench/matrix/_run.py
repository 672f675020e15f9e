"""Run every configuration of an experiment: one server start per configuration, every
concurrency level measured through ``bench.measure.measure``, each payload judged by
``bench.validity`` and written atomically; logs kept, SHA256SUMS written, resumable.

Ctrl-C (or SIGTERM) stops the running server and leaves every finished artifact intact.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from bench.core import (
    EMULATOR_IMAGE,
    SIMULATED_BANNER,
    InputError,
    RunError,
    SpecbenchError,
    StrictModel,
    ensure_dir,
    read_json_model,
    utc_now,
    write_text,
)
from bench.engines import DEFAULT_MODEL_CACHE, ContainerSpec, get_engine
from bench.machine import (
    ImageRef,
    Provenance,
    SamplerStart,
    capture_hardware,
    capture_provenance,
    decode_bytes_from_checkpoint,
    open_sampler,
)
from bench.matrix._artifacts import Artifacts
from bench.matrix._launch import (
    DockerLauncher,
    Launcher,
    ProcessLauncher,
    Server,
    free_port,
    scrub,
    wait_ready,
)
from bench.measure import ProgressBar, RunSpec, judge, measure, scan_log
from bench.schema import (
    Configuration,
    ConfigurationStatus,
    Experiment,
    Hardware,
    ModelBytes,
    Payload,
    RunLock,
    RunOverrides,
    RunStatus,
    WeightsFile,
)

if TYPE_CHECKING:
    from bench.machine import SamplerStart

# Starts one telemetry sampler for a configuration (or says why there is none).
TelemetryFactory = Callable[[], "SamplerStart"]
EMULATED_NO_TELEMETRY = "emulated run: no GPU does the work, so no GPU telemetry is recorded"


class MatrixOptions(StrictModel):
    out: Path
    only: list[str] = Field(default_factory=list)
    resume: bool = False
    launcher: Literal["docker", "process"] = "docker"
    emulate: bool = False
    time_scale: float | None = Field(default=None, gt=0)
    warmup: int | None = Field(default=None, ge=0, description="override (labelled deviation)")
    iterations: int | None = Field(default=None, ge=1, description="override (labelled)")
    allow_unpinned: bool = False
    model_cache: str = DEFAULT_MODEL_CACHE
    emulator_image: str = EMULATOR_IMAGE
    ready_timeout_s: float | None = Field(default=None, gt=0)
    run_id: str | None = None
    show_progress: bool = True

    @property
    def emulated(self) -> bool:
        # A local process can only be the emulator.
        return self.emulate or self.launcher == "process"


@dataclass
class Outcome:
    name: str
    status: Literal["done", "skipped", "failed", "interrupted"]
    payloads: list[Path] = field(default_factory=list)
    valid: bool | None = None
    reasons: list[str] = field(default_factory=list)
    expected_invalid: bool = False


@dataclass
class MatrixResult:
    out: Path
    run_id: str
    outcomes: list[Outcome]

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]


# -- helpers --------------------------------------------------------------------------------


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _host_hardware() -> Hardware:
    """Hardware of this host (bench.machine); a CPU_ONLY record where no NVIDIA GPU is."""

    return capture_hardware(allow_no_gpu=True)


def _run_provenance(
    exp: Experiment, opts: MatrixOptions, hw: Hardware, experiment_path: Path | None
) -> Provenance:
    """Provenance (bench.machine provenance): versions, git SHA, images as pinned here."""

    images = [
        ImageRef(
            ref=(opts.emulator_image if opts.emulated else img.ref),
            engine=img.engine,
            digest=None if img.digest == "unresolved" else img.digest,
            upstreamVersion=img.version,
        )
        for img in exp.images.values()
    ]
    rec = capture_provenance(
        experiment_path=experiment_path,
        images=images,
        hardware=hw,
        command=sys.argv,
        probe_docker=opts.launcher == "docker",
        probe_toolkit=not opts.emulated,
    )
    if opts.emulated:
        rec = rec.model_copy(update={"notes": [SIMULATED_BANNER, *rec.notes]})
    return rec


_interrupted = threading.Event()


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM both stop the run, and the running server with it.

    The handler is our own function, not ``signal.default_int_handler``: asyncio.run replaces
    the default handler with one that only cancels the running task, and a cancellation the
    measurement absorbs would let the run go on. The flag is checked after each measurement
    as well, so an interrupt can never be lost."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _interrupted.clear()

    def handler(signum: int, frame: object) -> None:
        _interrupted.set()
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    old_int = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)


def _lock(exp: Experiment, opts: MatrixOptions, run_id: str) -> RunLock:
    return RunLock(
        run_id=run_id,
        created_at=utc_now(),
        simulated=opts.emulated,
        launcher=opts.launcher,
        overrides=RunOverrides(
            warmup=opts.warmup, iterations=opts.iterations, time_scale=opts.time_scale
        ),
        unresolved_pins=exp.unresolved_pins(),
        experiment=exp,
    )


# -- the run --------------------------------------------------------------------------------


def run_matrix(
    exp: Experiment,
    opts: MatrixOptions,
    *,
    launcher: Launcher | None = None,
    hardware: Hardware | None = None,
    experiment_path: Path | None = None,
    telemetry: TelemetryFactory | None = None,
) -> MatrixResult:
    """Run the selected configurations and write the artifacts to ``opts.out``.

    ``telemetry`` starts the GPU sampler of one configuration; by default NVML on real runs and
    none when emulated (the emulator's payloads must not carry the host GPU's numbers)."""
    selected = exp.select(opts.only or None)
    if not opts.emulated and not opts.allow_unpinned:
        pins = exp.unresolved_pins()
        if pins:
            raise InputError(
                "experiment",
                "real runs need every image digest and model revision pinned; unresolved: "
                + "; ".join(pins)
                + " (resolve them, or pass --allow-unpinned to run by tag)",
            )
    arts = Artifacts(opts.out)
    ensure_dir(opts.out, "--out")
    run_id = opts.run_id or new_run_id()

    if arts.lock.exists():
        old = read_json_model(arts.lock, RunLock)
        if not opts.resume:
            raise InputError(
                "--out", f"{opts.out} already holds a run; pass --resume or a new --out"
            )
        if old.experiment.lock_dict() != exp.lock_dict() or old.simulated != opts.emulated:
            raise InputError(
                "--resume", "the experiment (or emulate mode) differs from the one in the lock"
            )
        run_id = old.run_id
    else:
        arts.write_model(arts.lock, _lock(exp, opts, run_id))
    if not arts.hardware.exists():
        hw = hardware or _host_hardware()
        arts.write_model(arts.hardware, hw)
    hw = Hardware.model_validate_json(arts.hardware.read_text())
    if not arts.provenance.exists():
        arts.write_model(arts.provenance, _run_provenance(exp, opts, hw, experiment_path))

    if not opts.emulated and not arts.weights.exists():
        measured = checkpoint_bytes(exp, Path(opts.model_cache))
        if measured:
            arts.write_model(arts.weights, measured)
    if launcher is None:
        launcher = ProcessLauncher() if opts.launcher == "process" else DockerLauncher()
    if telemetry is None:
        telemetry = _default_telemetry(opts.emulated)
    warmup = opts.warmup if opts.warmup is not None else exp.workload.warmup
    iterations = opts.iterations if opts.iterations is not None else exp.workload.iterations
    per_level = warmup + iterations
    total = sum(len(exp.levels_for(c)) * per_level for c in selected)
    outcomes: list[Outcome] = []
    try:
        with (
            _sigterm_as_interrupt(),
            ProgressBar(total, enabled=opts.show_progress, eta=True) as progress,
        ):
            for cfg in selected:
                levels = exp.levels_for(cfg)
                expected = cfg.expect_invalid is not None
                if opts.resume and arts.finished(cfg.name, levels, accept_invalid=expected):
                    outcomes.append(
                        Outcome(
                            cfg.name,
                            "skipped",
                            [arts.payload(cfg.name, k) for k in levels],
                            expected_invalid=expected,
                        )
                    )
                    progress.advance(len(levels) * per_level)
                    progress.log(f"{cfg.name}: finished earlier, skipped (--resume)")
                    continue
                outcome = Outcome(cfg.name, "interrupted", expected_invalid=expected)
                outcomes.append(outcome)
                done_units = 0
                try:
                    done_units = _run_configuration(
                        exp,
                        cfg,
                        opts,
                        arts,
                        launcher,
                        hw,
                        run_id,
                        warmup,
                        iterations,
                        progress,
                        outcome,
                        telemetry,
                    )
                    outcome.status = "done"
                except SpecbenchError as err:
                    outcome.status = "failed"
                    outcome.reasons.append(scrub(str(err)))
                    progress.log(f"{cfg.name}: FAILED: {scrub(str(err)).splitlines()[0]}")
                finally:
                    left = len(levels) * per_level - done_units
                    if outcome.status == "failed" and left > 0:
                        progress.advance(left)
    finally:
        arts.write_model(arts.status, _status(run_id, outcomes, opts.emulated))
        arts.write_sums()
    return MatrixResult(opts.out, run_id, outcomes)


def checkpoint_bytes(exp: Experiment, model_cache: Path) -> WeightsFile | None:
    """weights.json: each downloaded model's byte counts from its safetensors headers (the
    roofline prefers them to the experiment's hand-written estimates); None when none exists."""
    models: dict[str, ModelBytes] = {}
    for key, pin in exp.models.items():
        found = decode_bytes_from_checkpoint(model_cache / pin.dirname)
        if found is not None:
            models[key] = ModelBytes(hf_id=pin.hf_id, **found.model_dump())
    return WeightsFile(created_at=utc_now(), models=models) if models else None


def _default_telemetry(emulated: bool) -> TelemetryFactory:

    if emulated:
        return lambda: SamplerStart(None, EMULATED_NO_TELEMETRY)
    return open_sampler


def _status(run_id: str, outcomes: list[Outcome], simulated: bool) -> RunStatus:
    return RunStatus(
        run_id=run_id,
        simulated=simulated,
        notes=[SIMULATED_BANNER] if simulated else [],
        written_at=utc_now(),
        configurations={
            o.name: ConfigurationStatus(
                status=o.status,
                valid=o.valid,
                expected_invalid=o.expected_invalid,
                payloads=[p.name for p in o.payloads],
                reasons=o.reasons,
            )
            for o in outcomes
        },
    )


def _container_spec(
    exp: Experiment, cfg: Configuration, opts: MatrixOptions, run_id: str
) -> ContainerSpec:
    engine = get_engine(cfg.engine)
    port = free_port()
    if not opts.emulated:
        return engine.container_spec(
            cfg, exp, host_port=port, model_cache=opts.model_cache, run_id=run_id
        )
    in_docker = opts.launcher == "docker"
    argv = engine.emulator_argv(
        cfg,
        host="0.0.0.0" if in_docker else "127.0.0.1",
        port=engine.container_port if in_docker else port,
        served_model=exp.served_model,
    )
    if opts.time_scale is not None:
        argv += ["--time-scale", repr(opts.time_scale)]
    spec = engine.container_spec(
        cfg,
        exp,
        host_port=port,
        model_cache=opts.model_cache,
        run_id=run_id,
        image_override=opts.emulator_image,
        emulate_argv=argv,
    )
    if not in_docker:
        spec = ContainerSpec(**{**spec.__dict__, "container_port": port})
    return spec


def _run_configuration(
    exp: Experiment,
    cfg: Configuration,
    opts: MatrixOptions,
    arts: Artifacts,
    launcher: Launcher,
    hw: Hardware,
    run_id: str,
    warmup: int,
    iterations: int,
    progress: ProgressBar,
    outcome: Outcome,
    telemetry: TelemetryFactory,
) -> int:
    """Start, check, sweep, stop one configuration. Returns the iterations done.

    One telemetry sampler runs from readiness to the end of the sweep; each payload gets it cut
    to its own measured iteration windows."""

    engine = get_engine(cfg.engine)
    image = exp.image_for(cfg)
    spec = _container_spec(exp, cfg, opts, run_id)
    log_path = arts.log(cfg.name)
    argv = engine.server_argv(cfg, exp)
    progress.say(f"{cfg.name}: starting server")
    server: Server = launcher.start(spec, log_path)
    done = 0
    sampler = None
    try:
        secs = wait_ready(
            server,
            paths=(engine.health_path, engine.ready_path),
            timeout_s=opts.ready_timeout_s or exp.server.ready_timeout_s,
            what=cfg.name,
        )
        progress.log(f"{cfg.name}: ready after {secs:.1f} s")
        load_log = server.log_text()
        version = engine.version_from_log(load_log) or image.version
        draft = exp.draft_for(cfg)
        tokenizer = None
        if not opts.emulated:
            tok_dir = Path(opts.model_cache) / exp.target.dirname
            tokenizer = tok_dir if (tok_dir / "tokenizer.json").exists() else None
        started = telemetry()
        sampler = started.sampler
        if sampler is None and not opts.emulated:
            progress.log(f"{cfg.name}: {started.reason}")
        for k in exp.levels_for(cfg):
            progress.say(f"{cfg.name} c={k}")
            run_spec = RunSpec(
                engine=cfg.engine,
                base_url=server.base_url,
                hf_id=exp.target.hf_id,
                served_model=exp.served_model,
                quantization=exp.quantization,
                hardware=hw,
                spec_method=cfg.method,
                spec_num_tokens=cfg.spec_num_tokens,
                spec_draft_model=draft.hf_id if draft else None,
                prompt_tokens=exp.workload.prompt_tokens,
                max_tokens=exp.workload.max_tokens,
                concurrency=k,
                warmup=warmup,
                iterations=iterations,
                tokenizer=tokenizer,
                request_timeout_s=exp.workload.request_timeout_s,
                simulated=opts.emulated,
                run_id=run_id,
                config_name=cfg.name,
                command=argv,
                engine_version=version,
                tensor_parallel=exp.tensor_parallel,
                prefix_caching=exp.prefix_caching.get(cfg.engine),
                gpu_mem_util=exp.gpu_mem_util.get(cfg.engine),
                command_snippet=shlex.join(argv),
                model_revision=exp.target.revision,
            )
            payload: Payload = measure(
                run_spec, progress, telemetry=sampler, no_telemetry_reason=started.reason
            )
            if _interrupted.is_set():  # never write a payload whose measurement was cut short
                raise KeyboardInterrupt
            done += warmup + iterations
            findings = scan_log(server.log_text(), engine.load_patterns, cfg.speculative)
            payload = judge(
                payload, speculative=cfg.speculative, findings=findings, restarts=server.restarts()
            )
            outcome.payloads.append(arts.write_payload(cfg.name, k, payload))
            valid = payload.evidence.validity.valid
            outcome.valid = valid if outcome.valid is None else (outcome.valid and valid)
            for r in payload.evidence.validity.reasons:
                line = f"c={k} {r.code}: {r.message}"
                if r.severity == "invalid" and line not in outcome.reasons:
                    outcome.reasons.append(line)
            verdict = "valid" if valid else "INVALID"
            progress.log(f"{cfg.name} c={k}: {payload.tokSOut:.2f} tok/s, {verdict}")
            if not server.alive():
                raise RunError(f"{cfg.name}: server exited during the sweep (c={k})")
    finally:
        if sampler is not None:
            sampler.stop()
        progress.say(f"{cfg.name}: stopping server")
        server.stop()
        text = scrub(server.log_text())
        if opts.emulated:
            text = f"# {SIMULATED_BANNER}\n{text}"
        write_text(log_path, text)
    return done
