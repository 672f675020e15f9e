"""The shared pydantic base for every model that crosses a boundary (files, HTTP, CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bench.core._errors import InputError, describe_validation_error


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

    where = source or str(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(where, f"cannot read: {err}") from None
    try:
        # pydantic parses the JSON itself (several times faster than json.loads + validate).
        return model.model_validate_json(raw)
    except ValidationError as err:
        if err.errors()[0]["type"] == "json_invalid":
            raise InputError(where, f"cannot read JSON: {err.errors()[0]['msg']}") from None
        raise describe_validation_error(where, err) from None
