"""Levels a busy machine made unmeasurable, for the engine tier's fixtures to measure again.

On two loaded cores (and at times on a quiet one: CI's engine phase, 2026-12-07) vLLM's CPU
API server falls behind its engine core and hands a stream's deltas over merged: every token
arrives in one chunk, the decode rate is undefined and the payload rightly invalid
(``invalid_iteration``). That is the machine's doing, not the engine's. The measured loop
sends such an iteration of synthetic prompts again, twice at most (``bench/measure/_merged.py``);
what is left (a prompt set's iteration, which cannot be sent again without a prefix-cache hit,
or one merged three times) a fixture resumes, as a user would: ``--resume`` measures every
invalid level again. Any other invalidity is left for the tests to fail on (issue 50, item 1)."""

from __future__ import annotations

from pathlib import Path

from bench.measure._merged import MERGED
from bench.schema import Payload, read_payload

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


def resent(payload: Payload) -> set[int]:
    """The measured iterations of ``payload`` sent again because their streams arrived merged:
    their recorded prompts are from outside the seeded sequence (bench/measure/_merged.py)."""
    return {it.index for it in payload.evidence.iterations if it.discarded and not it.warmup}


def unpaired(base: Payload, run: Payload) -> int:
    """Requests of ``run`` that cannot pair with ``base``'s: one iteration's worth for each
    iteration either run sent again with prompts outside the seeded sequence."""
    c = run.evidence.workload.concurrency
    return c * len(resent(base) | resent(run))
