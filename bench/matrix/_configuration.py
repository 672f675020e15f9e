"""One configuration of a matrix run: start its server, check the load log, measure every
concurrency level, judge and write each payload, stop the server and keep its log. Also the
interrupt handling every configuration shares (Ctrl-C or SIGTERM stops the running server)."""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bench.core import (
    SIMULATED_BANNER,
    RunError,
    SpecbenchError,
    WriteError,
    exists,
    read_log,
    remove_file,
    utc_now,
    write_text,
)
from bench.engines import (
    ContainerSpec,
    Engine,
    LogPattern,
    cpu_kernel_from_log,
    flag_value,
    get_engine,
    resolved_settings,
    speculation_mode,
)
from bench.engines._scrub import scrub
from bench.machine import SamplerStart
from bench.matrix._artifacts import Artifacts
from bench.matrix._launch import (
    Launcher,
    ProcessLauncher,
    Server,
    free_port,
    wait_ready,
)
from bench.matrix._models_present import model_folder
from bench.matrix._options import MatrixOptions, Outcome, TelemetryFactory
from bench.matrix._served import ServedCache, engine_install
from bench.matrix._synthetic import Control, control
from bench.measure import (
    MAX_PROBES,
    AccuracyTask,
    Measured,
    ProgressBar,
    PromptSet,
    RunSpec,
    accept_lengths,
    answer_task,
    graph_check,
    judge,
    measure_level,
    probe_level,
    scan_log,
    why_not_ready,
)
from bench.schema import (
    AdmissionCap,
    Configuration,
    CpuKernel,
    Experiment,
    Hardware,
    LaunchRecord,
    Payload,
    ServedModels,
    SpeculationMode,
    TensorParallelEvidence,
)

interrupted = threading.Event()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM both stop the run, and the running server with it.

    The handler is our own function, not ``signal.default_int_handler``: asyncio.run replaces
    the default handler with one that only cancels the running task, and a cancellation the
    measurement absorbs would let the run go on. The flag is checked after each measurement
    as well, so an interrupt can never be lost."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupted.clear()

    def handler(signum: int, frame: object) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    old_int = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)


def _container_spec(
    exp: Experiment, cfg: Configuration, opts: MatrixOptions, run_id: str
) -> ContainerSpec:
    engine = get_engine(cfg.engine)
    port = free_port()
    if opts.local_engine:
        # The engine on this host: it binds the free port itself, on loopback only.
        argv = engine.server_argv(cfg, exp, host="127.0.0.1", port=port)
        return ContainerSpec(
            image=exp.image_for(cfg).ref,
            entrypoint=argv[:1],
            command=argv[1:],
            container_port=port,
            host_port=port,
            gpus=exp.image_for(cfg).device == "cuda",
            ipc_host=False,
            name=f"specbench-{run_id}-{cfg.name}",
        )
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
    # the emulator logs as many ranks as the experiment runs (its start-up record says so)
    argv += ["--tensor-parallel", str(exp.tensor_parallel)]
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


def launch_record(
    engine: Engine,
    cfg: Configuration,
    exp: Experiment,
    spec: ContainerSpec,
    launcher: Literal["docker", "process"],
    load_log: str,
    *,
    local_engine: bool = False,
) -> LaunchRecord:
    """What was started for ``cfg``, recorded into its payloads when it ran: the argv and
    ``docker run`` line of the very ``ContainerSpec`` the launcher was given, and the admission
    cap the engine logged at start (else the one its flag sets). A container's argv is its
    entrypoint + command (the emulator image's entrypoint is implicit: see ``docker_run``)."""
    admission = None
    logged = engine.admission_from_log(load_log)
    if logged is not None:
        admission = AdmissionCap(cap=logged[0], source=f"engine log: {logged[1]}")
    elif engine.admission_flag is not None:
        value = flag_value(cfg.args, engine.admission_flag)
        if value is not None and value.isdigit() and int(value) > 0:
            admission = AdmissionCap(cap=int(value), source=f"flag {engine.admission_flag}")
    return LaunchRecord(
        launcher=launcher,
        image=spec.image if launcher == "docker" else None,
        server_argv=engine.server_argv(cfg, exp),
        argv=[*spec.entrypoint, *spec.command]
        if launcher == "docker"
        else ProcessLauncher(engine=local_engine).argv(spec),
        docker_run=spec.run_line() if launcher == "docker" else None,
        admission=admission,
    )


def _what_ran(
    ctx: RunContext, cfg: Configuration, spec: ContainerSpec, load_log: str
) -> tuple[LaunchRecord, ServedModels | None]:
    """The launch record (with the engine package a local process ran) and the hashed model
    folders of ``cfg``'s server; no files for the emulator, which reads none."""
    exp, opts = ctx.exp, ctx.opts
    engine = get_engine(cfg.engine)
    launch = launch_record(
        engine, cfg, exp, spec, opts.launcher, load_log, local_engine=opts.local_engine
    )
    if opts.emulated:
        return launch, None
    if opts.local_engine:
        launch = launch.model_copy(update={"engine_install": engine_install(cfg.engine)})
    keys = [exp.target_key_for(cfg), *([cfg.draft_model] if cfg.draft_model else [])]
    folders = {k: model_folder(exp, k, opts.model_cache, opts.local_engine) for k in keys}
    return launch, ctx.served.served(exp, cfg, folders)


def level_window(
    server: Server,
    mark: int,
    patterns: tuple[LogPattern, ...],
    wait_s: float | None,
    *,
    poll_s: float = 0.25,
    slack_s: float = 2.0,
) -> str:
    """The log lines of one measured level: from ``mark`` (its start) until each periodic stats
    line in ``patterns`` has been logged once after it, waiting at most one stats interval
    (``wait_s`` plus ``slack_s``). An engine that logs its graph use and acceptance length every
    10 s logs nothing inside a window of a few seconds; the record after it covers the window's
    last steps (and no later level's: the next level starts after it)."""
    deadline = time.monotonic() + (wait_s or 0.0) + slack_s
    while True:
        window = server.log_text()[mark:]
        lines = window.splitlines()
        if (
            not wait_s
            or all(any(p.search(line) for line in lines) for p in patterns)
            or not server.alive()
            or time.monotonic() > deadline
        ):
            return window
        time.sleep(poll_s)


#: how long a server whose requests stopped being answered is watched for its exit: Docker
#: reports a killed container's exit a moment after its connections broke, its port proxy
#: accepting connections (and closing them) meanwhile (issue 38, fault 6). Up to 15 s: with two
#: vLLM CPU servers on two cores, a SIGKILLed one was still "running" to Docker 3 s after its
#: streams broke and again 3 s after the next level's first request (the engine tier's kill in
#: two lanes, 2026-12-07); the wait ends as soon as the exit shows, and a server that is alive
#: costs it only on a path that already failed.
EXIT_GRACE_S = 15.0


def _exited(server: Server, wait_s: float, poll_s: float = 0.1) -> bool:
    """Whether ``server`` has exited, watched for up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while server.alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def _nothing_answered(payload: Payload) -> bool:
    """The level's last iteration had no HTTP answer to any request (a server that is gone)."""
    last = payload.evidence.iterations[-1].requests if payload.evidence.iterations else []
    return bool(last) and all(r.http_status is None and r.error for r in last)


def _exited_line(name: str, server: Server, k: int) -> str:
    return f"{name}: server exited (code {server.exit_code()}) during the sweep (c={k})"


@dataclass(frozen=True)
class RunContext:
    """What every configuration of one matrix run shares."""

    exp: Experiment
    opts: MatrixOptions
    arts: Artifacts
    launcher: Launcher
    hardware: Hardware
    run_id: str
    prompt_seed: int
    warmup: int
    iterations: int
    progress: ProgressBar
    telemetry: TelemetryFactory
    #: the experiment's prompt set, read and checked once before the run wrote anything (None:
    #: the synthetic workload)
    prompt_set: PromptSet | None = None
    #: servers started before the loop (MatrixOptions.prestart), by configuration name
    prestarted: dict[str, Server] = field(default_factory=dict)
    #: the spec each prestarted server was started from (its launch record is that spec's)
    prestarted_specs: dict[str, ContainerSpec] = field(default_factory=dict)
    #: each model folder hashed once per run (ServedModels in every payload)
    served: ServedCache = field(default_factory=ServedCache)
    #: the accuracy task every configuration answers after its levels (None: no gate)
    accuracy: AccuracyTask | None = None


def prestart_servers(ctx: RunContext, configs: list[Configuration]) -> None:
    """Start the emulators of ``configs`` at once (MatrixOptions.prestart): each start-up (its
    Python imports and the emulated load time) overlaps the others instead of adding up. An
    idle emulator uses no CPU, so measuring one configuration at a time is unchanged. Each
    logs to ``<log>.starting`` until its configuration runs; that log becomes its own."""
    for cfg in configs:
        if cfg.synthetic_of is not None:  # its knob needs its source measured first
            continue
        spec = _container_spec(ctx.exp, cfg, ctx.opts, ctx.run_id)
        starting = ctx.arts.log(cfg.name).with_suffix(".starting")
        ctx.prestarted[cfg.name] = ctx.launcher.start(spec, starting)
        ctx.prestarted_specs[cfg.name] = spec


def stop_prestarted(ctx: RunContext) -> None:
    """Stop the prestarted servers that never ran (an interrupted or failed matrix)."""
    for name, server in list(ctx.prestarted.items()):
        server.stop()
        remove_file(ctx.arts.log(name).with_suffix(".starting"), root=ctx.arts.root)
    ctx.prestarted.clear()
    ctx.prestarted_specs.clear()


def with_env(spec: ContainerSpec, env: dict[str, str]) -> ContainerSpec:
    """``spec`` with ``env`` passed to the server by value (a control's engine knob)."""
    if not env:
        return spec
    return dataclasses.replace(spec, env=(*spec.env, *sorted(env.items())))


def run_configuration(ctx: RunContext, cfg: Configuration, outcome: Outcome) -> int:
    """Start, check, sweep, stop one configuration. Returns the iterations done.

    One telemetry sampler runs from readiness to the end of the sweep; each payload gets it cut
    to its own measured iteration windows."""
    run = _start(ctx, cfg)
    stopping = False
    try:
        _wait_ready(ctx, run)
        loaded = _read_load_log(ctx, run)
        return _sweep_and_probe(ctx, run, loaded, outcome)
    except BaseException:
        stopping = True
        raise
    finally:
        _stop_and_keep_log(ctx, run, stopping=stopping)


@dataclass(frozen=True)
class _Started:
    """A configuration's server and what it was started from, for every later step."""

    #: the configuration as started (a control's with its knob's flags set)
    cfg: Configuration
    made: Control
    engine: Engine
    spec: ContainerSpec
    argv: list[str]
    server: Server
    prestarted: bool
    log_path: Path
    #: the log of an earlier attempt (a resumed configuration), kept ahead of this one's
    earlier: str


@dataclass(frozen=True)
class _Loaded:
    """What the server's load log says ran: the evidence every payload of it carries."""

    version: str
    launch: LaunchRecord
    served: ServedModels | None
    mode: SpeculationMode
    cpu_kernel: CpuKernel | None
    tensor_parallel: TensorParallelEvidence


def _start(ctx: RunContext, cfg: Configuration) -> _Started:
    """Start ``cfg``'s server, or take the one prestarted for it (which ran its own spec)."""
    exp = ctx.exp
    engine = get_engine(cfg.engine)
    made = control(ctx.arts, exp, cfg)  # a SYNTHETIC ACCEPTANCE control: its engine's knob set
    cfg = made.cfg
    spec = with_env(_container_spec(exp, cfg, ctx.opts, ctx.run_id), made.env)
    log_path = ctx.arts.log(cfg.name)
    # A resumed configuration: the earlier attempt's log (the evidence of why it stopped) is
    # kept, and this server's log follows it (a process launcher writes log_path live).
    earlier = read_log(log_path) if exists(log_path) else ""
    argv = engine.server_argv(cfg, exp)
    prestarted = ctx.prestarted.pop(cfg.name, None)
    spec = ctx.prestarted_specs.pop(cfg.name, spec)  # a prestarted server ran its own spec
    waiting = "waiting for its server" if prestarted else "starting server"
    ctx.progress.say(f"{cfg.name}: {waiting}")
    server: Server = prestarted or ctx.launcher.start(spec, log_path)
    return _Started(
        cfg, made, engine, spec, argv, server, prestarted is not None, log_path, earlier
    )


def _wait_ready(ctx: RunContext, run: _Started) -> None:
    """Wait for the server's health and ready endpoints; a server that never got ready is
    refused with what its log shows (skipped draft tensors, a capture that never ended), so it
    is not read as a timing accident."""
    cfg, engine, server = run.cfg, run.engine, run.server
    try:
        secs = wait_ready(
            server,
            paths=(engine.health_path, engine.ready_path),
            timeout_s=ctx.opts.ready_timeout_s or ctx.exp.server.ready_timeout_s,
            what=cfg.name,
        )
    except RunError as err:
        why = why_not_ready(
            server.log_text(),
            engine.load_patterns,
            engine.graph_patterns,
            speculative=cfg.speculative,
            warmup=engine.warmup_patterns,
        )
        if not why:
            raise
        found = "".join(f"\n  - {w}" for w in why)
        raise RunError(f"{err}\nthe server log also shows:{found}") from err
    ready = "(started with the others)" if run.prestarted else f"after {secs:.1f} s"
    ctx.progress.log(f"{cfg.name}: ready {ready}")


def _read_load_log(ctx: RunContext, run: _Started) -> _Loaded:
    """Read the load log once the server is ready: the engine version, the launch record and
    served models, the speculation mode, the CPU kernel and the tensor-parallel size it logged."""
    cfg, engine = run.cfg, run.engine
    load_log = run.server.log_text()
    version = engine.version_from_log(load_log) or ctx.exp.image_for(cfg).version
    launch, served = _what_ran(ctx, cfg, run.spec, load_log)
    launch = launch.model_copy(update={"env": dict(run.spec.env) or None})
    mode = speculation_mode(cfg, load_log, run.made.env)
    cpu_kernel = cpu_kernel_from_log(load_log)
    logged_tp = engine.tensor_parallel_from_log(load_log)
    tensor_parallel = TensorParallelEvidence(
        size=logged_tp[0] if logged_tp else None,
        configured=ctx.exp.tensor_parallel,
        line=logged_tp[1] if logged_tp else None,
    )
    if cpu_kernel is not None:
        ctx.progress.log(f"{cfg.name}: CPU kernel build {cpu_kernel.library} ({cpu_kernel.isa})")
    return _Loaded(version, launch, served, mode, cpu_kernel, tensor_parallel)


def _tokenizer_folder(ctx: RunContext, cfg: Configuration) -> Path | None:
    """The target's tokenizer under the model cache, where it is there (the emulator: none)."""
    if ctx.opts.emulated:
        return None
    tok_dir = Path(ctx.opts.model_cache) / ctx.exp.target_for(cfg).dirname
    return tok_dir if (tok_dir / "tokenizer.json").exists() else None


def _sweep_and_probe(ctx: RunContext, run: _Started, loaded: _Loaded, outcome: Outcome) -> int:
    """The sweep and the probes after it under one telemetry sampler, stopped however they
    end. Returns the iterations done."""
    draft = ctx.exp.draft_for(run.cfg)
    tokenizer = _tokenizer_folder(ctx, run.cfg)
    started = ctx.telemetry()
    try:
        if started.sampler is None and not ctx.opts.emulated:
            ctx.progress.log(f"{run.cfg.name}: {started.reason}")
        how = _HowMeasured(
            draft.hf_id if draft else None, tokenizer, started, _stats_wait(ctx, run)
        )
        done, to_probe = _sweep_levels(ctx, run, loaded, how, outcome)
        # Every level measured: now the logprob probes and the accuracy task, which no
        # measurement can suffer from.
        _after_levels(ctx, run.cfg, to_probe)
        return done
    finally:
        if started.sampler is not None:
            started.sampler.stop()


@dataclass(frozen=True)
class _HowMeasured:
    """What every level of one configuration is measured with, besides its concurrency."""

    draft_hf_id: str | None
    tokenizer: Path | None
    telemetry: SamplerStart
    #: how long a level waits for the engine's periodic stats lines (None: not at all)
    stats_wait: float | None


def _stats_wait(ctx: RunContext, run: _Started) -> float | None:
    """A real GPU engine's periodic stats lines (graph use, acceptance length) come after a
    short window: wait one interval. Not on a CPU image (the engine tier): no graphs to see,
    and up to 12 s a level of CI time for an acceptance-length cross-check."""
    on_gpu = ctx.exp.image_for(run.cfg).device == "cuda"
    return run.engine.stats_interval_s if on_gpu and not ctx.opts.emulated else None


def _sweep_levels(
    ctx: RunContext, run: _Started, loaded: _Loaded, how: _HowMeasured, outcome: Outcome
) -> tuple[int, list[tuple[int, RunSpec, Measured]]]:
    """Measure, judge and write every concurrency level in turn (a level an interrupted run
    finished is kept, never measured again). Returns the iterations done and the levels to
    probe once the sweep is over."""
    exp, opts, arts, progress, cfg = ctx.exp, ctx.opts, ctx.arts, ctx.progress, run.cfg
    expected = cfg.expect_invalid is not None
    prompt_set = ctx.prompt_set
    # each category of a prompt set is measured as its own windows
    per_level = (ctx.warmup + ctx.iterations) * (len(prompt_set.categories()) if prompt_set else 1)
    done = 0
    to_probe: list[tuple[int, RunSpec, Measured]] = []
    for k in exp.levels_for(cfg):
        earlier = arts.finished_payloads(cfg.name, [k], expected) if opts.resume else None
        if earlier is not None:
            # An interrupted configuration resumes at the level in flight: finished
            # levels are never measured (or rewritten) again.
            outcome.payloads.append(arts.payload(cfg.name, k))
            fold_verdict(outcome, k, earlier[0])
            done += per_level
            progress.advance(per_level)
            progress.log(f"{cfg.name} c={k}: finished earlier, skipped (--resume)")
            continue
        progress.say(f"{cfg.name} c={k}")
        run_spec = _level_spec(ctx, run, loaded, how, k)
        measured, window = _measure_one_level(ctx, run, run_spec, how, k)
        done += per_level
        payload = _judged(run, loaded, measured.payload, window)
        outcome.payloads.append(arts.write_payload(cfg.name, k, payload))
        to_probe.append((k, run_spec, measured._replace(payload=payload)))
        _record_verdict(ctx, cfg.name, k, payload, outcome)
        if _exited(run.server, EXIT_GRACE_S if _nothing_answered(payload) else 0.0):
            raise RunError(_exited_line(cfg.name, run.server, k))
    return done, to_probe


def _level_spec(
    ctx: RunContext, run: _Started, loaded: _Loaded, how: _HowMeasured, k: int
) -> RunSpec:
    """The measurement of level ``k``: the workload and what ran, as its payload records them."""
    exp, cfg = ctx.exp, run.cfg
    return RunSpec(
        engine=cfg.engine,
        base_url=run.server.base_url,
        hf_id=exp.target_for(cfg).hf_id,
        served_model=exp.served_model,
        quantization=exp.quantization,
        hardware=ctx.hardware,
        spec_method=cfg.method,
        spec_num_tokens=cfg.spec_num_tokens,
        spec_draft_model=how.draft_hf_id,
        prompt_tokens=exp.workload.prompt_tokens,
        max_tokens=exp.workload.max_tokens,
        concurrency=k,
        warmup=ctx.warmup,
        iterations=ctx.iterations,
        tokenizer=how.tokenizer,
        request_timeout_s=exp.workload.request_timeout_s,
        stall_timeout_s=exp.workload.stall_timeout_s,
        simulated=ctx.opts.emulated,
        run_id=ctx.run_id,
        config_name=cfg.name,
        command=run.argv,
        engine_version=loaded.version,
        # as the engine logged it; the experiment's value where the log said nothing
        tensor_parallel=loaded.tensor_parallel.size or exp.tensor_parallel,
        prefix_caching=exp.prefix_caching.get(cfg.engine),
        gpu_mem_util=exp.gpu_mem_util.get(cfg.engine),
        command_snippet=shlex.join(run.argv),
        model_revision=exp.target_for(cfg).revision,
        prompt_seed=ctx.prompt_seed,
        logprob_probes=MAX_PROBES
        if exp.workload.logprob_probes is None
        else exp.workload.logprob_probes,
        toy_model=exp.toy_model,
        prompt_set=ctx.prompt_set,
        enable_thinking=exp.workload.enable_thinking,
    )


def _measure_one_level(
    ctx: RunContext, run: _Started, run_spec: RunSpec, how: _HowMeasured, k: int
) -> tuple[Measured, str]:
    """Measure one level, and the server log lines it covers. A failure of a server that has
    exited says so; an interrupted measurement is never written."""
    server = run.server
    mark = len(server.log_text())  # the lines logged from here on are this level's
    try:
        measured = measure_level(
            run_spec,
            ctx.progress,
            telemetry=how.telemetry.sampler,
            no_telemetry_reason=how.telemetry.reason,
        )
    except SpecbenchError as err:
        if _exited(server, EXIT_GRACE_S):  # what the server's answers meant
            raise RunError(f"{_exited_line(run.cfg.name, server, k)}: {err}") from None
        raise
    if interrupted.is_set():  # never write a payload whose measurement was cut short
        raise KeyboardInterrupt
    patterns = run.engine.periodic_patterns(run.cfg)
    return measured, level_window(server, mark, patterns, how.stats_wait)


def _judged(run: _Started, loaded: _Loaded, payload: Payload, window: str) -> Payload:
    """The level's payload judged against the server's log (load findings, graph use, restarts,
    the acceptance lengths it logged) and carrying what ran."""
    cfg, engine, server = run.cfg, run.engine, run.server
    log = server.log_text()
    findings = scan_log(log, engine.load_patterns, cfg.speculative)
    graphs = None
    if engine.graph_patterns is not None:
        graphs = graph_check(
            log,
            window,
            engine.graph_patterns,
            speculative=cfg.speculative,
            required=cfg.require_cuda_graphs,
            args=cfg.args,
        )
    payload = judge(
        payload,
        speculative=cfg.speculative,
        findings=findings,
        restarts=server.restarts(),
        graphs=graphs,
        load_checks=tuple(
            dict.fromkeys(p.code for p in engine.load_patterns if p.severity == "invalid")
        ),
        window_accept_lengths=accept_lengths(window, engine.accept_length_pattern)
        if cfg.speculative
        else [],
        cpu_kernel=loaded.cpu_kernel,
        tensor_parallel=loaded.tensor_parallel,
        resolved=resolved_settings(log, engine.resolved_patterns),
    )
    evidence = payload.evidence.model_copy(
        update={
            "launch": loaded.launch,
            "served": loaded.served,
            "speculation": loaded.mode,
            "synthetic": run.made.record,
        }
    )
    return payload.model_copy(update={"evidence": evidence})


def fold_verdict(outcome: Outcome, k: int, payload: Payload) -> bool:
    """Fold level ``k``'s verdict (its payload's validity and invalid reasons) into the
    configuration's outcome: measured now or, on ``--resume``, kept from an earlier call."""
    valid = payload.evidence.validity.valid
    outcome.valid = valid if outcome.valid is None else (outcome.valid and valid)
    for r in payload.evidence.validity.reasons:
        line = f"c={k} {r.code}: {r.message}"
        if r.severity == "invalid" and line not in outcome.reasons:
            outcome.reasons.append(line)
    return valid


def _record_verdict(ctx: RunContext, name: str, k: int, payload: Payload, outcome: Outcome) -> None:
    """Fold a written level's verdict into the configuration's outcome, and say it."""
    valid = fold_verdict(outcome, k, payload)
    verdict = "valid" if valid else "INVALID"
    ctx.progress.log(f"{name} c={k}: {payload.tokSOut:.2f} tok/s, {verdict}")


def _after_levels(
    ctx: RunContext, cfg: Configuration, to_probe: list[tuple[int, RunSpec, Measured]]
) -> None:
    """After every level: each level's logprob probes, then the accuracy task (issue 48),
    asked once, its answers kept in the lowest level's payload."""
    progress, arts = ctx.progress, ctx.arts
    written: list[tuple[int, Payload]] = []
    for k, run_spec, measured in to_probe:
        progress.say(f"{cfg.name} c={k}: logprob probes")
        probed = probe_level(run_spec, measured)
        arts.write_payload(cfg.name, k, probed)
        written.append((k, probed))
        if probed.evidence.logprob_probes and probed.evidence.logprob_probes.note:
            progress.log(f"{cfg.name} c={k}: {probed.evidence.logprob_probes.note}")
    task = ctx.accuracy
    if task is None or not written:
        return
    k, payload = min(written, key=lambda kp: kp[0])
    base_url = to_probe[0][1].base_url
    progress.say(f"{cfg.name}: accuracy task {task.spec.name} ({len(task.items)} questions)")
    record = answer_task(base_url, ctx.exp.served_model, task, ctx.exp.workload.request_timeout_s)
    right = sum(i.correct for i in record.items)
    progress.log(f"{cfg.name}: accuracy task {right}/{len(record.items)} correct")
    evidence = payload.evidence.model_copy(update={"accuracy": record})
    arts.write_payload(cfg.name, k, payload.model_copy(update={"evidence": evidence}))


def _stop_and_keep_log(ctx: RunContext, run: _Started, *, stopping: bool) -> None:
    """Stop the server and write its log, scrubbed, after the earlier attempt's. On a full disk
    the error that stopped the configuration (``stopping``) is the one reported."""
    name, server, log_path = run.cfg.name, run.server, run.log_path
    ctx.progress.say(f"{name}: stopping server")
    server.stop()
    text = scrub(server.log_text())
    if ctx.opts.emulated:
        text = f"# {SIMULATED_BANNER}\n{text}"
    if run.earlier.strip():
        text = f"{run.earlier.rstrip()}\n# --- resumed at {utc_now()} (--resume) ---\n{text}"
    try:
        write_text(log_path, text, root=ctx.arts.root)
    except WriteError:
        # a full disk: the error that stopped the configuration (a payload it could not
        # write) is the one to report; the log keeps what the launcher wrote live
        if not stopping:
            raise
    if run.prestarted:
        remove_file(log_path.with_suffix(".starting"), root=ctx.arts.root)
