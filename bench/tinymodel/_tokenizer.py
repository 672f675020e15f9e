"""A byte-level BPE tokenizer trained on generated lines, and its ChatML configuration."""

from __future__ import annotations

import json
import random
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from bench.core import parse_json

END_OF_TEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)

# ChatML, as Qwen models use it (system/user/assistant turns, generation prompt on request).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Short, frequent English words (each ends up one token with its leading space), a few longer
# ones, digits and punctuation: enough variety for a few hundred merges.
_WORDS_TEXT = (
    "the of and to in is was for on are as with his they at be this from have or by one had "
    "not but what all were when we there can an your which their said if do will each about "
    "how up out them then she many some so these would other into has more her two like him "
    "see time could no make than first been its who now people my made over did down only way "
    "find use may water long little very after words called just where most know model token "
    "server request draft target accept reject speculative decoding engine bench measure "
    "report window prompt output stream chunk metric latency throughput batch cache memory "
    "layer weight vector matrix random seed number value small large fast slow green blue red"
)
_WORDS = tuple(_WORDS_TEXT.split())
_PUNCTUATION = (".", ",", "?", "!", ":", ";")


# Printable ASCII, tab and newline: the only bytes the vocabulary holds. A random model then
# never emits a lone UTF-8 byte, which a server's incremental detokenizer would hold back (the
# text of a whole completion could arrive in its last chunk).
ASCII_TEXT = "\t\n" + "".join(chr(c) for c in range(32, 127))


def corpus(seed: int, lines: int) -> list[str]:
    """``lines`` generated sentences (some of two lines), the same for the same seed."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 24))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 9999)))
        text = " ".join(words)
        text = text[:1].upper() + text[1:] + rng.choice(_PUNCTUATION)
        if rng.random() < 0.2:
            text += "\n" + rng.choice(_WORDS)
        out.append(text)
    return out


def _byte_alphabet(text: str) -> list[str]:
    """The byte-level symbols of ``text``'s bytes (GPT-2's byte-to-unicode mapping)."""
    pieces = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(
        text
    )
    return sorted({symbol for piece, _ in pieces for symbol in piece})


def train_tokenizer(seed: int, lines: int, vocab_size: int) -> Tokenizer:
    """BPE over the bytes of printable ASCII (GPT-2 style pre-tokenizer); special tokens take
    ids 0, 1, 2. Text outside :data:`ASCII_TEXT` cannot be encoded."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=_byte_alphabet(ASCII_TEXT),
        limit_alphabet=len(ASCII_TEXT),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed, lines), trainer=trainer)
    return tok


def special_id(tok: Tokenizer, token: str) -> int:
    """The id of a special token the tokenizer was trained with."""
    found = tok.token_to_id(token)
    if found is None:
        raise ValueError(f"tokenizer has no {token}")
    return found


def tokenizer_json(tok: Tokenizer) -> str:
    """The tokenizer serialized with sorted keys (stable bytes)."""
    doc = parse_json(tok.to_str(), "tokenizer.json")
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False)


def tokenizer_config(tok: Tokenizer, max_length: int) -> dict[str, Any]:
    """tokenizer_config.json for transformers' fast tokenizer, with the ChatML template."""
    added = {
        str(special_id(tok, t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t in SPECIAL_TOKENS
    }
    return {
        "added_tokens_decoder": added,
        "additional_special_tokens": [IM_START, IM_END],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": IM_END,
        "errors": "replace",
        "model_max_length": max_length,
        "pad_token": END_OF_TEXT,
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }
