"""Prompts of exactly P tokens as the server counts them, each opened by a unique nonce.

The count that matters is the server's ``usage.prompt_tokens``: the chat template's tokens
included. A prompt is ``"<nonce> <filler>"``: the nonce (``NONCE_PREFIX`` + a fresh word
sequence) defeats the prefix cache, the filler is a fixed pseudo-random word text (seed 0) so
every run of every engine sends the same material. ``promptSha256`` hashes the prompt with the
nonce removed, so it is the same for every request of a run.

Sizing, two ways:

- With a tokenizer (``--tokenizer DIR`` holding ``tokenizer.json``, loaded with the
  ``tokenizers`` library): each prompt's content is sized with the tokenizer; the chat
  template's overhead is learnt from one calibration request (server count minus tokenizer
  count of the same content).
- Without one: the server is the tokenizer. Probes of different filler lengths give the
  server's count as a function of filler words; the length is then searched until the server
  says exactly P. Nonces use the same words as the filler, which tokenise one word per token in
  the common BPE vocabularies, so the count does not move between nonces; every measured
  request's ``prompt_tokens`` is still checked against P.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from bench.core import InputError, exists, read_text

NONCE_PREFIX = "Request"
NONCE_WORDS = 6

# Short, frequent English words: one token each (with the leading space) in GPT-2/Llama/Qwen
# style vocabularies, which keeps nonce and filler sizes stable without a tokenizer.
_WORDS_TEXT = (
    "the of and to in is was for on are as with his they at be this from have or by one had "
    "not but what all were when we there can an your which their said if do will each about "
    "how up out them then she many some so these would other into has more her two like him "
    "see time could no make than first been its who now people my made over did down only way "
    "find use may water long little very after words called just where most know"
)
WORDS: tuple[str, ...] = tuple(_WORDS_TEXT.split())


def filler_words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


def new_nonce(rng: random.Random | None = None) -> str:
    """``NONCE_PREFIX`` + six words: from ``rng`` (a seeded sequence) or fresh randomness."""
    rng = rng or random.Random(secrets.randbits(64))
    return NONCE_PREFIX + " " + " ".join(rng.choice(WORDS) for _ in range(NONCE_WORDS)) + "."


def nonce_stream(seed: int | None, concurrency: int) -> random.Random:
    """The nonce sequence of one measurement. With a seed, two servers get the same prompts in
    the same order at the same concurrency (greedy outputs can be compared request by request);
    the concurrency is part of the stream, so the levels swept on one server never repeat a
    prompt (no prefix-cache hit). Without a seed, fresh randomness."""
    if seed is None:
        return random.Random(secrets.randbits(64))
    return random.Random(f"specbench-prompts:{seed}:c{concurrency}")


def strip_nonce(prompt: str) -> str:
    """The prompt without its nonce: what ``promptSha256`` hashes."""
    return prompt.split(".", 1)[1] if prompt.startswith(NONCE_PREFIX) else prompt


def prompt_sha256(prompt: str) -> str:
    return hashlib.sha256(strip_nonce(prompt).encode()).hexdigest()


def hf_cache_dir() -> Path:
    """The HF hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface") / "hub"


def _cached_ref(ref: Path) -> str | None:
    """The commit a HF cache ref names; None when there is none. A ref that is not one commit
    (40 hex) is refused, naming it: its text becomes a path below the cache."""
    if not exists(ref):
        return None
    text = read_text(ref, what="Hugging Face cache ref", max_bytes=4096).strip()
    if not re.fullmatch(r"[0-9a-f]{40}", text):
        raise InputError(str(ref), f"not a commit (40 hex digits): {text[:60]!r}")
    return text


def find_cached_tokenizer(hf_id: str, revision: str | None = None) -> Path | None:
    """The target's tokenizer.json in the local HF cache (no download): the snapshot of
    ``revision`` if given, else the one ``refs/main`` points at; None when it is not there."""
    repo = hf_cache_dir() / ("models--" + hf_id.replace("/", "--"))
    if revision is None:
        revision = _cached_ref(repo / "refs" / "main")
    if revision is None:
        return None
    path = repo / "snapshots" / revision / "tokenizer.json"
    return path if path.is_file() else None


class TokenCounter(Protocol):
    def __call__(self, text: str) -> int: ...


def load_tokenizer(directory: Path) -> TokenCounter:
    """``DIR/tokenizer.json`` -> a function counting tokens without special tokens."""
    path = directory / "tokenizer.json" if directory.is_dir() else directory
    if not path.is_file():
        raise InputError("--tokenizer", f"{path} does not exist (expected a tokenizer.json)")
    # optional heavy dependency: only when a tokenizer file is given or cached
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as err:
        raise InputError("--tokenizer", f"cannot load {path}: {err}") from None

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    return count


# Asks the server how many prompt tokens a prompt is; returns usage.prompt_tokens.
ServerCount = Callable[[str], Awaitable[int]]


class PromptFactory:
    """Builds prompts of exactly ``target`` server-counted tokens."""

    def __init__(
        self, target: int, counter: TokenCounter | None, nonces: random.Random | None = None
    ) -> None:
        if target < 1:
            raise InputError("--prompt-tokens", "must be at least 1")
        self.target = target
        self.counter = counter
        # Measured prompts draw from ``nonces``; calibration probes never do, so the prompt
        # sequence does not depend on how many probes a server needed.
        self._nonces = nonces or random.Random(secrets.randbits(64))
        # an iteration measured again draws from here: the sequence above stays aligned with
        # the other configurations' (bench/measure/_merged.py)
        self._aside = random.Random(secrets.randbits(64))
        self.overhead: int | None = None  # template tokens (tokenizer mode)
        self.words: int | None = None  # filler words (server mode)
        self._filler = filler_words(max(64, target * 2))

    def _text(self, nonce: str, n_words: int) -> str:
        return nonce + " " + " ".join(self._filler[:n_words])

    async def calibrate(self, server_count: ServerCount, allow_mismatch: bool = False) -> None:
        """Learn the template overhead (tokenizer) or the filler length (server only). When no
        filler length hits P exactly, ``allow_mismatch`` takes the closest instead of failing."""
        if self.counter is not None:
            probe = self._text(new_nonce(), min(self.target, 32))
            self.overhead = await server_count(probe) - self.counter(probe)
            if self.overhead < 0 or self.overhead >= self.target:
                raise InputError(
                    "--prompt-tokens",
                    f"the chat template alone is {self.overhead} tokens; P={self.target} "
                    "leaves no room for a prompt",
                )
            return
        nonce = new_nonce()
        a_words = 8
        a = await server_count(self._text(nonce, a_words))
        if a > self.target:
            raise InputError(
                "--prompt-tokens",
                f"the shortest prompt the server counts is {a} tokens, above P={self.target}",
            )
        b_words = a_words + 64
        b = await server_count(self._text(nonce, b_words))
        per_word = max((b - a) / (b_words - a_words), 1e-6)
        words = a_words + round((self.target - a) / per_word)
        seen: dict[int, int] = {}
        for _ in range(12):
            words = max(0, min(words, len(self._filler)))
            got = seen.get(words)
            if got is None:
                got = seen[words] = await server_count(self._text(nonce, words))
            if got == self.target:
                self.words = words
                return
            step = round((self.target - got) / per_word) or (1 if got < self.target else -1)
            words += step
            if words in seen and seen[words] != self.target and abs(step) == 1:
                break
        if allow_mismatch and seen:
            self.words = min(seen, key=lambda w: abs(seen[w] - self.target))
            return
        raise InputError(
            "--prompt-tokens",
            f"cannot reach exactly {self.target} server-counted tokens (closest: "
            f"{min(seen.values(), key=lambda v: abs(v - self.target))}); pass --tokenizer DIR "
            "or --allow-prompt-mismatch",
        )

    def build(self, aside: bool = False) -> str:
        """The next prompt (next nonce of the sequence, or with ``aside`` a fresh nonce from
        outside it) sized to the target."""
        nonce = new_nonce(self._aside if aside else self._nonces)
        if self.counter is None:
            if self.words is None:
                raise RuntimeError("calibrate() first")
            return self._text(nonce, self.words)
        if self.overhead is None:
            raise RuntimeError("calibrate() first")
        want = self.target - self.overhead
        lo, hi = 0, len(self._filler)
        # Smallest word count whose content reaches the wanted token count.
        while lo < hi:
            mid = (lo + hi) // 2
            if self.counter(self._text(nonce, mid)) < want:
                lo = mid + 1
            else:
                hi = mid
        text = self._text(nonce, lo)
        n = self.counter(text)
        if n == want:
            return text
        # The last word overshoots: drop characters from the end until the count fits.
        while n > want and len(text) > len(nonce):
            text = text[:-1]
            n = self.counter(text)
        if n != want:
            raise InputError(
                "--prompt-tokens", f"cannot build a prompt of exactly {self.target} tokens"
            )
        return text
