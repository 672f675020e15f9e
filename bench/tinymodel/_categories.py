"""A categorised prompt set whose n-gram acceptance on the chain target is known in advance.

The chain target (bench/tinymodel/_chain.py) answers every prompt with the same tokens: its
greedy output after the chat template's last token ``t`` (the ``\\n`` of
``<|im_start|>assistant\\n``) is ``sigma(t), sigma^2(t), ...``, whatever the prompt says. What
the prompt decides is what n-gram prompt lookup (vLLM's ``ngram`` method) can propose: a
proposal is the tokens that follow, earlier in the context, the longest n-gram that ends the
context (at least ``min_n`` tokens). The output's tokens are all distinct (``sigma`` is one
cycle through the vocabulary, longer than any output here), so only the prompt can hold a
match. Three categories, each proven on the tokenizer's own encoding of the rendered template:

- ``copy``: the user's text is the output itself (as a code edit repeats its input). Every
  n-gram of the output is in the prompt, followed by the output's next tokens, beyond the last
  one a request can propose: every draft token is accepted, acceptance exactly 1.
- ``fresh``: ordinary text holding no two consecutive tokens of ``t`` + the output. No
  n-gram ever matches: no drafts at all.
- ``partial``: the output's first ``h`` tokens, then ordinary text (``h`` one of
  :data:`PARTIAL_TOKENS`, a different one per prompt). The proposals are right up to there; one
  that reaches past the seam proposes the text that follows instead, and after the seam
  nothing matches again, so a request rejects at most ``k`` tokens. While every proposal is
  accepted a request advances ``k + 1`` tokens a step, so a proposal ends exactly at the seam
  for one ``h`` in ``k + 1`` at most: of three consecutive ``h`` (with ``k`` >= 2), at least two
  prompts reject, and the category's acceptance is strictly between 0 and 1.

The ordinary sentences are ours. Byte-level BPE does not always encode a decoded token
sequence back to itself (two pieces can merge), so every claim above is checked on the
encoding, and a seed whose chain breaks too early is refused (exit 2).
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any, NamedTuple

import jinja2
from tokenizers import Tokenizer

from bench.core import InputError
from bench.tinymodel._tokenizer import CHAT_TEMPLATE

#: the output tokens each ``partial`` prompt copies before its ordinary text, one per sentence
PARTIAL_TOKENS = (11, 12, 13)
#: ordinary text: the ``fresh`` prompts and what follows the copy in ``copy`` and ``partial``
SENTENCES = (
    "The river was quiet in the morning, and the boats waited for the wind.",
    "Please explain how a library lends books to the people of a small town.",
    "A good meal needs time, fresh bread, and friends around the table.",
)


def rendered_ids(tok: Tokenizer, user: str) -> list[int]:
    """The token ids of one user message through the tiny models' chat template with the
    generation prompt, rendered as the engine renders it (Jinja2, bench/tinymodel/_tokenizer.py's
    CHAT_TEMPLATE)."""
    text = (
        jinja2.Environment()
        .from_string(CHAT_TEMPLATE)
        .render(messages=[{"role": "user", "content": user}], add_generation_prompt=True)
    )
    return list(tok.encode(text, add_special_tokens=False).ids)


def _find(hay: list[int], needle: list[int]) -> int:
    for i in range(len(hay) - len(needle) + 1):
        if hay[i : i + len(needle)] == needle:
            return i
    return -1


def chain_output(tok: Tokenizer, chain_next: dict[int, int], n: int) -> tuple[int, list[int]]:
    """(the template's last token, the chain target's first ``n`` output tokens)."""
    last = rendered_ids(tok, "x")[-1]
    out, t = [], last
    for _ in range(n):
        t = chain_next[t]
        out.append(t)
    return last, out


def category_prompts(
    tok: Tokenizer, chain_next: dict[int, int], max_tokens: int, k: int
) -> list[dict[str, Any]]:
    """The prompt set's lines (``{"category", "id", "prompt"}``) for requests of ``max_tokens``
    output tokens and ``k`` proposed tokens a step, each category's claim proven here."""
    if max_tokens <= max(PARTIAL_TOKENS) + k or k < 2:
        raise InputError(
            "workload", f"needs max_tokens > {max(PARTIAL_TOKENS) + k} and k >= 2 for 'partial'"
        )
    reach = max_tokens + k + 1  # the furthest output token a proposal can name
    last, out = chain_output(tok, chain_next, reach)
    copied = tok.decode(out, skip_special_tokens=False)
    lines: list[dict[str, Any]] = []
    for i, sentence in enumerate(SENTENCES):
        copy = rendered_ids(tok, f"{copied}\n\n{sentence}")
        if _find(copy, [last, *out]) < 0:
            raise InputError(
                "tiny-model", "the chain's output does not encode back to itself: other seed"
            )
        lines.append({"category": "copy", "id": f"copy-{i}", "prompt": f"{copied}\n\n{sentence}"})
    seams = {(a, b) for a, b in zip([last, *out], out, strict=False)}
    for i, sentence in enumerate(SENTENCES):
        ids = rendered_ids(tok, sentence)
        if any(pair in seams for pair in pairwise(ids)):
            raise InputError("tiny-model", f"fresh prompt {i} holds a pair of the output's tokens")
        lines.append({"category": "fresh", "id": f"fresh-{i}", "prompt": sentence})
    for i, (h, sentence) in enumerate(zip(PARTIAL_TOKENS, SENTENCES, strict=True)):
        text = f"{tok.decode(out[:h], skip_special_tokens=False)} {sentence}"
        ids = rendered_ids(tok, text)
        at = _find(ids, [last, *out[:h]])
        rest = ids[at + 1 + h :] if at >= 0 else []
        if at < 0 or rest[:1] == out[h : h + 1] or any(pair in seams for pair in pairwise(rest)):
            raise InputError("tiny-model", f"partial prompt {i} does not stop copying at its seam")
        lines.append({"category": "partial", "id": f"partial-{i}", "prompt": text})
    return lines


#: the accuracy task's questions (issue 48): ours, and any text would do (the chain's answer does
#: not depend on the prompt)
TASK_QUESTIONS = (
    *SENTENCES,
    "Which way does the road to the old mill turn after the bridge?",
    "Name three things a lighthouse keeper checks before nightfall.",
    "Why do bakers start work long before the shops open?",
)


def continuation_task(tok: Tokenizer, chain_next: dict[int, int], n: int) -> list[dict[str, Any]]:
    """The engine tier's constructed exact-answer task (``{"id", "prompt", "answer"}`` lines):
    the chain target's greedy answer to any prompt is its chain from the template's last token,
    so each question's exact answer is the text of its first ``n`` tokens (the ``prefix``
    scorer: a lossless configuration answers every question right)."""
    _, out = chain_output(tok, chain_next, n)
    answer = tok.decode(out, skip_special_tokens=True).strip()
    return [
        {"answer": answer, "id": f"chain-{i}", "prompt": q} for i, q in enumerate(TASK_QUESTIONS)
    ]


class NgramCounts(NamedTuple):
    """What n-gram prompt lookup proposes and the target accepts over a request."""

    drafts: int
    draft_tokens: int
    accepted: int


def _lookup(context: list[int], k: int, min_n: int, max_n: int) -> list[int]:
    """Prompt lookup: the ``k`` tokens after the latest earlier occurrence of the longest
    n-gram (``max_n`` down to ``min_n`` tokens) that ends ``context``; none when none occurs."""
    for n in range(min(max_n, len(context) - 1), min_n - 1, -1):
        tail = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start : start + n] == tail:
                return context[start + n : start + n + k]
    return []


def ngram_counts(
    prompt: list[int], output: list[int], max_tokens: int, k: int, min_n: int, max_n: int
) -> NgramCounts:
    """The counts of one greedy request whose target answers ``output`` (at least
    ``max_tokens + k + 1`` tokens): the first token from the prefill, then at each step a
    proposal from the context so far, its longest agreeing prefix accepted and the target's
    next token added, until ``max_tokens`` are out (a step may overshoot; the engine counts
    what it accepted). The engine tier holds vLLM's counters to it."""
    done, drafts, proposed, accepted = 1, 0, 0, 0
    while done < max_tokens:
        guess = _lookup(prompt + output[:done], k, min_n, max_n)
        ok = 0
        while ok < len(guess) and guess[ok] == output[done + ok]:
            ok += 1
        if guess:
            drafts, proposed, accepted = drafts + 1, proposed + len(guess), accepted + ok
        done += ok + 1
    return NgramCounts(drafts, proposed, accepted)


def jsonl(lines: list[dict[str, Any]]) -> str:
    """The prompt set file's text: one object a line, keys sorted, UTF-8 as is."""
    return "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines)
