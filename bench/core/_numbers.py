"""The ranges of specbench's numbers, in one place: the pydantic models take their numeric types
from here and the command line's option types (bench/commands/_params.py) check the same
ranges, so a file and a flag that mean the same thing refuse the same values with one reason.

Every float is finite unless a model says otherwise (StrictModel and MutableModel set
``allow_inf_nan=False``): NaN and +-Infinity are never a time, a rate or a count. A ``Range``
adds bounds; the aliases below are the ones the models share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import Field


@dataclass(frozen=True)
class Range:
    """A closed or open interval of finite numbers (``None``: unbounded on that side)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def describe(self) -> str:
        """'a finite number > 0', 'a finite number from 0 to 1', ..."""
        lo = None if self.lo is None else f"{'>' if self.lo_open else '>='} {self.lo:g}"
        hi = None if self.hi is None else f"{'<' if self.hi_open else '<='} {self.hi:g}"
        if lo and hi and not self.lo_open and not self.hi_open:
            return f"a finite number from {self.lo:g} to {self.hi:g}"
        return " and ".join(["a finite number", *(b for b in (lo, hi) if b)]).replace(
            " and ", " ", 1
        )

    def problem(self, value: float) -> str | None:
        """Why ``value`` is outside the range (None when it is inside)."""
        if isinstance(value, float) and not math.isfinite(value):
            return f"{value} is not {self.describe()}"
        below = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
        above = self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi)
        return f"{_show(value)} is not {self.describe()}" if below or above else None

    def field(self) -> Any:
        """The pydantic constraints of this range (``Annotated[float, r.field()]``)."""
        lo, hi = self.lo, self.hi
        return Field(
            allow_inf_nan=False,
            gt=lo if self.lo_open else None,
            ge=None if self.lo_open else lo,
            lt=hi if self.hi_open else None,
            le=None if self.hi_open else hi,
        )


def _show(value: float) -> str:
    """A number for a message: ``repr`` of a float, an integer's digits cut to 20 (an int too
    large for a float cannot be formatted with ``:g``)."""
    text = repr(value) if isinstance(value, float) else str(value)
    return text if len(text) <= 20 else f"{text[:17]}... ({len(text)} digits)"


#: any finite number (a clock reading, a logprob)
FINITE: Final = Range()
#: 0 or more (times since a send, durations, rates, counts)
NON_NEGATIVE: Final = Range(lo=0)
#: more than 0 (timeouts, intervals, sizes)
POSITIVE: Final = Range(lo=0, lo_open=True)
#: 0 to 1 (an acceptance rate)
FRACTION: Final = Range(lo=0, hi=1)
#: the share of a GPU's memory an engine may take: more than 0, at most 1
MEMORY_FRACTION: Final = Range(lo=0, hi=1, lo_open=True)
#: the emulator's time scale: every duration multiplied by it. Above 100 an emulated run would
#: take days (the profiles' real-time schedules are seconds per request): a typo, not a setting
TIME_SCALE: Final = Range(lo=0, hi=100, lo_open=True)
#: seconds a run waits for something (a request, a server's start): at most a week
TIMEOUT_S: Final = Range(lo=0, hi=7 * 24 * 3600, lo_open=True)

#: the std of the noise added to the tiny draft model's weights: 10 is fifty times the weights'
#: own std (0.2), far past a draft that still agrees with its target at all
DRAFT_NOISE: Final = Range(lo=0, hi=10)
#: --seconds of telemetry-sample: at least 0.1 s, at most a day
SAMPLE_SECONDS: Final = Range(lo=0.1, hi=24 * 3600)
#: --interval of telemetry-sample: 10 ms to a minute
SAMPLE_INTERVAL_S: Final = Range(lo=0.01, hi=60)

#: tokens of one prompt or one answer: 16 Mi, past any model's context (a larger count is a
#: typo that would build a prompt of gigabytes before the first request)
MAX_TOKENS: Final = 2**24
#: requests in flight at once
MAX_CONCURRENCY: Final = 4096
#: warmup or measured iterations of one concurrency level
MAX_ITERATIONS: Final = 100_000

FiniteFloat = Annotated[float, FINITE.field()]
NonNegativeFloat = Annotated[float, NON_NEGATIVE.field()]
PositiveFloat = Annotated[float, POSITIVE.field()]
Fraction = Annotated[float, FRACTION.field()]
MemoryFraction = Annotated[float, MEMORY_FRACTION.field()]
TimeScale = Annotated[float, TIME_SCALE.field()]
TimeoutSeconds = Annotated[float, TIMEOUT_S.field()]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveInt = Annotated[int, Field(ge=1)]
PromptTokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
OutputTokens = Annotated[int, Field(ge=2, le=MAX_TOKENS)]
Concurrency = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]
WarmupCount = Annotated[int, Field(ge=0, le=MAX_ITERATIONS)]
IterationCount = Annotated[int, Field(ge=1, le=MAX_ITERATIONS)]
