"""Emulator profiles for tests that run a matrix on the emulator: the same profile without its
emulated model load and warm-up (seconds of every server start otherwise), its decode speed kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bench.emulator.profile import load_profile


def without_load_time(configuration: dict[str, Any], folder: Path) -> None:
    """Point an experiment configuration (as read from YAML) at a copy of its emulator profile
    in ``folder`` whose ``load_s`` and ``warmup_s`` are 0."""
    prof = load_profile(configuration["emulator"]["profile"]).model_dump(mode="json")
    prof.update(load_s=0.0, warmup_s=0.0)
    where = folder / f"{configuration['name']}.yaml"
    where.write_text(yaml.safe_dump(prof))
    configuration["emulator"]["profile"] = str(where)
