"""The shared pydantic base for every model that crosses a boundary (files, HTTP, CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bench.core._errors import InputError, describe_validation_error
from bench.core._read import parse_json, read_text


class StrictModel(BaseModel):
    """Unknown keys are an error, values are validated on assignment, floats are finite (NaN
    and +-Infinity refused: bench.core._numbers), and models are immutable unless a subclass
    says otherwise."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=True, allow_inf_nan=False
    )


class MutableModel(BaseModel):
    """Same strictness, but fields may be reassigned (records built up while measuring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


M = TypeVar("M", bound=BaseModel)


def read_json_model(path: Path, model: type[M], *, source: str | None = None) -> M:
    """Read ``path`` as JSON and validate it as ``model``. Any failure is an InputError naming
    ``source`` (default: the path) and, for a validation error, the field at fault."""

    where = source or str(path)
    try:
        text = read_text(path)
    except InputError as err:
        raise InputError(where, err.reason) from None
    # the reading layer's JSON (duplicate keys, NaN/Infinity and depth refused), then the model
    data = parse_json(text, where)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise describe_validation_error(where, err) from None
