"""The chain: a next-token rule every seed-method model here is built around, so that each
speculative method's acceptance is known before a server starts.

A *chain target* maps the current token ``t`` to ``sigma(t)``, whatever came before: every
block of the network adds nothing to the residual stream (its output projection is zero), so
the last hidden state is the current token's embedding ``E[t]``, and the LM head's row ``u``
is ``E[sigma^-1(u)]``, whose dot product with ``E[t]`` is largest at ``u = sigma(t)``.
``sigma`` is one cycle through every ordinary token (never a special one), so it has no fixed
point: ``sigma(sigma(t)) != sigma(t)``. Greedy output is ``t, sigma(t), sigma^2(t), ...``.

One embedding dimension (:data:`FLAG`) is a flag: ``+FLAG_VALUE`` on every token, the
opposite on the DFlash mask token, so a DFlash draft can find the one real token of its query
block by attention (bench/tinymodel/_dflash.py).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bench.core import InputError
from bench.tinymodel._safetensors import from_bf16_bits, to_bf16_bits

F32 = npt.NDArray[np.float32]

#: the flag dimension: the last one of the hidden state
FLAG = -1
FLAG_VALUE = 1.0
#: the smallest accepted gap between the chain token's logit and the runner-up, in units of
#: the logits of an RMS-normalised hidden state; bf16 rounding moves a logit by far less
MIN_MARGIN = 8.0


def chain_cycle(seed: int, ordinary: list[int]) -> dict[int, int]:
    """``sigma`` as {token: next token}: one random cycle through ``ordinary`` (>= 2 ids)."""
    if len(ordinary) < 2:
        raise InputError("tiny-model", "the chain needs at least two ordinary tokens")
    order = [int(i) for i in np.random.default_rng([seed, 7]).permutation(sorted(ordinary))]
    return {a: b for a, b in zip(order, order[1:] + order[:1], strict=True)}


def bf16(values: F32) -> F32:
    """``values`` as the server sees them: rounded to bfloat16 and back."""
    return from_bf16_bits(to_bf16_bits(values))


def chain_embedding(seed: int, vocab_size: int, hidden: int, mask_id: int) -> F32:
    """Rows ~ N(0, 1) with the flag dimension set to +FLAG_VALUE; the ``mask_id`` row is
    -FLAG_VALUE on the flag and zero elsewhere."""
    rng = np.random.default_rng([seed, 8])
    emb = rng.standard_normal((vocab_size, hidden), dtype=np.float32)
    emb[:, FLAG] = FLAG_VALUE
    emb[mask_id] = 0.0  # the mask token carries nothing but its flag
    emb[mask_id, FLAG] = -FLAG_VALUE
    return bf16(emb)


def chain_lm_head(embedding: F32, sigma: dict[int, int]) -> F32:
    """Row ``sigma(t)`` is ``E[t]``; rows of tokens outside the cycle are zero (never chosen:
    the chain token's logit is positive, far above zero)."""
    head = np.zeros_like(embedding)
    for t, nxt in sigma.items():
        head[nxt] = embedding[t]
    return head


def rms_normed(x: F32, eps: float = 1e-6) -> F32:
    """RMSNorm without a scale (the scale of every norm here is 1)."""
    out: F32 = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps))
    return out


def check_chain(embedding: F32, head: F32, sigma: dict[int, int]) -> float:
    """Prove (in float32, on the bf16 weights) that the head maps every cycle token ``t`` to
    ``sigma(t)``, by a margin of at least :data:`MIN_MARGIN`; the smallest margin found."""
    tokens = np.array(sorted(sigma))
    logits = rms_normed(embedding[tokens]) @ head.T
    want = np.array([sigma[int(t)] for t in tokens])
    best = logits[np.arange(len(tokens)), want]
    logits[np.arange(len(tokens)), want] = -np.inf
    margin = float(np.min(best - logits.max(axis=1)))
    if margin < MIN_MARGIN:
        raise InputError("tiny-model", f"chain margin {margin:.2f} < {MIN_MARGIN}: other seed")
    return margin
