"""Secrets kept out of every file specbench writes: the Hugging Face token's value, wherever an
engine's log, a failure reason or a report would otherwise carry it."""

from __future__ import annotations

import os
from collections.abc import Iterable

from bench.engines._base import TOKEN_ENV


def secret_values() -> list[str]:
    """Values that must never appear in a file we write (the HF token)."""
    vals = [os.environ.get(TOKEN_ENV, ""), os.environ.get("HUGGING_FACE_HUB_TOKEN", "")]
    return [v for v in vals if len(v) >= 4]


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    for s in secret_values() if secrets is None else secrets:
        text = text.replace(s, "***")
    return text
