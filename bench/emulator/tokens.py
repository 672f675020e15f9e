"""The emulator's tokenization: a simple, documented rule a client can hit exactly.

The emulator has no real tokenizer. It counts a prompt as:

- every text part of every message: the number of whitespace-separated words
  (``len(text.split())``);
- plus ``PER_MESSAGE`` (4) template tokens per message (``<|im_start|>``, role, newline,
  ``<|im_end|>``), plus ``GENERATION_PROMPT`` (3) for the assistant primer.

So one user message of W words is ``W + 7`` prompt tokens. Generated text is one word per
token (``" w123"``), so ``len(text.split())`` of a completion equals its token count. The rule
is exposed in ``/v1/models`` (field ``emulator.tokenizer``) and ``POST /emulator/tokenize``.
"""

from __future__ import annotations

from typing import Any, Final

PER_MESSAGE: Final = 4
GENERATION_PROMPT: Final = 3
RULE: Final = {
    "kind": "whitespace-words",
    "per_message": PER_MESSAGE,
    "generation_prompt": GENERATION_PROMPT,
    "doc": "prompt_tokens = sum(len(text.split())) + 4 * messages + 3",
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return " ".join(str(p) for p in parts)
    return ""


def count_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Prompt tokens of a chat request under the emulator's rule."""
    words = sum(len(_text_of(m.get("content")).split()) for m in messages)
    return words + PER_MESSAGE * len(messages) + GENERATION_PROMPT


def words_for(prompt_tokens: int, messages: int = 1) -> int:
    """Words a client must send in ``messages`` messages to get ``prompt_tokens``."""
    return prompt_tokens - PER_MESSAGE * messages - GENERATION_PROMPT


def completion_text(start: int, count: int) -> str:
    """``count`` generated tokens starting at index ``start``: one word each."""
    return "".join(f" w{i}" for i in range(start, start + count))
