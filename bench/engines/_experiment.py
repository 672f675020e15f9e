"""Experiments with their engine checks: the schema validates the document, each engine checks
that its configurations' flags agree with method, tokens and draft path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core import InputError
from bench.engines._registry import get_engine
from bench.schema import (
    Configuration,
    Deviation,
    Experiment,
    PinnedExperiment,
    apply_lock,
    experiment_path,
    lock_path_for,
    parse_experiment_document,
    read_experiment_document,
    read_lock,
)


def parse_experiment(data: Any, source: str) -> Experiment:
    """Validate a parsed experiment document, then every configuration against its engine;
    a depth sweep is expanded into one configuration per depth (each checked the same way)."""
    exp = parse_experiment_document(data, source)
    for i, cfg in enumerate(exp.configurations):
        problems = get_engine(cfg.engine).check(cfg, exp)
        if problems:
            raise InputError(f"{source}: configurations.{i}.args", problems[0])
    return expand_synthetic_controls(expand_depth_sweeps(exp, source), source)


def at_depth(cfg: Configuration, k: int) -> Configuration:
    """One point of ``cfg``'s depth sweep: named ``<name>-k<k>``, its flags rewritten by the
    engine, and a deviation recorded where k differs from the declared number of tokens."""
    deviations = list(cfg.deviations)
    if k != cfg.spec_num_tokens:
        deviations.append(
            Deviation(
                flag="speculative tokens",
                seed=str(cfg.spec_num_tokens),
                used=str(k),
                reason=f"depth sweep of {cfg.name}: one point of {cfg.depth_sweep}",
            )
        )
    return cfg.model_copy(
        update={
            "name": f"{cfg.name}-k{k}",
            "spec_num_tokens": k,
            "args": get_engine(cfg.engine).depth_args(cfg.args, k),
            "deviations": deviations,
            "depth_sweep": None,
            "depth_of": cfg.name,
        }
    )


def expand_depth_sweeps(exp: Experiment, source: str = "<experiment>") -> Experiment:
    """The experiment with every depth sweep replaced by its points, in declaration order."""
    if not any(c.depth_sweep for c in exp.configurations):
        return exp
    configs: list[Configuration] = []
    for cfg in exp.configurations:
        configs.extend([at_depth(cfg, k) for k in cfg.depth_sweep] if cfg.depth_sweep else [cfg])
    names = [c.name for c in configs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(f"{source}: configurations", f"the depth sweep makes {dup!r} twice")
    out = exp.model_copy(update={"configurations": configs})
    for cfg in configs:
        problems = get_engine(cfg.engine).check(cfg, out)
        if problems:
            raise InputError(f"{source}: configurations ({cfg.name})", problems[0])
    return out


SYNTHETIC_SUFFIX = "-synthetic"


def synthetic_control(cfg: Configuration) -> Configuration:
    """The SYNTHETIC ACCEPTANCE control of ``cfg``: the same engine, method, depth and flags,
    named ``<name>-synthetic``; the matrix sets the engine's synthetic acceptance to what it
    measured for ``cfg`` before it starts the control (never a figure written here)."""
    return cfg.model_copy(
        update={
            "name": f"{cfg.name}{SYNTHETIC_SUFFIX}",
            "synthetic_control": None,
            "synthetic_of": cfg.name,
            "depth_of": None,
            "expect_invalid": None,
            "notes": f"SYNTHETIC ACCEPTANCE control of {cfg.name}: its engine forces the "
            f"acceptance measured for {cfg.name}, so its speed is the engine's at that "
            "acceptance; its output is not the model's",
        }
    )


def expand_synthetic_controls(exp: Experiment, source: str = "<experiment>") -> Experiment:
    """Each configuration with ``synthetic_control: true`` followed by its control."""
    if not any(c.synthetic_control for c in exp.configurations):
        return exp
    configs: list[Configuration] = []
    for cfg in exp.configurations:
        configs += [cfg, synthetic_control(cfg)] if cfg.synthetic_control else [cfg]
    names = [c.name for c in configs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(f"{source}: configurations", f"a synthetic control makes {dup!r} twice")
    return exp.model_copy(update={"configurations": configs})


def with_prompt_set_path(exp: Experiment, source: str) -> Experiment:
    """``exp`` with a local prompt set's path made absolute: it is written relative to the
    experiment file (``source``), which may be run from anywhere."""
    here = Path(source).resolve().parent
    update: dict[str, Any] = {}
    for field in ("prompt_set", "accuracy"):  # the accuracy task's file is pinned the same way
        spec = getattr(exp.workload, field)
        if spec is not None and spec.path is not None and not Path(spec.path).is_absolute():
            update[field] = spec.model_copy(update={"path": str((here / spec.path).resolve())})
    if not update:
        return exp
    return exp.model_copy(update={"workload": exp.workload.model_copy(update=update)})


def load_experiment(path: Path | str) -> Experiment:
    """Read and validate an experiment file (YAML). Exit 2 with the field on any problem."""
    data, source = read_experiment_document(path)
    return with_prompt_set_path(parse_experiment(data, source), source)


def load_pinned_experiment(
    path: Path | str, host: str, lock: Path | str | None = None
) -> PinnedExperiment:
    """The experiment with its pins lock (``<experiment>.lock.yaml`` beside it, or ``lock``)
    applied for ``host``: each pin from the experiment file, else from the lock, else unpinned."""
    data, source = read_experiment_document(path)
    exp = with_prompt_set_path(parse_experiment(data, source), source)
    lock_path = Path(lock) if lock is not None else lock_path_for(experiment_path(path))
    return apply_lock(exp, read_lock(lock_path, exp.name), host, lock_path)
