"""Write bench/prompts/tiny-chain-categories.jsonl: the categorised prompt set of the engine
tier's categories experiment (bench/experiments/tiny-vllm-cpu-categories.yaml), made from the
tiny models of seed 0 (bench/tinymodel/_categories.py says why each category's n-gram
acceptance is known in advance), for that experiment's max_tokens and k; prints its sha256,
which the experiment pins. tests/unit/test_tiny_chain_categories.py checks the file is what
this writes. Also bench/prompts/tiny-chain-continuation.jsonl, the experiment's accuracy task
(issue 48: the chain's exact answer to every question, ``continuation_task``).

    .venv/bin/python scripts/tiny_chain_categories.py
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from tokenizers import Tokenizer

from bench.engines import load_experiment
from bench.tinymodel import make_tiny_models
from bench.tinymodel._categories import category_prompts, continuation_task, jsonl

REPO = Path(__file__).resolve().parents[1]
EXPERIMENT = REPO / "bench" / "experiments" / "tiny-vllm-cpu-categories.yaml"
OUT = REPO / "bench" / "prompts" / "tiny-chain-categories.jsonl"
TASK = REPO / "bench" / "prompts" / "tiny-chain-continuation.jsonl"


def build() -> str:
    """The file's text for the experiment's workload (max_tokens, the ngram configuration's k)."""
    exp = load_experiment(EXPERIMENT)
    ngram = exp.configuration("ngram")
    assert ngram.spec_num_tokens is not None
    with tempfile.TemporaryDirectory() as tmp:
        made = make_tiny_models(Path(tmp), seed=0)
        tok = Tokenizer.from_file(str(made.chain.path / "tokenizer.json"))
        return jsonl(category_prompts(tok, made.chain_next, exp.workload.max_tokens,
                                      ngram.spec_num_tokens))  # fmt: skip


def build_task() -> str:
    """The accuracy task's text: the chain's answer of the task's max_tokens to each question."""
    exp = load_experiment(EXPERIMENT)
    assert exp.workload.accuracy is not None
    with tempfile.TemporaryDirectory() as tmp:
        made = make_tiny_models(Path(tmp), seed=0)
        tok = Tokenizer.from_file(str(made.chain.path / "tokenizer.json"))
        return jsonl(continuation_task(tok, made.chain_next, exp.workload.accuracy.max_tokens))


if __name__ == "__main__":
    for path, text in ((OUT, build()), (TASK, build_task())):
        path.write_text(text, encoding="utf-8")
        print(path.relative_to(REPO), hashlib.sha256(text.encode()).hexdigest())
