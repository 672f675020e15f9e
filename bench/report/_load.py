"""Read a matrix run's artifacts folder into the report's ``RunSet``.

Payloads are the primary source (engine, method, figures, verdict). ``experiment.lock.json``
(a ``RunLock``) gives what payloads do not carry: the configurations' flags, deviations,
concurrency levels and the reproduction commands.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.core import InputError, Summary, read_json_model, sha256_file
from bench.engines import flag_value, get_engine, plan_entries
from bench.report._machine import hardware_tables, provenance_tables, telemetry_view
from bench.report._model import (
    CommandBlock,
    ConfigInfo,
    Figure,
    FileEntry,
    Reason,
    RequestOutput,
    RunSet,
    RunView,
    SuiteView,
)
from bench.report._roofline import build_roofline
from bench.schema import (
    LOCK_FILE,
    Experiment,
    Hardware,
    Payload,
    RunLock,
    SuiteRecord,
    check_payload,
    read_payload,
)

_STEM = re.compile(r"^(?P<config>.+)-c(?P<c>\d+)(?:\.(?P<attempt>[A-Za-z0-9_-]+))?$")
_LOG_HINT = re.compile(r"(?i)\b(error|warn(ing)?|skip(ping|ped)?|not found|traceback|fail(ed)?)\b")
MAX_LOG_LINES = 12


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
    return RunView(
        outputs=outputs,
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
    )


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(str(path), f"cannot read JSON: {err}") from None
    return data if isinstance(data, dict) else None


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
    out: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.strip().split(maxsplit=1)
            if len(parts) == 2:
                out[parts[1].lstrip("*")] = parts[0].lower()
    return out


def _experiment_infos(
    exp: Experiment,
) -> tuple[tuple[ConfigInfo, ...], tuple[CommandBlock, ...], str, str]:
    """Configurations and reproduction commands of the locked experiment through
    bench.engines.plan_entries (the same code as ``specbench plan``)."""
    entries = plan_entries(exp)
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
            )
        )
    commands: list[CommandBlock] = []
    for e in entries:
        commands.append(CommandBlock(title=f"{e.name}: server command", argv=tuple(e.argv)))
        commands.append(CommandBlock(title=f"{e.name}: docker run", text=e.docker_run))
    source_text = "generated by bench.engines.plan_entries, the code behind specbench plan"
    title = exp.title or exp.name
    return tuple(infos), tuple(commands), source_text, title


def _validator_verdict(payload: Payload, path: Path) -> str:
    """The offline validator's verdict in a few words: ``check_payload`` on the payload already
    read (what ``check_payload_file`` does after parsing, without parsing the file again)."""

    problems = check_payload(payload, str(path))
    errors = [p for p in problems if p.severity == "error"]
    if not errors:
        return "validator: pass"
    return f"validator: {len(errors)} error(s), first {errors[0].path}: {errors[0].reason}"


def load_artifacts(artifacts_dir: Path) -> RunSet:
    """Read every artifact the report uses. A payload that fails validation is listed with its
    error in the artifacts section instead of stopping the report."""
    d = artifacts_dir
    if not d.is_dir():
        raise InputError(str(d), "not a directory")
    pdir = d / "payloads"
    payload_files = sorted(pdir.glob("*.json")) if pdir.is_dir() else []
    if not payload_files:
        raise InputError(str(d), "no payloads/*.json: not a specbench artifacts folder")
    logs: dict[str, list[str]] = {}
    for lf in sorted((d / "logs").glob("*.log")) if (d / "logs").is_dir() else []:
        logs[lf.stem] = lf.read_text(encoding="utf-8", errors="replace").splitlines()
    runs: list[RunView] = []
    verdicts: dict[str, str] = {}
    payloads: list[Payload] = []
    for f in payload_files:
        rel = f"payloads/{f.name}"
        try:
            p = read_payload(f)
        except InputError as err:
            verdicts[rel] = f"FAILS validation: {err.reason}"
            continue
        payloads.append(p)
        rv = run_view(p, f.stem, logs)
        runs.append(rv)
        codes = ", ".join(r.code for r in rv.reasons if r.severity == "invalid")
        verdicts[rel] = _validator_verdict(p, f)
        verdicts[rel] += "; run valid" if rv.valid else f"; run INVALID ({codes})"
        if rv.simulated:
            verdicts[rel] += "; SIMULATED"
    if not runs:
        raise InputError(str(pdir), "no payload passed validation")
    lock = _read_lock(d)
    exp = lock.experiment if lock is not None else None
    from_plan = _experiment_infos(exp) if exp is not None else None
    configs = _with_logged_caps(from_plan[0] if from_plan else (), logs)
    order = {c.name: i for i, c in enumerate(configs)}
    # The experiment's order, not the file names' (the seed lists vLLM DFlash first).
    runs.sort(
        key=lambda r: (
            order.get(r.config, len(order)),
            r.config,
            r.concurrency,
            r.attempt is None,
            r.attempt or "",
        )
    )
    hw_data = _read_json(d / "hardware.json")
    hw = Hardware.model_validate(hw_data) if hw_data else payloads[0].hardware
    prov = _read_json(d / "provenance.json")
    listed = _sums(d / "SHA256SUMS")
    files: list[FileEntry] = []
    for f in sorted(p for p in d.rglob("*") if p.is_file() and p.name != "SHA256SUMS"):
        rel = f.relative_to(d).as_posix()
        sha = sha256_file(f)
        want = listed.get(rel)
        verdict = verdicts.get(rel, "present")
        if want is None:
            verdict += "; not listed in SHA256SUMS" if listed else ""
        elif want != sha:
            verdict += "; SHA256 MISMATCH"
        files.append(FileEntry(path=rel, sha256=sha, listed_sha256=want, verdict=verdict))
    if from_plan is not None:
        commands, source = from_plan[1], from_plan[2]
    else:
        commands = tuple(
            CommandBlock(title=f"{r.key}: measurement command", argv=r.command)
            for r in runs
            if r.command and r.attempt is None
        )
        source = (
            "the measurement commands recorded in the payloads; bench.engines.plan_entries "
            "(the code behind specbench plan) is not available to this report, so server "
            "commands are not shown"
        )
    first = payloads[0]
    wl = first.evidence.workload
    workload = {
        "prompt_tokens": wl.prompt_tokens,
        "max_tokens": wl.max_tokens,
        "warmup": wl.warmup,
        "iterations": wl.iterations,
        "temperature": wl.temperature,
        "ignore_eos": wl.ignore_eos,
    }

    drafts = {c.name: c.draft_model for c in configs}
    roof = build_roofline(d, exp, hw, tuple(runs), wl.prompt_tokens, wl.max_tokens, drafts)
    tables = [*hardware_tables(hw), *(provenance_tables(prov) if prov else [])]
    title = from_plan[3] if from_plan else f"Speculative decoding on {first.hfId}"
    return RunSet(
        source_kind="artifacts",
        source=str(d),
        title=title,
        experiment=exp.name if exp is not None else None,
        hf_id=first.hfId,
        model_revision=first.modelRevision,
        quantization=first.quantization,
        hardware_lines=hardware_lines(hw),
        provenance_lines=() if prov else ("provenance.json: absent from the artifacts",),
        machine_tables=tuple(tables),
        roofline=roof,
        workload=workload,
        configs=configs,
        runs=tuple(runs),
        files=tuple(files),
        commands=commands,
        commands_source=source,
        notes=(),
        emulator_time_scale=_time_scale(lock),
        upstream_suite=read_suite(d / SUITE_RECORD),
    )


#: where ``specbench matrix`` puts its copy of the SGLang upstream-suite record
SUITE_RECORD = "upstream/sglang-suite.json"


def read_suite(path: Path) -> SuiteView | None:
    """The upstream-suite record if the artifacts carry one (a SuiteRecord); a record that does
    not validate stops the report with exit 2 and the field."""
    if not path.is_file():
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
        passed_tests=tuple(t.id for t in rec.patched.tests if t.outcome == "passed"),
        reproduce=rec.reproduce,
    )


def _with_logged_caps(
    configs: tuple[ConfigInfo, ...], logs: dict[str, list[str]]
) -> tuple[ConfigInfo, ...]:
    """Each configuration's effective admission cap as its engine logged it (the seed's SGLang
    DFlash: five live requests, capped by the Mamba state cache); else from its flags."""
    out = []
    for info in configs:
        logged = None
        if info.engine is not None and info.name in logs:
            logged = get_engine(info.engine).admission_from_log("\n".join(logs[info.name]))
        if logged is not None:
            info = info.model_copy(
                update={"admission_cap": logged[0], "admission_source": f"engine log: {logged[1]}"}
            )
        else:
            cap = flag_cap(info.flags)
            if cap is not None:
                info = info.model_copy(
                    update={"admission_cap": cap[0], "admission_source": f"flag {cap[1]}"}
                )
        out.append(info)
    return tuple(out)


def flag_cap(flags: tuple[str, ...]) -> tuple[int, str] | None:
    """The admission cap a configuration's flags set (--max-num-seqs / --max-running-requests)."""
    for name in ("--max-running-requests", "--max-num-seqs"):
        value = flag_value(list(flags), name)
        if value and value.isdigit():
            return int(value), name
    return None


def _read_lock(d: Path) -> RunLock | None:
    """experiment.lock.json as the matrix wrote it; None for a folder without one (payloads
    from ``specbench run``). A lock that does not validate stops the report (exit 2)."""
    path = d / LOCK_FILE
    return read_json_model(path, RunLock) if path.is_file() else None


def _time_scale(lock: RunLock | None) -> float | None:
    value = lock.overrides.time_scale if lock is not None else None
    return value if value is not None and value > 0 else None
