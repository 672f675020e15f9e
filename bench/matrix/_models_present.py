"""Every model a real run's configurations load must be on the host before anything is
written: a missing model folder otherwise starts each server only to see it exit at once
("Repo id must be in the form ..." from the engine's hub client), once per configuration,
with a half-made run folder left behind. Docker mounts ``--model-cache`` at ``/models``, so a
model ``/models/X`` is ``<model-cache>/X`` on the host; an engine installed here
(``--local-engine``) opens the experiment's path itself."""

from __future__ import annotations

from pathlib import Path

from bench.core import InputError
from bench.schema import Configuration, Experiment


def model_folder(exp: Experiment, key: str, model_cache: str, local_engine: bool) -> Path:
    """Where the engine will look for model ``key`` (a key of ``exp.models``)."""
    pin = exp.models[key]
    return Path(pin.path) if local_engine else Path(model_cache) / pin.dirname


def check_models_present(
    exp: Experiment, selected: list[Configuration], model_cache: str, local_engine: bool
) -> None:
    """Exit 2 naming the option, the missing folders and the configurations that need them."""
    needs: dict[str, list[str]] = {}
    for cfg in selected:
        for key in (exp.target_key_for(cfg), cfg.draft_model):
            if key is not None:
                needs.setdefault(key, []).append(cfg.name)
    missing = [
        f"{model_folder(exp, k, model_cache, local_engine)} (models.{k}, for {', '.join(names)})"
        for k, names in needs.items()
        if not model_folder(exp, k, model_cache, local_engine).is_dir()
    ]
    if missing:
        option = "--local-engine" if local_engine else "--model-cache"
        raise InputError(
            option,
            "no model folder at " + "; ".join(missing) + ": download the models first (`make "
            "provision` does, into /var/lib/specbench/models) or point --model-cache at them",
        )
