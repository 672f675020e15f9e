"""The emulated target model's choice at each output position, with its logprobs.

The emulator has no model: the target's greedy token at position ``i`` is ``" w{i}"``
(``tokens.completion_text``) and its runner-up ``" v{i}"``. Their logprobs are a fixed function
of ``i`` so every server, speculative or not, reports the same numbers for the same position:

- the gap between them is ``GAP_SMALLEST`` (1/32 nats, the smallest non-zero top-2 gap in the
  recorded GPU stream, tests/fixtures/vllm-gpu/stream-logprobs.sse) at every ``NEAR_TIE_EVERY``-th
  position (a bf16 near-tie) and at least half a nat elsewhere.

Two failure modes change what a speculative server emits (``FailMode``):

- ``near_tie_flip``: at the first near-tie at or after ``failures.after_tokens`` the server picks
  the runner-up, and its own logprobs say so (the two swap, same gap): what a GPU's different
  kernels do to a healthy speculative run;
- ``lossy_draft``: from ``failures.after_tokens`` on, draft tokens go out unverified (``" d{i}"``),
  and the target's logprobs show they were not its choice: a broken draft that changes the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: every NEAR_TIE_EVERY-th position (from NEAR_TIE_AT) is a near-tie of the emulated target
NEAR_TIE_EVERY: Final = 16
NEAR_TIE_AT: Final = 11
GAP_SMALLEST: Final = 1 / 32
#: how far below the target's top-1 an unverified draft token sits (nats)
LOSSY_PENALTY: Final = 6.0


@dataclass(frozen=True)
class Emission:
    """One emitted token and the candidates the server reports at its position (the sampled
    token first, then the others by logprob: vLLM's order, v1/engine/logprobs.py)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


def is_near_tie(i: int) -> bool:
    return i % NEAR_TIE_EVERY == NEAR_TIE_AT


def target_top(i: int) -> tuple[tuple[str, float], tuple[str, float]]:
    """The target's top-2 at position ``i``: (greedy token, logprob), (runner-up, logprob)."""
    top1 = -0.25 - 0.125 * (i % 5)
    gap = GAP_SMALLEST if is_near_tie(i) else 0.5 + 0.25 * (i % 4)
    return (f" w{i}", top1), (f" v{i}", top1 - gap)


def first_near_tie(start: int) -> int:
    """The first near-tie position at or after ``start``."""
    return start + (NEAR_TIE_AT - start) % NEAR_TIE_EVERY


def emission(i: int, *, flip_at: int | None = None, lossy_from: int | None = None) -> Emission:
    """What the server emits at position ``i``: the target's greedy token, the runner-up at
    ``flip_at`` (top-2 swapped), or an unverified draft token from ``lossy_from`` on."""
    (w, lw), (v, lv) = target_top(i)
    if flip_at is not None and i == flip_at:
        return Emission(v, lw, ((v, lw), (w, lv)))
    if lossy_from is not None and i >= lossy_from:
        d = f" d{i}"
        return Emission(d, lw - LOSSY_PENALTY, ((d, lw - LOSSY_PENALTY), (w, lw), (v, lv)))
    return Emission(w, lw, ((w, lw), (v, lv)))
