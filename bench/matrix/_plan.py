"""What a matrix would run, without running anything, as Markdown (``specbench plan``)."""

from __future__ import annotations

from bench.engines import DEFAULT_MODEL_CACHE, plan_entries
from bench.schema import Experiment


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
