"""The tests' tokenizer: a WordLevel ``tokenizer.json`` built with the tokenizers library (no
HF hub here). One token per word or punctuation mark, as ``fake_engine.count_tokens`` counts."""

from __future__ import annotations

from pathlib import Path

from bench.measure import NONCE_PREFIX, WORDS


def build_tokenizer(directory: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, NONCE_PREFIX: 1, ".": 2}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    return directory
