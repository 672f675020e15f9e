"""The engine tier's categorised prompt set (bench/prompts/tiny-chain-categories.jsonl): it is
what scripts/tiny_chain_categories.py makes from the tiny models of seed 0, each category's
n-gram acceptance is what bench/tinymodel/_categories.py claims, and a prompt set that would
break a claim is refused before any file is written."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from bench.core import InputError
from bench.engines import load_experiment
from bench.tinymodel import TinyModels, make_tiny_models
from bench.tinymodel import _categories as cats

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "bench" / "experiments" / "tiny-vllm-cpu-categories.yaml"
PROMPTS = REPO / "bench" / "prompts" / "tiny-chain-categories.jsonl"
TASK = REPO / "bench" / "prompts" / "tiny-chain-continuation.jsonl"

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("m"), seed=0)


@pytest.fixture(scope="module")
def tok(made: TinyModels) -> Tokenizer:
    return Tokenizer.from_file(str(made.chain.path / "tokenizer.json"))


def test_the_committed_prompt_set_is_what_the_script_makes_and_the_experiment_pins() -> None:
    spec = importlib.util.spec_from_file_location("tcc", REPO / "scripts/tiny_chain_categories.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    text = script.build()
    assert PROMPTS.read_text(encoding="utf-8") == text
    exp = load_experiment(EXPERIMENT)
    assert exp.workload.prompt_set is not None
    assert exp.workload.prompt_set.sha256 == hashlib.sha256(text.encode()).hexdigest()
    # issue 48: the accuracy task, each answer the chain's first max_tokens tokens
    task = script.build_task()
    assert TASK.read_text(encoding="utf-8") == task
    assert exp.workload.accuracy is not None
    assert exp.workload.accuracy.sha256 == hashlib.sha256(task.encode()).hexdigest()


def test_the_accuracy_tasks_answer_is_the_chains_text(tok: Tokenizer, made: TinyModels) -> None:
    _, out = cats.chain_output(tok, made.chain_next, 12)
    lines = [json.loads(x) for x in TASK.read_text(encoding="utf-8").splitlines()]
    # the chain of seed 0 from the template's last token: Ġdown Ġfrom Ġan im Ġweight 95 ich
    # know Ġto Ġl these Ġbut (Ġ: a leading space), decoded
    assert {x["answer"] for x in lines} == {"down from anim weight95ichknow to lthese but"}
    assert tok.decode(out, skip_special_tokens=True).strip() == lines[0]["answer"]
    assert len({x["prompt"] for x in lines}) == len(lines) == 6


def counts(tok: Tokenizer, made: TinyModels) -> dict[str, list[cats.NgramCounts]]:
    exp = load_experiment(EXPERIMENT)
    _, out = cats.chain_output(tok, made.chain_next, 64)
    by: dict[str, list[cats.NgramCounts]] = {}
    for line in PROMPTS.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        ids = cats.rendered_ids(tok, item["prompt"])
        by.setdefault(item["category"], []).append(
            cats.ngram_counts(ids, out, exp.workload.max_tokens, 3, 2, 4)
        )
    return by


def test_each_category_gets_the_acceptance_its_construction_claims(
    tok: Tokenizer, made: TinyModels
) -> None:
    by = counts(tok, made)
    assert set(by) == {"copy", "fresh", "partial"}
    assert all(c.drafts > 0 and c.accepted == c.draft_tokens for c in by["copy"])  # exactly 1
    assert all(c == (0, 0, 0) for c in by["fresh"])  # nothing proposed
    partial = by["partial"]
    rejected = [c.draft_tokens - c.accepted for c in partial]
    assert all(0 <= r <= 3 for r in rejected) and sum(r > 0 for r in rejected) >= 2
    assert 0 < sum(c.accepted for c in partial) < sum(c.draft_tokens for c in partial)


def test_the_lookup_takes_the_longest_ngram_and_its_latest_occurrence() -> None:
    # "1 2 3" occurs twice, "2 3" three times: the 3-gram wins, its later occurrence proposes
    ctx = [1, 2, 3, 7, 9, 2, 3, 8, 1, 2, 3, 5, 6, 0, 1, 2, 3]
    assert cats._lookup(ctx, 2, 2, 4) == [5, 6]
    assert cats._lookup([4, 5, 6], 2, 2, 4) == []  # nothing occurs earlier
    assert cats._lookup([4, 5, 4, 5], 3, 2, 4) == [4, 5]  # the proposal stops at the context's end


def test_a_request_whose_output_the_prompt_holds_accepts_every_proposal() -> None:
    out = list(range(100, 140))
    full = cats.ngram_counts([1, 99, *out, 2], [*out], 32, 3, 2, 4)
    assert full.accepted == full.draft_tokens and full.drafts > 0
    none = cats.ngram_counts([1, 2, 3], [*out], 32, 3, 2, 4)
    assert none == (0, 0, 0)


def test_claims_that_would_not_hold_are_refused(
    tok: Tokenizer, made: TinyModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the chain's answer stops encoding back to itself after 44 tokens on seed 0
    with pytest.raises(InputError, match="does not encode back to itself"):
        cats.category_prompts(tok, made.chain_next, 60, 3)
    with pytest.raises(InputError, match="max_tokens > 16"):
        cats.category_prompts(tok, made.chain_next, 16, 3)
    # an ordinary sentence that holds two consecutive answer tokens would get drafts
    _, out = cats.chain_output(tok, made.chain_next, 2)
    leak = tok.decode(out, skip_special_tokens=False)
    monkeypatch.setattr(cats, "SENTENCES", (f"It said{leak} once.", *cats.SENTENCES[1:]))
    with pytest.raises(InputError, match="holds a pair"):
        cats.category_prompts(tok, made.chain_next, 32, 3)
