"""Iterations a busy client machine could not time, measured again.

An engine's API server that falls behind its engine core (vLLM's CPU build on two loaded cores,
seen in CI) hands a stream's deltas over merged: every token reaches the client in one read, the
decode rate is undefined and the iteration invalid, through no fault of the engine. The measured
loop sends such an iteration again, at most ``MERGED_RETRIES`` times, with prompts from outside
the seeded sequence (a repeated prompt would hit the prefix cache and time a cached prefill;
a prompt taken from the sequence would shift every later iteration away from the other
configurations' prompts), and says so in a warning. Only an iteration whose every invalid
request is invalid for this reason alone is sent again; any other reason stands."""

from __future__ import annotations

from bench.schema import IterationRecord

#: the reason ``interpret_chat_stream`` gives a stream whose tokens all arrived in one read
MERGED = "all tokens arrived in one chunk: decode rate undefined"
#: times a measured iteration is sent again because its streams arrived merged
MERGED_RETRIES = 2


def merged_only(it: IterationRecord) -> bool:
    """Whether ``it`` is invalid only because streams arrived in one chunk."""
    bad = [r for r in it.requests if not r.valid]
    return bool(bad) and all(r.error is None and r.reasons == [MERGED] for r in bad)


def merged_note(it: IterationRecord, attempt: int) -> str:
    """The warning a payload keeps for a discarded attempt of iteration ``it``."""
    bad = [r.stream_index for r in it.requests if not r.valid]
    return (
        f"iteration {it.index}: {len(bad)}/{len(it.requests)} stream(s) (index "
        f"{', '.join(map(str, bad))}) arrived in one chunk, so the client could not time "
        f"them (a loaded machine); attempt {attempt + 1} discarded and the iteration sent "
        "again with prompts outside the seeded sequence (its requests pair with no other "
        "configuration's in the lossless check)"
    )
