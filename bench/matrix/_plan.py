"""What a matrix would run, without running anything, as Markdown (``specbench plan``), with
an estimate of its wall time.

The estimate comes from each configuration's emulator profile: a schedule shaped after the seed
report's figures (load time, prefill, decode step time per batch size, acceptance, admission
cap), run at the configuration's speculative depth. It is an estimate for the seed's hardware,
labelled as such; the real run takes what it takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from bench.core import StrictModel, md_cell, md_code, md_fence, md_inline
from bench.emulator.runner import resolve_profile
from bench.engines import DEFAULT_MODEL_CACHE, flag_value, get_engine, plan_entries
from bench.measure import dataset_file, experiment_prompt_set
from bench.schema import UNRESOLVED, Configuration, Experiment, PlanEstimate, PlanRecord


class ConfigurationEstimate(StrictModel):
    name: str
    start_s: float
    measure_s: float

    @property
    def total_s(self) -> float:
        return self.start_s + self.measure_s


def estimate(
    experiment: Experiment,
    cfg: Configuration,
    warmup: int | None = None,
    iterations: int | None = None,
    model_cache: str | None = None,
    cats: list[str] | None = None,
) -> ConfigurationEstimate:
    """Server start plus every level's warmup and measured iterations, on the profile's clock.
    ``cats``: the prompt set's categories when the caller has read them (else read here)."""
    w = experiment.workload
    engine = get_engine(cfg.engine)
    cap = flag_value(cfg.args, engine.admission_flag) if engine.admission_flag else None
    profile = resolve_profile(
        cfg.engine,
        cfg.emulator.profile,
        max_running_requests=int(cap) if cap else None,
        spec_tokens=cfg.spec_num_tokens,
    )
    n = (w.warmup if warmup is None else warmup) + (
        w.iterations if iterations is None else iterations
    )
    if cats is None:
        cats = categories(experiment, model_cache)
    n *= len(cats) or 1  # each category is its own windows
    measure_s = sum(
        n * profile.iteration_s(w.prompt_tokens, w.max_tokens, c)
        for c in experiment.levels_for(cfg)
    )
    return ConfigurationEstimate(
        name=cfg.name, start_s=profile.load_s + profile.warmup_s, measure_s=measure_s
    )


def categories(experiment: Experiment, model_cache: str | None = None) -> list[str]:
    """The categories of the experiment's prompt set (read and checked against its sha256:
    exit 2 on a bad file); [] for the synthetic workload, or a dataset prompt set that the
    models stage has not fetched into ``model_cache`` (or whose sha256 is not pinned yet)."""
    ps = experiment.workload.prompt_set
    if ps is None:
        return []
    cache = Path(model_cache) if model_cache is not None else None
    if ps.dataset is not None and (
        cache is None
        or ps.dataset.sha256 == UNRESOLVED
        or not dataset_file(ps.name, ps.dataset, cache).is_file()
    ):
        return []
    loaded = experiment_prompt_set(ps, cache)
    return loaded.categories() if loaded is not None else []


#: a matrix estimated to run longer than this starts only when told to (``matrix --yes``)
LONG_MATRIX_S: Final = 4 * 3600.0


def wall_time(
    experiment: Experiment,
    only: list[str] | None = None,
    *,
    model_cache: str = DEFAULT_MODEL_CACHE,
    time_scale: float | None = None,
) -> float:
    """The plan's estimated wall time of the selected configurations (seconds), on the
    emulator's clock scaled by ``time_scale`` where one is given."""
    cats = categories(experiment, model_cache)
    total = sum(
        estimate(experiment, cfg, model_cache=model_cache, cats=cats).total_s
        for cfg in experiment.select(only)
    )
    return total * (time_scale if time_scale is not None else 1.0)


def duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def _prompt_set_line(experiment: Experiment, model_cache: str, cats: list[str]) -> str:
    """The plan's sentence on the experiment's prompt set (it has one)."""
    w = experiment.workload
    if w.prompt_set is None:
        return ""
    ds = w.prompt_set.dataset
    where = (
        f"dataset {md_inline(ds.hf_id)}@{ds.revision} {md_code(ds.file)}, read from "
        f"{md_code(dataset_file(w.prompt_set.name, ds, Path(model_cache)))}"
        if ds is not None
        else md_code(w.prompt_set.path)
    )
    each = (
        f"{len(cats)} categories ({', '.join(cats)}), each measured as its own windows "
        "(warmup + iterations per category and level)"
        if cats
        else "categories unknown until the models stage (`make provision`) fetches the "
        "dataset there (estimated as one window)"
    )
    thinking = "not sent (template default)"
    if w.enable_thinking is not None:
        thinking = str(w.enable_thinking).lower()
    return (
        f"Prompt set {md_code(w.prompt_set.name)} ({where}): {each}; real text through the "
        f"chat template, enable_thinking {thinking}; prompt_tokens only sizes this estimate."
    )


def render_plan(
    experiment: Experiment,
    only: list[str] | None = None,
    *,
    model_cache: str = DEFAULT_MODEL_CACHE,
) -> str:
    """The plan as Markdown (what ``specbench plan`` prints)."""
    w = experiment.workload
    lines = [
        f"# Plan: {md_inline(experiment.name)}",
        "",
        f"Target: {md_inline(experiment.target.hf_id)} @ {experiment.target.revision}"
        f" ({md_code(experiment.target.path)}); served as {md_code(experiment.served_model)}.",
        *[
            f"Configuration {md_code(c.name)} serves {md_inline(experiment.target_for(c).hf_id)}"
            f" ({md_code(experiment.target_for(c).path)}): the target in the layout {c.engine}"
            " loads."
            for c in experiment.configurations
            if c.target_model is not None and c.target_model != experiment.target_model
        ],
        f"Workload: {w.prompt_tokens} prompt tokens, {w.max_tokens} output tokens,"
        f" warmup {w.warmup}, iterations {w.iterations}.",
        "",
    ]
    cats = categories(experiment, model_cache)  # read once, for the text and each estimate
    if w.prompt_set is not None:
        lines += [_prompt_set_line(experiment, model_cache, cats), ""]
    estimates = [
        estimate(experiment, cfg, model_cache=model_cache, cats=cats)
        for cfg in experiment.select(only)
    ]
    total = sum(e.total_s for e in estimates)
    lines += [
        f"Estimated wall time: {duration(total)} for {len(estimates)} server start(s) "
        f"(ESTIMATE from the emulator profiles, which are shaped after the seed report's "
        f"dual-RTX-3090 figures; server starts {duration(sum(e.start_s for e in estimates))}).",
        "",
    ]
    unresolved = experiment.unresolved_pins()
    if unresolved:
        lines += [
            "Unresolved pins, in neither the experiment nor its pins lock (the first `make "
            "provision` resolves and records them; a real matrix refuses them unless "
            "--allow-unpinned):",
            "",
        ]
        lines += [f"- {md_inline(u)}" for u in unresolved]
        lines.append("")
    for e in plan_entries(experiment, only, model_cache=model_cache):
        spec = f"{e.method} k={e.spec_num_tokens}" if e.spec_num_tokens else e.method
        lines += [f"## {md_inline(e.name)} ({e.engine}, {md_inline(spec)})", ""]
        est = next(x for x in estimates if x.name == e.name)
        lines.append(
            f"Image: {md_code(e.image)}; concurrency {', '.join(map(str, e.concurrency))}; "
            f"estimated {duration(est.total_s)}."
        )
        if e.expect_invalid:
            lines.append(f"Expected invalid: {md_inline(e.expect_invalid)}")
        lines += ["", "Server command:", "", md_fence(e.command, ""), ""]
        lines += ["Docker:", "", md_fence(e.docker_run, ""), ""]
        if e.deviations:
            lines += ["| flag | seed | used | reason |", "|---|---|---|---|"]
            for d in e.deviations:
                cells = [d.flag, d.seed or "-", d.used or "(dropped)", d.reason]
                lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
            lines.append("")
    return "\n".join(lines)


#: what plan's estimate is of (the report's artifact appendix quotes it)
ESTIMATE_BASIS = (
    "ESTIMATE from the emulator profiles (shaped after the seed's dual-RTX-3090 figures), "
    "server start plus every level's warmup and iterations; not a measurement"
)


def plan_record(
    experiment: Experiment, experiment_path: Path | None, model_cache: str | None = None
) -> PlanRecord:
    """plan.json of a run: each configuration's estimate, as ``specbench plan`` computes it."""
    cats = categories(experiment, model_cache)
    return PlanRecord(
        experiment=str(experiment_path) if experiment_path else f"<{experiment.name}>",
        basis=ESTIMATE_BASIS,
        estimates=[
            PlanEstimate(name=e.name, start_s=e.start_s, measure_s=e.measure_s)
            for e in (
                estimate(experiment, cfg, model_cache=model_cache, cats=cats)
                for cfg in experiment.configurations
            )
        ],
    )
