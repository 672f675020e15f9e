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
from bench.measure import (
    accuracy_task_file,
    dataset_file,
    experiment_prompt_set,
    read_accuracy_task,
)
from bench.schema import UNRESOLVED, Configuration, Experiment, PlanEstimate, PlanRecord
from bench.schema._experiment import AccuracyTaskSpec


class ConfigurationEstimate(StrictModel):
    name: str
    start_s: float
    measure_s: float
    #: the accuracy task's answers after the levels (0: no task, or its size not known yet)
    accuracy_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.start_s + self.measure_s + self.accuracy_s


def estimate(
    experiment: Experiment,
    cfg: Configuration,
    warmup: int | None = None,
    iterations: int | None = None,
    model_cache: str | None = None,
    cats: list[str] | None = None,
    questions: int | None = None,
) -> ConfigurationEstimate:
    """Server start plus every level's warmup and measured iterations, then the accuracy
    task's answers, on the profile's clock. ``cats``, ``questions``: the prompt set's
    categories and the accuracy task's size when the caller has read them (else read here)."""
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
    if questions is None:
        questions = accuracy_questions(experiment, model_cache) or 0
    # one answer at a time, each taken as a whole max_tokens decode (an upper bound: an answer
    # ends where the model ends it)
    acc = w.accuracy
    accuracy_s = questions * profile.iteration_s(w.prompt_tokens, acc.max_tokens, 1) if acc else 0.0
    return ConfigurationEstimate(
        name=cfg.name,
        start_s=profile.load_s + profile.warmup_s,
        measure_s=measure_s,
        accuracy_s=accuracy_s,
    )


def accuracy_questions(experiment: Experiment, model_cache: str | None = None) -> int | None:
    """How many questions the accuracy task asks each configuration: read from its file where
    it can be read (checked against its pin: exit 2 on a changed file), else its ``limit``;
    None when there is no task, or a fetched one without a limit is not there yet."""
    spec = experiment.workload.accuracy
    if spec is None:
        return None
    cache = Path(model_cache) if model_cache is not None else None
    if spec.fetched and (
        cache is None
        or _pinned_sha256(spec) == UNRESOLVED
        or not accuracy_task_file(spec, cache).is_file()
    ):
        return spec.limit
    task = read_accuracy_task(spec, cache)
    return len(task.items) if task is not None else spec.limit


def _pinned_sha256(spec: AccuracyTaskSpec) -> str:
    if spec.source is not None:
        return spec.source.sha256
    return spec.dataset.sha256 if spec.dataset is not None else spec.sha256 or ""


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
    questions = accuracy_questions(experiment, model_cache) or 0
    total = sum(
        estimate(experiment, cfg, model_cache=model_cache, cats=cats, questions=questions).total_s
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


def _accuracy_line(
    experiment: Experiment, model_cache: str, questions: int | None, seconds: float
) -> str:
    """The plan's sentence on the experiment's accuracy task (it has one)."""
    acc = experiment.workload.accuracy
    assert acc is not None
    path = md_code(accuracy_task_file(acc, Path(model_cache))) if acc.fetched else ""
    if acc.source is not None:
        where = f"{md_code(acc.source.url)} sha256 {acc.source.sha256}, read from {path}"
    elif acc.dataset is not None:
        d = acc.dataset
        where = f"dataset {md_inline(d.hf_id)}@{d.revision} {md_code(d.file)}, read from {path}"
    else:
        where = md_code(acc.path)
    first = f", the first {acc.limit} of the pinned file" if acc.limit is not None else ""
    size = (
        f"{questions} questions{first}"
        if questions is not None
        else "as many questions as the file holds, unknown until the models stage (`make "
        "provision`) fetches it there (not in the estimate)"
    )
    return (
        f"Accuracy task {md_code(acc.name)} ({where}): {size}, scorer {acc.scorer}, up to "
        f"{acc.max_tokens} tokens an answer, asked one at a time at temperature 0 after each "
        f"configuration's levels; a configuration passes with greedy-equal answers and at least "
        f"{acc.min_ratio:.0%} of its engine's baseline accuracy. Estimated {duration(seconds)} "
        "over the selected configurations (each answer a whole max_tokens decode at "
        "concurrency 1: an upper bound)."
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
    questions = accuracy_questions(experiment, model_cache)
    if w.prompt_set is not None:
        lines += [_prompt_set_line(experiment, model_cache, cats), ""]
    estimates = [
        estimate(experiment, cfg, model_cache=model_cache, cats=cats, questions=questions or 0)
        for cfg in experiment.select(only)
    ]
    accuracy_s = sum(e.accuracy_s for e in estimates)
    if w.accuracy is not None:
        lines += [_accuracy_line(experiment, model_cache, questions, accuracy_s), ""]
    total = sum(e.total_s for e in estimates)
    lines += [
        f"Estimated wall time: {duration(total)} for {len(estimates)} server start(s) "
        f"(ESTIMATE from the emulator profiles, which are shaped after the seed report's "
        f"dual-RTX-3090 figures; server starts {duration(sum(e.start_s for e in estimates))}"
        + (f", accuracy task {duration(accuracy_s)}" if accuracy_s else "")
        + ").",
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
        with_accuracy = f" (accuracy task {duration(est.accuracy_s)})" if est.accuracy_s else ""
        lines.append(
            f"Image: {md_code(e.image)}; concurrency {', '.join(map(str, e.concurrency))}; "
            f"estimated {duration(est.total_s)}{with_accuracy}."
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
    questions = accuracy_questions(experiment, model_cache) or 0
    return PlanRecord(
        experiment=str(experiment_path) if experiment_path else f"<{experiment.name}>",
        basis=ESTIMATE_BASIS,
        estimates=[
            PlanEstimate(
                name=e.name, start_s=e.start_s, measure_s=e.measure_s, accuracy_s=e.accuracy_s
            )
            for e in (
                estimate(experiment, cfg, model_cache=model_cache, cats=cats, questions=questions)
                for cfg in experiment.configurations
            )
        ],
    )
