"""What a matrix would run, without running anything: per configuration the exact server argv,
the equivalent ``docker run`` line and the deviations from the seed. The report's reproduction
section renders the same ``plan_entries``."""

from __future__ import annotations

import shlex

from bench.engines import get_engine
from bench.engines.base import DEFAULT_MODEL_CACHE
from bench.experiment import Deviation, Experiment
from bench.models import StrictModel


class PlanEntry(StrictModel):
    name: str
    engine: str
    method: str
    spec_num_tokens: int | None
    image: str
    image_resolved: bool
    concurrency: list[int]
    argv: list[str]
    command: str
    docker_run: str
    deviations: list[Deviation]
    expect_invalid: str | None = None
    notes: str | None = None


def plan_entries(
    experiment: Experiment,
    only: list[str] | None = None,
    *,
    model_cache: str = DEFAULT_MODEL_CACHE,
) -> list[PlanEntry]:
    """One entry per selected configuration, in file order. Pure."""
    out: list[PlanEntry] = []
    for cfg in experiment.select(only):
        engine = get_engine(cfg.engine)
        argv = engine.server_argv(cfg, experiment)
        image = experiment.image_for(cfg)
        out.append(
            PlanEntry(
                name=cfg.name,
                engine=cfg.engine,
                method=cfg.method,
                spec_num_tokens=cfg.spec_num_tokens,
                image=image.ref,
                image_resolved=image.resolved,
                concurrency=experiment.levels_for(cfg),
                argv=argv,
                command=shlex.join(argv),
                docker_run=engine.docker_run_line(cfg, experiment, model_cache=model_cache),
                deviations=experiment.deviations_for(cfg),
                expect_invalid=cfg.expect_invalid,
                notes=cfg.notes,
            )
        )
    return out


def render_plan(
    experiment: Experiment,
    only: list[str] | None = None,
    *,
    model_cache: str = DEFAULT_MODEL_CACHE,
) -> str:
    """The plan as Markdown (what ``specbench plan`` prints)."""
    w = experiment.workload
    lines = [
        f"# Plan: {experiment.name}",
        "",
        f"Target: {experiment.target.hf_id} @ {experiment.target.revision}"
        f" ({experiment.target.path}); served as `{experiment.served_model}`.",
        f"Workload: {w.prompt_tokens} prompt tokens, {w.max_tokens} output tokens,"
        f" warmup {w.warmup}, iterations {w.iterations}.",
        "",
    ]
    unresolved = experiment.unresolved_pins()
    if unresolved:
        lines += ["Unresolved pins (real runs refuse them unless --allow-unpinned):", ""]
        lines += [f"- {u}" for u in unresolved]
        lines.append("")
    for e in plan_entries(experiment, only, model_cache=model_cache):
        spec = f"{e.method} k={e.spec_num_tokens}" if e.spec_num_tokens else e.method
        lines += [f"## {e.name} ({e.engine}, {spec})", ""]
        lines.append(f"Image: `{e.image}`; concurrency {', '.join(map(str, e.concurrency))}.")
        if e.expect_invalid:
            lines.append(f"Expected invalid: {e.expect_invalid}")
        lines += ["", "Server command:", "", "```", e.command, "```", ""]
        lines += ["Docker:", "", "```", e.docker_run, "```", ""]
        if e.deviations:
            lines += ["| flag | seed | used | reason |", "|---|---|---|---|"]
            for d in e.deviations:
                cells = [d.flag, d.seed or "-", d.used or "(dropped)", d.reason]
                lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
            lines.append("")
    return "\n".join(lines)
