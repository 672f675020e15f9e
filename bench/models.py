"""The shared pydantic base for every model that crosses a boundary (files, HTTP, CLI)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are an error, values are validated on assignment, and models are immutable
    unless a subclass says otherwise."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=True)


class MutableModel(BaseModel):
    """Same strictness, but fields may be reassigned (records built up while measuring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
