"""Run every configuration of an experiment: one server start per configuration
(``_configuration``), every concurrency level measured through ``bench.measure.measure``, each
payload judged and written atomically; the lock, hardware, provenance, weights and status files
(bench.schema models); logs kept, SHA256SUMS written, resumable.

Ctrl-C (or SIGTERM) stops the running server and leaves every finished artifact intact.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
import sys
from pathlib import Path

from bench.core import (
    SIMULATED_BANNER,
    InputError,
    RunError,
    SpecbenchError,
    WriteError,
    ensure_dir,
    exists,
    read_json_model,
    read_log,
    read_text,
    utc_now,
    write_text,
)
from bench.engines._fatal import known_causes
from bench.engines._scrub import scrub
from bench.engines.upstream import SUITE_RECORD_ENV, suite_record_path
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
from bench.matrix._configuration import (
    RunContext,
    fold_verdict,
    prestart_servers,
    run_configuration,
    sigterm_as_interrupt,
    stop_prestarted,
)
from bench.matrix._launch import DockerLauncher, Launcher, ProcessLauncher
from bench.matrix._models_present import check_models_present
from bench.matrix._options import (
    EMULATED_NO_TELEMETRY,
    MatrixOptions,
    MatrixResult,
    Outcome,
    TelemetryFactory,
)
from bench.matrix._plan import plan_record
from bench.matrix._resume import (
    Interrupted,
    check_resume,
    hold_folder,
    interrupted_message,
)
from bench.measure import (
    ProgressBar,
    accuracy_task_file,
    experiment_prompt_set,
    read_accuracy_task,
)
from bench.schema import (
    PLAN_FILE,
    Configuration,
    ConfigurationStatus,
    Experiment,
    Hardware,
    ModelBytes,
    Payload,
    PinnedExperiment,
    RunLock,
    RunOverrides,
    RunStatus,
    SuiteRecord,
    WeightsFile,
)

# -- helpers --------------------------------------------------------------------------------


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _host_hardware() -> Hardware:
    """Hardware of this host (bench.machine); a CPU_ONLY record where no NVIDIA GPU is."""

    return capture_hardware(allow_no_gpu=True)


def _copy_suite_record(exp: Experiment, arts: Artifacts) -> None:
    """The SGLang upstream-suite record travels with the artifacts when it exists, so the report
    can name the tests that passed on the patched release; absent, the report says so."""
    src = suite_record_path()
    if arts.suite_record.exists() or not exists(src):
        return
    if any(c.engine == "sglang" for c in exp.configurations):
        # checked as the report will read it: a folder, a binary or another file named by
        # $SPECBENCH_SGLANG_SUITE_RECORD is refused here (exit 2), not copied into the run
        read_json_model(src, SuiteRecord, source=f"{SUITE_RECORD_ENV} ({src})")
        write_text(arts.suite_record, read_text(src, what="suite record"), root=arts.root)


def _run_provenance(
    exp: Experiment, opts: MatrixOptions, hw: Hardware, experiment_path: Path | None
) -> Provenance:
    """Provenance (bench.machine provenance): versions, git SHA, images as pinned here."""

    # engines started as local processes ran no image: each payload's launch record names the
    # package Python found and the files that differ from its wheel instead
    images = [
        ImageRef(
            ref=(opts.emulator_image if opts.emulated else img.ref),
            engine=img.engine,
            digest=None if img.digest == "unresolved" or img.build else img.digest,
            imageId=img.local_image_id,
            upstreamVersion=img.version,
        )
        for img in exp.images.values()
        if not opts.local_engine
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
    if opts.local_engine:
        note = "engines ran as local processes (--local-engine), no image: see each payload's "
        note += "evidence.launch.engine_install"
        rec = rec.model_copy(update={"notes": [*rec.notes, note]})
    return rec


def _lock(
    exp: Experiment, opts: MatrixOptions, run_id: str, pinned: PinnedExperiment | None
) -> RunLock:
    seed = exp.workload.prompt_seed
    return RunLock(
        run_id=run_id,
        prompt_seed=seed if seed is not None else secrets.randbelow(2**31),
        created_at=utc_now(),
        simulated=opts.emulated,
        launcher=opts.launcher,
        local_engine=opts.local_engine,
        overrides=RunOverrides(
            warmup=opts.warmup, iterations=opts.iterations, time_scale=opts.time_scale
        ),
        unresolved_pins=exp.unresolved_pins(),
        pins=pinned.pins if pinned is not None else [],
        pins_lock=pinned.lock_path if pinned is not None else None,
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
    pinned: PinnedExperiment | None = None,
) -> MatrixResult:
    """``_run_matrix`` holding ``opts.out`` (one matrix per folder); Ctrl-C or SIGTERM ends in
    ``Interrupted`` (exit 130), which says what was kept and the command that resumes."""
    with contextlib.ExitStack() as hold:
        try:
            return _run_matrix(
                exp, opts, hold, launcher, hardware, experiment_path, telemetry, pinned
            )
        except KeyboardInterrupt:
            arts = Artifacts(opts.out)
            try:
                status = read_json_model(arts.status, RunStatus) if arts.status.is_file() else None
            except InputError:
                status = None
            names = [c.name for c in exp.select(opts.only or None)]
            raise Interrupted(interrupted_message(status, names, opts.out)) from None


def _run_matrix(
    exp: Experiment,
    opts: MatrixOptions,
    hold: contextlib.ExitStack,
    launcher: Launcher | None,
    hardware: Hardware | None,
    experiment_path: Path | None,
    telemetry: TelemetryFactory | None,
    pinned: PinnedExperiment | None,
) -> MatrixResult:
    """Run the selected configurations and write the artifacts to ``opts.out``.

    ``pinned``: the experiment with its pins lock applied (``exp`` is its experiment); where each
    pin came from goes into the run's lock and so into the report.

    ``telemetry`` starts the GPU sampler of one configuration; by default NVML on real runs and
    none when emulated (the emulator's payloads must not carry the host GPU's numbers)."""
    selected = exp.select(opts.only or None)
    if not opts.emulated and not opts.allow_unpinned:
        _refuse_unpinned(exp, pinned)
    # the prompt set is read and checked against its pin before anything is written (a dataset
    # prompt set: from where the models stage fetched it, under --model-cache)
    prompt_set = experiment_prompt_set(exp.workload.prompt_set, Path(opts.model_cache))
    # the accuracy task likewise (issue 48), read once for every configuration; an emulated run
    # (no models stage fetched anything) leaves out a fetched task that is not there
    accuracy = read_accuracy_task(
        exp.workload.accuracy, Path(opts.model_cache), missing_ok=opts.emulated
    )
    if launcher is None:
        launcher = _default_launcher(exp, selected, opts)
    arts = Artifacts(opts.out)
    arts.check_before_writing()
    ensure_dir(opts.out, "--out")
    hold.enter_context(hold_folder(opts.out))
    run_id = opts.run_id or new_run_id()
    lock, opts, earlier = _begin_or_resume(exp, opts, arts, run_id, pinned, experiment_path)
    hw = _write_host_records(exp, opts, arts, hardware, experiment_path)
    warmup = opts.warmup if opts.warmup is not None else exp.workload.warmup
    iterations = opts.iterations if opts.iterations is not None else exp.workload.iterations
    # a prompt set's categories are each measured as their own windows
    per_level = (warmup + iterations) * (len(prompt_set.categories()) if prompt_set else 1)
    total = sum(len(exp.levels_for(c)) * per_level for c in selected)
    ctx = RunContext(
        exp,
        opts,
        arts,
        launcher,
        hw,
        lock.run_id,
        lock.prompt_seed,
        warmup,
        iterations,
        ProgressBar(total, enabled=opts.show_progress, eta=True),
        telemetry if telemetry is not None else _default_telemetry(opts.emulated),
        prompt_set,
        accuracy=accuracy,
    )
    outcomes = _run_selected(ctx, selected, per_level, earlier)
    return MatrixResult(opts.out, lock.run_id, outcomes)


def _refuse_unpinned(exp: Experiment, pinned: PinnedExperiment | None) -> None:
    """A real run that could be published names every image digest and model revision."""
    pins = exp.unresolved_pins()
    if pins:
        where = f" or its pins lock {pinned.lock_path}" if pinned is not None else ""
        raise InputError(
            "experiment",
            "real runs need every image digest and model revision pinned; unresolved in "
            f"the experiment{where}: "
            + "; ".join(pins)
            + " (the first `make provision` resolves them into the lock; or pass "
            "--allow-unpinned to run by tag, a run that cannot be published)",
        )


def _default_launcher(
    exp: Experiment, selected: list[Configuration], opts: MatrixOptions
) -> Launcher:
    """Docker, or local processes (``--launcher process``); a real run first checks that the
    models of ``selected`` are downloaded, before anything is written."""
    if not opts.emulated:
        check_models_present(exp, selected, opts.model_cache, opts.local_engine)
    return (
        ProcessLauncher(engine=opts.local_engine)
        if opts.launcher == "process"
        else DockerLauncher()
    )


def _begin_or_resume(
    exp: Experiment,
    opts: MatrixOptions,
    arts: Artifacts,
    run_id: str,
    pinned: PinnedExperiment | None,
    experiment_path: Path | None,
) -> tuple[RunLock, MatrixOptions, dict[str, ConfigurationStatus]]:
    """The run's lock, and the options and earlier statuses it goes on with. A new run writes
    its lock and plan; ``--resume`` takes the earlier lock, refusing another experiment, other
    pins or another emulate mode, and goes on with the options the run began with."""
    earlier: dict[str, ConfigurationStatus] = {}
    if arts.lock.exists():
        old = read_json_model(arts.lock, RunLock)
        if not opts.resume:
            raise InputError(
                "--out", f"{opts.out} already holds a run; pass --resume or a new --out"
            )
        if old.experiment.lock_dict() != exp.lock_dict() or old.simulated != opts.emulated:
            raise InputError(
                "--resume",
                f"the experiment, its pins (or emulate mode) differ from those {opts.out} ran "
                "with: resume only the same run; start a new one with another --out (Ansible: "
                "-e benchmark_rerun=true)",
            )
        opts = check_resume(old, exp, opts)  # the warmup, iterations... it began with
        lock = old
        if arts.status.is_file():
            # configurations this call does not run (--only) keep what the earlier calls said
            earlier = read_json_model(arts.status, RunStatus).configurations
    else:
        lock = _lock(exp, opts, run_id, pinned)
        arts.write_model(arts.lock, lock)
        # plan's wall-time estimates, for the report's artifact appendix (issue 48)
        plan = plan_record(exp, experiment_path, opts.model_cache)
        arts.write_model(arts.root / PLAN_FILE, plan)
    return lock, opts, earlier


def _write_host_records(
    exp: Experiment,
    opts: MatrixOptions,
    arts: Artifacts,
    hardware: Hardware | None,
    experiment_path: Path | None,
) -> Hardware:
    """hardware.json, provenance.json, the suite record and weights.json, each written once (a
    resumed run keeps what its first call wrote). Returns the hardware as written."""
    if not arts.hardware.exists():
        hw = hardware or _host_hardware()
        arts.write_model(arts.hardware, hw)
    hw = read_json_model(arts.hardware, Hardware)
    if not arts.provenance.exists():
        arts.write_model(arts.provenance, _run_provenance(exp, opts, hw, experiment_path))
    _copy_suite_record(exp, arts)
    if not opts.emulated and not arts.weights.exists():
        measured = checkpoint_bytes(exp, Path(opts.model_cache))
        if measured:
            arts.write_model(arts.weights, measured)
    return hw


def _run_selected(
    ctx: RunContext,
    selected: list[Configuration],
    per_level: int,
    earlier: dict[str, ConfigurationStatus],
) -> list[Outcome]:
    """Run each selected configuration in turn. However the run ends (an interrupt, a full
    disk), the servers prestarted for it are stopped and status.json and SHA256SUMS say what
    it did."""
    opts = ctx.opts
    outcomes: list[Outcome] = []
    stopped: BaseException | None = None
    try:
        with sigterm_as_interrupt(), ctx.progress:
            _note_no_accuracy(ctx)
            if opts.prestart and opts.emulated and opts.launcher == "process":
                prestart_servers(ctx, [c for c in selected if not _finished_earlier(ctx, c)])
            for cfg in selected:
                _run_one(ctx, cfg, per_level, outcomes)
    except BaseException as err:
        stopped = err
        raise
    finally:
        stop_prestarted(ctx)
        _write_status(ctx, outcomes, earlier, stopping=stopped is not None)
    return outcomes


def _note_no_accuracy(ctx: RunContext) -> None:
    """An emulated run whose fetched accuracy task is not there goes on without it: say so."""
    spec = ctx.exp.workload.accuracy
    if ctx.accuracy is None and spec is not None:
        ctx.progress.log(
            f"SIMULATED run: the accuracy task {spec.name} is not asked: the models stage "
            f"fetches it into {accuracy_task_file(spec, Path(ctx.opts.model_cache))}, and it "
            "is not there"
        )


def _finished_earlier(ctx: RunContext, cfg: Configuration) -> list[Payload] | None:
    """With ``--resume``, every level's payload of ``cfg`` when all are there (nothing to
    run); else None."""
    if not ctx.opts.resume:
        return None
    return ctx.arts.finished_payloads(
        cfg.name, ctx.exp.levels_for(cfg), accept_invalid=cfg.expect_invalid is not None
    )


def _run_one(ctx: RunContext, cfg: Configuration, per_level: int, outcomes: list[Outcome]) -> None:
    """Run one configuration, its outcome added to ``outcomes`` first (an interrupt leaves it
    'interrupted'). A failure is recorded and the run goes on; a full disk stops the run, as
    the next configuration would fail the same way."""
    arts, progress = ctx.arts, ctx.progress
    levels = ctx.exp.levels_for(cfg)
    expected = cfg.expect_invalid is not None
    earlier = _finished_earlier(ctx, cfg)
    if earlier is not None:
        payloads = [arts.payload(cfg.name, k) for k in levels]
        kept = Outcome(cfg.name, "skipped", payloads, expected_invalid=expected)
        # its verdict is its payloads' (the GPU four-way's resumed calls once wrote valid: null)
        for k, read in zip(levels, earlier, strict=True):
            fold_verdict(kept, k, read)
        outcomes.append(kept)
        progress.advance(len(levels) * per_level)
        progress.log(f"{cfg.name}: finished earlier, skipped (--resume)")
        return
    outcome = Outcome(cfg.name, "interrupted", expected_invalid=expected)
    outcomes.append(outcome)
    for why in arts.distrusted(cfg.name, levels) if ctx.opts.resume else []:
        outcome.reasons.append(why)  # edited by hand: never kept (issue 38)
        progress.log(f"{cfg.name}: {why}")
    done_units = 0
    try:
        done_units = run_configuration(ctx, cfg, outcome)
        outcome.status = "done"
    except WriteError as err:
        outcome.status = "failed"
        outcome.reasons.append(str(err))
        raise RunError(
            f"{err}. The run stopped at {cfg.name}; every artifact written before "
            f"is intact: free space, then run again with --resume --out {ctx.opts.out}"
        ) from None
    except SpecbenchError as err:
        outcome.status = "failed"
        why = scrub(str(err))
        outcome.reasons.append(why)
        progress.log(f"{cfg.name}: FAILED: {why.splitlines()[0]}")
        # the line of the server's log that says why it died, quoted (issue 38)
        for cause in _known_causes(why, arts.log(cfg.name)):
            outcome.reasons.append(cause)
            progress.log(f"{cfg.name}: {cause}")
    finally:
        left = len(levels) * per_level - done_units
        if outcome.status == "failed" and left > 0:
            progress.advance(left)


def _write_status(
    ctx: RunContext,
    outcomes: list[Outcome],
    earlier: dict[str, ConfigurationStatus],
    *,
    stopping: bool,
) -> None:
    """status.json and SHA256SUMS. On a full disk the earlier ones stay whole, and the error
    that stopped the run (``stopping``) is the one to report."""
    arts = ctx.arts
    order = [c.name for c in ctx.exp.configurations]
    try:
        arts.write_model(
            arts.status, _status(ctx.run_id, outcomes, ctx.opts.emulated, earlier, order)
        )
        arts.write_sums()
    except WriteError:
        if not stopping:
            raise


def _known_causes(message: str, log: Path) -> list[str]:
    """bench.engines._fatal's reading of the configuration's log (written by
    run_configuration before the failure reached here), scrubbed of secrets."""
    try:
        text = read_log(log) if exists(log) else ""
    except InputError:
        text = ""
    return [scrub(c) for c in known_causes(message, text)]


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


def _status(
    run_id: str,
    outcomes: list[Outcome],
    simulated: bool,
    earlier: dict[str, ConfigurationStatus],
    order: list[str],
) -> RunStatus:
    """status.json: this call's outcomes, and for every configuration it did not run (a resume
    with --only) what the earlier calls recorded, in the experiment's order."""
    now = {
        o.name: ConfigurationStatus(
            status=o.status,
            valid=o.valid,
            expected_invalid=o.expected_invalid,
            payloads=[p.name for p in o.payloads],
            reasons=o.reasons,
        )
        for o in outcomes
    }
    merged = {**earlier, **now}
    rank = {name: i for i, name in enumerate(order)}
    return RunStatus(
        run_id=run_id,
        simulated=simulated,
        notes=[SIMULATED_BANNER] if simulated else [],
        written_at=utc_now(),
        configurations=dict(sorted(merged.items(), key=lambda kv: rank.get(kv[0], len(rank)))),
    )
