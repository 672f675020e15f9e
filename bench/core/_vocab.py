"""The project's shared vocabulary, each fact once: engine names, speculative methods, the
SIMULATED banner, the emulator image tag, and the timestamp format of every artifact."""

from __future__ import annotations

import datetime as dt
from typing import Final, Literal

# DRAFT_MODEL (a separate small model as the drafter) and NGRAM (prompt lookup) exist for the
# engine tier on vLLM's CPU build; the seed's comparison uses DFLASH and MTP.
SpecMethod = Literal["DFLASH", "MTP", "DRAFT_MODEL", "NGRAM", "NONE"]
# Methods whose drafter is a separate checkpoint (the configuration names it in draft_model).
DRAFT_CHECKPOINT_METHODS: Final = ("DFLASH", "DRAFT_MODEL")
EngineName = Literal["vllm", "sglang"]
ENGINE_NAMES: Final[tuple[EngineName, ...]] = ("vllm", "sglang")

# The tag bench.emulator.image builds and the matrix runs in emulate mode.
EMULATOR_IMAGE: Final = "specbench/emulator:dev"

#: a served model's alias (``--served-model-name``, the request's ``model``): a name, never
#: free text; it is printed in plans and reports and matched against the server's answers
SERVED_NAME: Final = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$"

# Every artifact of an emulated run carries this line; publish refuses it.
SIMULATED_BANNER: Final = (
    "SIMULATED: produced by the specbench emulator, not by a real engine or GPU."
)


# Every report of a real engine serving a generated toy model carries this line; publish refuses
# it (the engine tier: vLLM's CPU build on a tiny random-weight model).
TOY_MODEL_BANNER: Final = (
    "REAL ENGINE, TOY MODEL: a real engine served a generated tiny model; it proves the "
    "measurement pipeline, it is not a benchmark result."
)


def canonical_spec_method(value: object) -> object:
    """``dflash``/``DFlash``/``mtp`` -> ``DFLASH``/``MTP``; ``none``/empty -> ``NONE``."""
    if isinstance(value, str):
        v = value.strip().upper()
        return "NONE" if v in ("", "NONE", "OFF") else v
    return value


def utc_now() -> str:
    """Now, UTC, ISO 8601 to the second: the one timestamp format of every artifact."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
