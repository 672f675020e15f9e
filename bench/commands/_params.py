"""Numeric option types: every float option of the command line is parsed here, against the
range its model field has (bench.core._numbers), before the command does anything. A value
outside it is typer's usage error, exit 2, naming the option: ``Invalid value for
'--time-scale': inf is not a finite number > 0 and <= 100``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_core import PydanticCustomError

from bench.core import Range


def _refuse(why: str) -> PydanticCustomError:
    # typer validates options with pydantic: a custom error keeps its text as is (a ValueError
    # would read "Value error, ..."); typer names the option in front of it
    return PydanticCustomError("number", "{why}", {"why": why})


@dataclass(frozen=True)
class Number:
    """A typer ``parser`` for a float option in ``rng`` (finite whatever the range); typer
    turns the refusal into its BadParameter for the option (exit 2)."""

    rng: Range

    def __call__(self, text: object) -> float:
        if isinstance(text, float):  # a default value, already a number
            value = text
        else:
            try:
                value = float(str(text))
            except ValueError:
                raise _refuse(f"{text!r} is not a number") from None
        if self.rng.problem(value) is not None:
            typed = text if isinstance(text, float) else str(text).strip()[:40]
            raise _refuse(f"{typed} is not {self.rng.describe()}")
        return value


def number(rng: Range) -> Number:
    """``typer.Option(parser=number(TIME_SCALE))``."""
    return Number(rng)
