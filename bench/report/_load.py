"""Read a matrix run's artifacts folder into the report's ``RunSet``.

Payloads are the primary source (engine, method, figures, verdict) and carry what was run:
the server argv, the ``docker run`` line and the admission cap, recorded by the matrix when it
started each server (``evidence.launch``). ``experiment.lock.json`` (a ``RunLock``) gives what
payloads do not carry: the configurations' flags, deviations and concurrency levels.

Nothing here is rebuilt with today's engine adapters (the report never imports
``bench.engines``): a report rendered by a newer specbench shows the commands the run used.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.core import (
    InputError,
    Summary,
    exists,
    read_head,
    read_json_model,
    read_optional_json,
)
from bench.report._extras import extra_fields, read_plan
from bench.report._folder import Read, check_one_run, refuse_foreign_schema
from bench.report._machine import (
    cpu_kernel_table,
    hardware_tables,
    pins_table,
    provenance_tables,
    resolved_table,
    source_fields,
    telemetry_view,
    what_ran_table,
)
from bench.report._model import (
    CategoryView,
    CommandBlock,
    ConfigInfo,
    Figure,
    FileEntry,
    Reason,
    RequestOutput,
    RunSet,
    RunView,
    SuiteView,
    Unreadable,
)
from bench.report._roofline import build_roofline
from bench.report._trust import Digests, excluded, split_trusted, unvouched
from bench.schema import (
    LOCK_FILE,
    STATUS_FILE,
    Experiment,
    Hardware,
    Payload,
    RunLock,
    RunStatus,
    SuiteRecord,
    check_payload,
    read_payload,
    read_sums,
    target_of,
    workload_of,
)

_STEM = re.compile(r"^(?P<config>.+)-c(?P<c>\d+)(?:\.(?P<attempt>[A-Za-z0-9_-]+))?$")
_LOG_HINT = re.compile(r"(?i)\b(error|warn(ing)?|skip(ping|ped)?|not found|traceback|fail(ed)?)\b")
MAX_LOG_LINES = 12
#: how much of a server log the report reads (the load lines it quotes come first)
MAX_LOG_BYTES = 64 * 1024 * 1024


def _figure(s: Summary | None, samples: list[float]) -> Figure:
    if s is None:  # no valid measured iteration
        return Figure()
    return Figure(
        mean=s.mean,
        stddev=s.stddev,
        n=s.n,
        ci95_low=s.ci95_low,
        ci95_high=s.ci95_high,
        samples=tuple(samples),
    )


def _per_iteration(p: Payload, attr: str) -> list[float]:
    """Per-iteration values of one figure over the measured (non-warmup) iterations."""
    out: list[float] = []
    for it in p.evidence.iterations:
        if it.warmup:
            continue
        if attr == "ttft":
            vals = [r.ttft_ms for r in it.requests if r.ttft_ms is not None]
            if vals:
                out.append(sum(vals) / len(vals))
        else:
            v = getattr(it, attr)
            if v is not None:
                out.append(float(v))
    return out


def run_view(p: Payload, stem: str, log_lines: dict[str, list[str]] | None = None) -> RunView:
    """One payload as the report sees it."""
    m = _STEM.match(stem)
    config = p.evidence.run.config_name or (m.group("config") if m else stem)
    attempt = m.group("attempt") if m else None
    fig = p.evidence.figures
    decode_samples = _per_iteration(p, "per_stream_mean_tok_s") or list(p.samples)
    acc = p.evidence.acceptance
    reasons = tuple(
        Reason(code=r.code, message=r.message, severity=r.severity, evidence=tuple(r.evidence))
        for r in p.evidence.validity.reasons
    )
    evidence: tuple[str, ...] = ()
    if not p.evidence.validity.valid and log_lines and config in log_lines:
        evidence = tuple(ln for ln in log_lines[config] if _LOG_HINT.search(ln))[:MAX_LOG_LINES]
    flags = p.engineFlags

    tele, tele_note = telemetry_view(p)
    outputs = tuple(
        RequestOutput(
            prompt_sha256=r.prompt_sha256,
            output_sha256=r.output_sha256,
            text=r.output_text,
            token_chars=tuple(c for c in r.chunk_chars if c > 0),
        )
        for it in p.evidence.iterations
        if not it.warmup
        for r in it.requests
        if r.prompt_sha256 is not None and r.output_text is not None and r.valid
    )
    probes = p.evidence.logprob_probes
    return RunView(
        outputs=outputs,
        probes=tuple(probes.requests) if probes else (),
        probes_note=probes.note if probes else None,
        key=stem,
        config=config,
        engine=p.engineName,
        method=flags.specMethod,
        spec_tokens=flags.specNumTokens,
        draft_model=flags.specModel,
        concurrency=flags.concurrency,
        valid=p.evidence.validity.valid,
        simulated=p.simulated,
        toy_model=p.evidence.run.toy_model,
        attempt=attempt,
        decode=_figure(fig.decode_tok_s, decode_samples),
        ttft=_figure(fig.ttft_ms, _per_iteration(p, "ttft")),
        aggregate=_figure(fig.aggregate_tok_s, _per_iteration(p, "aggregate_tok_s")),
        acceptance_rate=acc.acceptance_rate if acc else None,
        mean_acceptance_length=acc.mean_acceptance_length if acc else None,
        drafts=acc.drafts if acc else None,
        draft_tokens=acc.draft_tokens if acc else None,
        accepted_tokens=acc.accepted_tokens if acc else None,
        accepted_per_position=tuple(acc.accepted_per_position) if acc else (),
        acceptance_source=acc.source if acc else None,
        acceptance_raw=dict(p.evidence.acceptance_raw),
        reasons=reasons,
        log_file=f"logs/{config}.log" if log_lines and config in log_lines else None,
        log_evidence=evidence,
        payload_file=f"payloads/{stem}.json",
        served_model=p.evidence.run.served_model,
        engine_version=p.engineVersion,
        command=tuple(p.evidence.run.command),
        iterations=p.evidence.workload.iterations,
        warmup=p.evidence.workload.warmup,
        telemetry=tele,
        telemetry_note=tele_note,
        server_log=p.evidence.server_log,
        launch=p.evidence.launch,
        categories=category_views(p),
        prompt_set=f"{ps.name}@{ps.sha256[:12]}"
        if (ps := p.evidence.workload.prompt_set)
        else None,
        enable_thinking=tpl.enable_thinking if (tpl := p.evidence.workload.chat_template) else None,
        **extra_fields(p),
    )


def category_views(p: Payload) -> tuple[CategoryView, ...]:
    """Each category window of a prompt-set payload, with its per-iteration decode samples."""
    out: list[CategoryView] = []
    for c in p.evidence.categories:
        samples = [
            float(it.per_stream_mean_tok_s)
            for it in p.evidence.iterations
            if it.category == c.category
            and not it.warmup
            and it.valid
            and it.per_stream_mean_tok_s is not None
        ]
        acc, req = c.acceptance, c.request_acceptance
        out.append(
            CategoryView(
                category=c.category,
                prompts=c.prompts,
                decode=_figure(c.decode_tok_s, samples),
                acceptance_rate=acc.acceptance_rate if acc else None,
                mean_acceptance_length=acc.mean_acceptance_length if acc else None,
                draft_tokens=acc.draft_tokens if acc else None,
                request_rate=req.acceptance_rate if req else None,
                request_source=req.source if req else None,
                request_agrees=req.agrees_with_counters if req else None,
                request_check=req.check if req else "",
            )
        )
    return tuple(out)


def _read_json(path: Path) -> dict[str, Any] | None:
    """An optional JSON artifact: None when absent; a folder or a FIFO in its place, or a file
    that is not a JSON object, is refused (exit 2, the file named), never taken for absent."""
    data = read_optional_json(path)
    if data is not None and not isinstance(data, dict):
        raise InputError(str(path), "not a JSON object")
    return data


def hardware_lines(hw: Hardware) -> tuple[str, ...]:
    lines = [
        f"GPUs: {hw.gpuCount}x {hw.gpuName} ({hw.vramGb:g} GB total VRAM, class {hw.hwClass})",
        f"CPU: {hw.cpu}; RAM: {hw.ramGb:g} GB; OS: {hw.os}",
    ]
    ext = hw.extended
    if ext is not None:
        lines.append(
            f"Driver: {ext.driverVersion or 'unknown'}; CUDA driver: "
            f"{ext.cudaDriverVersion or 'unknown'}; captured from: {ext.source}"
        )
        for g in ext.gpus:
            link = (
                f"PCIe gen {g.pcieGenCurrent}/{g.pcieGenMax} x{g.pcieWidthCurrent}/{g.pcieWidthMax}"
                if g.pcieGenCurrent is not None
                else "PCIe link unknown"
            )
            power = f"{g.powerLimitW:g} W" if g.powerLimitW is not None else "unknown"
            lines.append(f"GPU {g.index}: {link}; power limit {power}")
        if ext.p2p:
            lines.append("P2P: " + ", ".join(f"{k}={v}" for k, v in sorted(ext.p2p.items())))
        if ext.topology:
            lines.append(f"Topology: {ext.topology}")
    return tuple(lines)


def _sums(path: Path) -> dict[str, str]:
    return read_sums(path) if exists(path) else {}


def _experiment_infos(exp: Experiment) -> tuple[ConfigInfo, ...]:
    """The locked experiment's configurations, as the lock states them."""
    infos = []
    for cfg in exp.configurations:
        draft = exp.draft_for(cfg)
        infos.append(
            ConfigInfo(
                name=cfg.name,
                engine=cfg.engine,
                method=cfg.method,
                spec_tokens=cfg.spec_num_tokens,
                draft_model=draft.hf_id if draft else None,
                flags=tuple(cfg.args),
                deviations=tuple(d.model_dump() for d in exp.deviations_for(cfg)),
                concurrency=tuple(exp.levels_for(cfg)),
                rationale=cfg.notes,
                expect_invalid=cfg.expect_invalid,
                depth_of=cfg.depth_of,
                depth_references=tuple((r.k, r.source) for r in cfg.depth_references),
                patch_sha256=(b.patch_sha256 if (b := exp.image_for(cfg).build) else None),
                image=f"{cfg.image_key}: {exp.image_for(cfg).ref}",
                target=exp.target_for(cfg).hf_id,
            )
        )
    return tuple(infos)


#: what the reproduction section says about where its commands come from
RECORDED = (
    "recorded in the payloads when the matrix started each server (evidence.launch): the "
    "server argv, the argv that was started and its docker run line, exactly as they ran"
)
RECORDED_OLD = (
    "the server argv recorded in the payloads (evidence.run.command); these artifacts "
    "predate the launch record, so no docker run line was recorded and none is shown"
)
MEASURED = (
    "the measurement commands recorded in the payloads (specbench run measured a server it "
    "did not start, so no server command was recorded)"
)


def _first_by_config(runs: list[RunView]) -> dict[str, RunView]:
    """One run per configuration, the first attempt's lowest level first: every payload of a
    configuration records the same server."""
    out: dict[str, RunView] = {}
    for r in sorted(runs, key=lambda r: (r.attempt is not None, r.concurrency)):
        out.setdefault(r.config, r)
    return out


def recorded_commands(
    runs: list[RunView], *, matrix: bool = True
) -> tuple[tuple[CommandBlock, ...], str]:
    """The reproduction commands the payloads recorded, one set per configuration in the order
    of ``runs``, and a sentence on where they come from. Without a launch record a matrix
    payload's ``evidence.run.command`` is the server argv; a ``specbench run`` payload's (no
    lock: ``matrix`` False) is the measurement command."""
    first = _first_by_config(runs)
    blocks: list[CommandBlock] = []
    launched = unlaunched = 0
    for name in dict.fromkeys(r.config for r in runs):
        r = first[name]
        launch = r.launch
        if launch is None:
            if r.command:
                unlaunched += 1
                what = "server command" if matrix else "measurement command"
                blocks.append(CommandBlock(title=f"{name}: {what}", argv=r.command))
            continue
        launched += 1
        blocks.append(CommandBlock(title=f"{name}: server command", argv=tuple(launch.server_argv)))
        if launch.argv != launch.server_argv:
            blocks.append(
                CommandBlock(
                    title=f"{name}: started in its place ({launch.launcher})",
                    argv=tuple(launch.argv),
                )
            )
        if launch.docker_run is not None:
            blocks.append(CommandBlock(title=f"{name}: docker run", text=launch.docker_run))
    old = RECORDED_OLD if matrix else MEASURED
    if not unlaunched:
        source = RECORDED
    elif not launched:
        source = old
    else:
        source = f"{RECORDED}; for the configurations without a launch record, {old}"
    return tuple(blocks), source


def _with_recorded_caps(
    configs: tuple[ConfigInfo, ...], runs: list[RunView]
) -> tuple[ConfigInfo, ...]:
    """Each configuration's admission cap as the matrix recorded it when the server started:
    the cap the engine logged (the seed's SGLang DFlash: five live requests, capped by the
    Mamba state cache), else the one its flag sets."""
    first = _first_by_config(runs)
    out = []
    for info in configs:
        r = first.get(info.name)
        adm = r.launch.admission if r is not None and r.launch is not None else None
        if adm is not None:
            info = info.model_copy(
                update={"admission_cap": adm.cap, "admission_source": adm.source}
            )
        out.append(info)
    return tuple(out)


def _validator_verdict(payload: Payload, path: Path) -> str:
    """The offline validator's verdict in a few words: ``check_payload`` on the payload already
    read (what ``check_payload_file`` does after parsing, without parsing the file again)."""

    problems = check_payload(payload, str(path))
    errors = [p for p in problems if p.severity == "error"]
    if not errors:
        return "validator: pass"
    return f"validator: {len(errors)} error(s), first {errors[0].path}: {errors[0].reason}"


def _payload_files(d: Path) -> list[Path]:
    if not d.is_dir():
        raise InputError(str(d), "not a directory")
    pdir = d / "payloads"
    files = sorted(pdir.glob("*.json")) if pdir.is_dir() else []
    if not files:
        raise InputError(str(d), "no payloads/*.json: not a specbench artifacts folder")
    return files


def _logs(d: Path) -> dict[str, list[str]]:
    logs: dict[str, list[str]] = {}
    for lf in sorted((d / "logs").glob("*.log")) if (d / "logs").is_dir() else []:
        head = read_head(lf, MAX_LOG_BYTES, what="server log")
        logs[lf.stem] = head.decode("utf-8", errors="replace").splitlines()
    return logs


def _identity(p: Payload, stem: str) -> tuple[str, str | None]:
    """(configuration, attempt) of a payload, as ``run_view`` names them."""
    m = _STEM.match(stem)
    return p.evidence.run.config_name or (m.group("config") if m else stem), (
        m.group("attempt") if m else None
    )


def _parse(
    files: list[Path], exp: Experiment | None
) -> tuple[list[Read], list[Unreadable], dict[str, str]]:
    """Every payload file parsed (``Read``) or listed as unreadable, with its verdict."""
    read: list[Read] = []
    unreadable: list[Unreadable] = []
    verdicts: dict[str, str] = {}
    for f in files:
        rel = f"payloads/{f.name}"
        try:
            p = read_payload(f)
        except InputError as err:
            refuse_foreign_schema(f, str(f))
            verdicts[rel] = f"FAILS validation: {err.reason}"
            unreadable.append(excluded(rel, err.reason, exp))
            continue
        config, attempt = _identity(p, f.stem)
        read.append(Read(rel, p, config, p.engineFlags.concurrency, attempt))
    return read, unreadable, verdicts


def _verdict(r: Read, d: Path) -> str:
    rv = r.payload.evidence.validity
    codes = ", ".join(x.code for x in rv.reasons if x.severity == "invalid")
    verdict = _validator_verdict(r.payload, d / r.rel)
    verdict += "; run valid" if rv.valid else f"; run INVALID ({codes})"
    return verdict + ("; SIMULATED" if r.payload.simulated else "")


def _hardware(d: Path, read: list[Read]) -> Hardware | None:
    """hardware.json (a folder or a file that is not one: refused); else the payloads'."""
    path = d / "hardware.json"
    if exists(path):
        return read_json_model(path, Hardware)
    return read[0].payload.hardware if read else None


def _file_entries(
    d: Path, listed: dict[str, str], verdicts: dict[str, str], digest: Digests
) -> list[FileEntry]:
    files: list[FileEntry] = []
    for f in sorted(p for p in d.rglob("*") if p.is_file() and p.name != "SHA256SUMS"):
        rel = f.relative_to(d).as_posix()
        sha = digest(rel)
        want = listed.get(rel)
        verdict = verdicts.get(rel, "present")
        if want is None:
            verdict += "; not listed in SHA256SUMS" if listed else ""
        elif want != sha:
            verdict += "; SHA256 MISMATCH"
        files.append(FileEntry(path=rel, sha256=sha, listed_sha256=want, verdict=verdict))
    for rel in sorted(set(listed) - {f.path for f in files}):
        # a listed payload that is gone was refused above; any other file is stated missing
        files.append(FileEntry(path=rel, listed_sha256=listed[rel], verdict=MISSING))
    return files


def _usable(
    d: Path, read: list[Read], listed: dict[str, str], exp: Experiment | None, digest: Digests
) -> tuple[list[Read], list[Unreadable], dict[str, str]]:
    """The payloads a figure may use; the others listed with the reason (bench.report._trust)."""
    kept, excluded = split_trusted(d, read, listed, exp, digest)
    verdicts = {r.rel: _verdict(r, d) for r in read}
    for u in excluded:
        verdicts[u.path] = f"FAILS validation: {u.reason}"
    if not kept:
        first = excluded[0] if excluded else None
        where = str(d / first.path) if first else str(d / "payloads")
        raise InputError(where, f"no payload can be used: {first.reason if first else 'none'}")
    return kept, excluded, verdicts


def load_artifacts(artifacts_dir: Path) -> RunSet:
    """Read every artifact the report uses. A payload that cannot be read, that contradicts its
    own evidence or that SHA256SUMS does not vouch for is listed with the reason and used for
    no figure, instead of stopping the report; a folder that is not one run is refused."""
    d = artifacts_dir
    payload_files = _payload_files(d)
    logs = _logs(d)
    lock = _read_lock(d)
    exp = lock.experiment if lock is not None else None
    read, unreadable, verdicts = _parse(payload_files, exp)
    listed = _sums(d / "SHA256SUMS")
    hw = _hardware(d, read)
    check_one_run(d, lock, _read_status(d), read, listed, hw)
    if not read:
        raise InputError(str(d / "payloads"), "no payload passed validation")
    digest = Digests(d)
    kept, excluded, more = _usable(d, read, listed, exp, digest)
    verdicts |= more
    unreadable += excluded
    payloads = [r.payload for r in kept]
    runs = [run_view(r.payload, Path(r.rel).stem, logs) for r in kept]
    configs = _with_recorded_caps(_experiment_infos(exp) if exp is not None else (), runs)
    _in_experiment_order(runs, configs)
    hw = hw or payloads[0].hardware
    prov = _read_json(d / "provenance.json")
    files = _file_entries(d, listed, verdicts, digest)
    commands, source = recorded_commands(runs, matrix=lock is not None)
    first = payloads[0]
    wl = first.evidence.workload
    drafts = {c.name: c.draft_model for c in configs}
    roof = build_roofline(d, exp, hw, tuple(runs), wl.prompt_tokens, wl.max_tokens, drafts)
    by_key = {r.key: p for r, p in zip(runs, _in_order(runs, kept), strict=True)}
    tables = [
        *hardware_tables(hw),
        *cpu_kernel_table(by_key),
        *resolved_table(by_key),
        *what_ran_table(by_key),
        *(provenance_tables(prov) if prov else []),
        *(pins_table(lock) if lock is not None else []),
    ]
    title = (exp.title or exp.name) if exp is not None else f"Speculative decoding on {first.hfId}"
    return RunSet(
        plan=read_plan(d),
        source_kind="artifacts",
        source=str(d),
        title=title,
        experiment=exp.name if exp is not None else None,
        hf_id=first.hfId,
        model_revision=first.modelRevision,
        quantization=first.quantization,
        hardware_lines=hardware_lines(hw),
        provenance_lines=() if prov else ("provenance.json: absent from the artifacts",),
        **source_fields(prov),
        machine_tables=tuple(tables),
        roofline=roof,
        workload=_workload(first),
        measured_workload=workload_of(
            first, target_of(first, lock, first.evidence.run.config_name)
        ),
        configs=configs,
        runs=tuple(runs),
        files=tuple(files),
        commands=commands,
        commands_source=source,
        notes=(),
        emulator_time_scale=_time_scale(lock),
        upstream_suite=read_suite(d / SUITE_RECORD),
        unreadable=tuple(sorted(unreadable, key=lambda u: u.path)),
        unvouched=unvouched(d, listed, lock is not None, digest),
        run_ids=_run_ids(lock, payloads),
        unpinned=_unpinned(lock),
    )


#: where ``specbench matrix`` puts its copy of the SGLang upstream-suite record
SUITE_RECORD = "upstream/sglang-suite.json"


def read_suite(path: Path) -> SuiteView | None:
    """The upstream-suite record if the artifacts carry one (a SuiteRecord); a record that does
    not validate stops the report with exit 2 and the field."""
    if not exists(path):
        return None
    rec = read_json_model(path, SuiteRecord)
    return SuiteView(
        file=SUITE_RECORD,
        upstream_version=rec.upstream_version,
        patch_sha256=rec.patch_sha256,
        passed=rec.summary.passed,
        failed=rec.summary.failed,
        needs_gpu=rec.summary.needs_gpu,
        upstream_passed=rec.summary.upstream_passed,
        specbench_passed=rec.summary.specbench_passed,
        scanned_test_files=rec.selection.scanned_test_files,
        selected_files=len(rec.selection.selected),
        sdist=rec.selection.sdist,
        passed_tests=tuple(t.id for t in rec.patched.tests if t.outcome == "passed"),
        reproduce=rec.reproduce,
    )


def _read_lock(d: Path) -> RunLock | None:
    """experiment.lock.json as the matrix wrote it; None for a folder without one (payloads
    from ``specbench run``). A lock that does not validate stops the report (exit 2)."""
    path = d / LOCK_FILE
    return read_json_model(path, RunLock) if exists(path) else None


def _read_status(d: Path) -> RunStatus | None:
    """status.json as the matrix wrote it; one that does not validate stops the report."""
    path = d / STATUS_FILE
    return read_json_model(path, RunStatus) if exists(path) else None


#: the verdict of a file SHA256SUMS lists that the folder no longer holds
MISSING = "MISSING: listed in SHA256SUMS, not in the folder"


def _in_experiment_order(runs: list[RunView], configs: tuple[ConfigInfo, ...]) -> None:
    """The experiment's order, not the file names' (the seed lists vLLM DFlash first)."""
    order = {c.name: i for i, c in enumerate(configs)}
    runs.sort(
        key=lambda r: (
            order.get(r.config, len(order)),
            r.config,
            r.concurrency,
            r.attempt is None,
            r.attempt or "",
        )
    )


def _workload(first: Payload) -> dict[str, Any]:
    """The workload as the report's Test setup states it (every payload's: one run)."""
    wl = first.evidence.workload
    out: dict[str, Any] = {
        "prompt_tokens": wl.prompt_tokens,
        "max_tokens": wl.max_tokens,
        "warmup": wl.warmup,
        "iterations": wl.iterations,
        "temperature": wl.temperature,
        "ignore_eos": wl.ignore_eos,
    }
    if wl.prompt_set is not None:
        out["prompt_set"] = wl.prompt_set.name
    return out


def _in_order(runs: list[RunView], kept: list[Read]) -> list[Payload]:
    """The payload of each run, in the runs' order."""
    by_stem = {Path(r.rel).stem: r.payload for r in kept}
    return [by_stem[r.key] for r in runs]


def _run_ids(lock: RunLock | None, payloads: list[Payload]) -> tuple[str, ...]:
    if lock is not None:
        return (lock.run_id,)
    return tuple(sorted({i for p in payloads if (i := p.evidence.run.run_id) is not None}))


def _unpinned(lock: RunLock | None) -> tuple[str, ...]:
    """The pins a real run went without (none for an emulated run: no engine image ran)."""
    if lock is None or lock.simulated:
        return ()
    if lock.pins:
        return tuple(f"{p.kind} {p.key} ({p.ref}): {p.field}" for p in lock.pins if not p.value)
    return tuple(lock.unresolved_pins)


def _time_scale(lock: RunLock | None) -> float | None:
    value = lock.overrides.time_scale if lock is not None else None
    return value if value is not None and value > 0 else None
