"""Emulator profiles for tests that run a matrix on the emulator: the same profile without its
emulated model load and warm-up (seconds of every server start otherwise), its decode speed kept.

Why the decode speed is kept: a test whose oracle needs a valid payload needs each stream to
reach the client in more than one read (all tokens in one read leave the decode rate undefined:
an invalid request). At a time scale of 0.01 a 16-token stream lasts ~2 ms, and a loaded
machine's client reads it whole; at the profile's own speed it lasts a few hundred ms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bench.emulator.profile import Profile, load_profile


def without_load_time(configuration: dict[str, Any], folder: Path) -> None:
    """Point an experiment configuration (as read from YAML) at a copy of its emulator profile
    in ``folder`` whose ``load_s`` and ``warmup_s`` are 0."""
    prof = load_profile(configuration["emulator"]["profile"]).model_dump(mode="json")
    prof.update(load_s=0.0, warmup_s=0.0)
    where = folder / f"{configuration['name']}.yaml"
    where.write_text(yaml.safe_dump(prof))
    configuration["emulator"]["profile"] = str(where)


def profile_without_load_time(name: str) -> Profile:
    """Profile ``name`` with ``load_s`` and ``warmup_s`` 0, for an in-thread emulator
    (``serve_in_thread``): ready at once, streaming at the profile's own speed unless the
    caller passes a time scale."""
    return load_profile(name).model_copy(update={"load_s": 0.0, "warmup_s": 0.0})
