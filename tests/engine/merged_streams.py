"""Levels a busy machine made unmeasurable, for the engine tier's fixtures to measure again.

On two loaded cores (and at times on a quiet one: CI's engine phase, 2026-12-07) vLLM's CPU
API server falls behind its engine core and hands a stream's deltas over merged: every token
arrives in one chunk, the decode rate is undefined and the payload rightly invalid
(``invalid_iteration``). That is the machine's doing, not the engine's: a fixture resumes the
run, as a user would, and ``--resume`` measures every invalid level again. Any other
invalidity is left for the tests to fail on (issue 50, item 1)."""

from __future__ import annotations

from pathlib import Path

from bench.schema import read_payload

MERGED = "all tokens arrived in one chunk"
#: resumes a fixture allows for merged streams before its tests see what is left
RESUMES = 2


def merged_only(out: Path) -> list[str]:
    """The payloads of run folder ``out`` invalid for no other reason than streams that
    arrived in one chunk."""
    names = []
    for path in sorted((out / "payloads").glob("*.json")):
        ev = read_payload(path).evidence
        bad = [r for r in ev.validity.reasons if r.severity == "invalid"]
        streams = [r for it in ev.iterations if not it.valid for r in it.requests
                   if r.error is not None or r.reasons]  # fmt: skip
        if (
            bad
            and streams
            and all(r.code == "invalid_iteration" for r in bad)
            and all(r.error is None and all(MERGED in x for x in r.reasons) for r in streams)
        ):
            names.append(path.name)
    return names
