"""The shared pydantic base for every model that crosses a boundary (files, HTTP, CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError


class StrictModel(BaseModel):
    """Unknown keys are an error, values are validated on assignment, and models are immutable
    unless a subclass says otherwise."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=True)


class MutableModel(BaseModel):
    """Same strictness, but fields may be reassigned (records built up while measuring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


M = TypeVar("M", bound=BaseModel)


def read_json_model(path: Path, model: type[M], *, source: str | None = None) -> M:
    """Read ``path`` as JSON and validate it as ``model``. Any failure is an InputError naming
    ``source`` (default: the path) and, for a validation error, the field at fault."""
    from bench.errors import InputError, describe_validation_error

    where = source or str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(where, f"cannot read JSON: {err}") from None
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise describe_validation_error(where, err) from None
