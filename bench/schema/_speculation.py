"""What a payload records beyond speed and acceptance (issue 48): how the engine verified the
drafts (lossless or not, fixed depth or not), the synthetic acceptance a control configuration
forced, and the accuracy task the server answered after its timed levels.

Each is optional on the payload (left out while unset), so payloads written before them read
and write back byte for byte.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.core import NonNegativeInt, StrictModel

#: how an engine verified the drafts: vLLM 0.33.0 ``rejection_sample_method`` (standard,
#: synthetic, block, fly; config/speculative.py:83), SGLang's simulated acceptance
#: (``SGLANG_SIMULATE_ACC_LEN``, srt/environ.py:503) recorded as synthetic, none for a baseline
Verification = Literal["none", "standard", "block", "synthetic", "fly", "unknown"]


class SpeculationMode(StrictModel):
    """How this configuration's engine verified and sized its drafts, read from its flags and
    from the engine's own start-up log. ``lossless``: its greedy output is meant to equal the
    baseline's (false for lossy verification and for a synthetic-acceptance control, whose
    accepted tokens are not the target's); ``fixed_depth``: it drafted ``k`` tokens at every
    step (false for adaptive depth). Figures of a run that is not both are never pooled into
    a lossless claim or a depth sweep's best k."""

    verification: Verification
    lossless: bool
    fixed_depth: bool
    labels: list[str] = Field(
        default_factory=list, description="what the report prints beside the run, e.g. LOSSY"
    )
    from_config: list[str] = Field(
        default_factory=list, description="the configuration's settings that say so"
    )
    from_log: list[str] = Field(
        default_factory=list, description="the engine's own log lines that say so"
    )


class SyntheticAcceptance(StrictModel):
    """A SYNTHETIC ACCEPTANCE control: the same engine and flags as ``of``, with the engine's
    own knob forcing the acceptance measured for ``of``'s real drafter. Its speed is the
    engine's at that acceptance, whatever the drafter proposes; its output is not the model's."""

    of: str = Field(description="the configuration whose measured acceptance is forced")
    acceptance_length: float = Field(ge=1.0, description="mean acceptance length set")
    rates: list[float] = Field(
        default_factory=list,
        description="unconditional per-position acceptance rates set (empty: length only)",
    )
    knob: str = Field(description="the engine setting that forced it, as passed")
    source: str = Field(description="the measured counters the figure came from")


class AccuracyItem(StrictModel):
    """One question of the accuracy task and how the server's answer scored."""

    id: str
    expected: str
    got: str | None = Field(default=None, description="the answer extracted from the output")
    correct: bool
    completion_tokens: NonNegativeInt | None = None
    output_sha256: str | None = None
    error: str | None = Field(default=None, description="why there is no usable answer")


class AccuracyRecord(StrictModel):
    """The accuracy task as one configuration's server answered it (temperature 0, after the
    timed levels, through the same client): every question, its expected and extracted answer.
    The report recomputes the score from ``items``."""

    task: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    source: str = Field(
        description="the local file, the dataset id@revision file, or the URL it was fetched from"
    )
    scorer: str
    max_tokens: int = Field(ge=1)
    concurrency: int = Field(ge=1)
    items: list[AccuracyItem] = Field(default_factory=list)
