"""Per configuration, what would run: the exact server argv, the equivalent ``docker run`` line
and the deviations from the seed. ``specbench plan`` and the report's reproduction section both
render these entries."""

from __future__ import annotations

import shlex

from bench.core import StrictModel
from bench.engines._base import DEFAULT_MODEL_CACHE
from bench.engines._registry import get_engine
from bench.schema import Deviation, Experiment


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
