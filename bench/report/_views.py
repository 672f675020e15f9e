"""The report's views of what the run folder held: each payload as a ``RunView`` (and its
category windows), the locked experiment's configurations, the hardware lines, the commands the
payloads recorded, and the run-wide facts the lock states. Nothing here reads a file:
``bench.report._load`` reads and checks the folder, then builds its ``RunSet`` from these.

Nothing here is rebuilt with today's engine adapters (the report never imports
``bench.engines``): a report rendered by a newer specbench shows the commands the run used.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.core import Summary
from bench.report._extras import extra_fields
from bench.report._folder import Read
from bench.report._machine import telemetry_view
from bench.report._model import (
    CategoryView,
    CommandBlock,
    ConfigInfo,
    Figure,
    Reason,
    RequestOutput,
    RunView,
)
from bench.schema import Experiment, Hardware, Payload, RunLock

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


def experiment_infos(exp: Experiment) -> tuple[ConfigInfo, ...]:
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


def with_recorded_caps(
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


def run_identity(p: Payload, stem: str) -> tuple[str, str | None]:
    """(configuration, attempt) of a payload, as ``run_view`` names them."""
    m = _STEM.match(stem)
    return p.evidence.run.config_name or (m.group("config") if m else stem), (
        m.group("attempt") if m else None
    )


def in_experiment_order(runs: list[RunView], configs: tuple[ConfigInfo, ...]) -> None:
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


def workload_setup(first: Payload) -> dict[str, Any]:
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


def payloads_in_order(runs: list[RunView], kept: list[Read]) -> list[Payload]:
    """The payload of each run, in the runs' order."""
    by_stem = {Path(r.rel).stem: r.payload for r in kept}
    return [by_stem[r.key] for r in runs]


def run_ids(lock: RunLock | None, payloads: list[Payload]) -> tuple[str, ...]:
    if lock is not None:
        return (lock.run_id,)
    return tuple(sorted({i for p in payloads if (i := p.evidence.run.run_id) is not None}))


def unpinned(lock: RunLock | None) -> tuple[str, ...]:
    """The pins a real run went without (none for an emulated run: no engine image ran)."""
    if lock is None or lock.simulated:
        return ()
    if lock.pins:
        return tuple(f"{p.kind} {p.key} ({p.ref}): {p.field}" for p in lock.pins if not p.value)
    return tuple(lock.unresolved_pins)


def time_scale(lock: RunLock | None) -> float | None:
    value = lock.overrides.time_scale if lock is not None else None
    return value if value is not None and value > 0 else None
