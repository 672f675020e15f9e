"""bench.measure (workload): exact-length prompts with a unique nonce, sized by tokenizer or by
the server."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from bench.core import InputError
from bench.measure import (
    PromptFactory,
    find_cached_tokenizer,
    load_tokenizer,
    nonce_stream,
    prompt_sha256,
)

OVERHEAD = 9


def words(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


async def server(text: str) -> int:
    return words(text) + OVERHEAD


@pytest.mark.parametrize("target", [40, 1044])
def test_server_calibrated_prompts_are_exact_and_unique(target: int) -> None:
    f = PromptFactory(target, counter=None)
    asyncio.run(f.calibrate(server))
    prompts = [f.build() for _ in range(20)]
    assert all(words(p) + OVERHEAD == target for p in prompts)
    assert len(set(prompts)) == 20
    assert len({prompt_sha256(p) for p in prompts}) == 1  # the hash ignores the nonce


def test_tokenizer_sized_prompts(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    f = PromptFactory(300, load_tokenizer(tmp_path))
    asyncio.run(f.calibrate(server))
    assert f.overhead == OVERHEAD
    assert all(words(f.build()) + OVERHEAD == 300 for _ in range(5))


def test_impossible_sizes_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--prompt-tokens"):
        asyncio.run(PromptFactory(5, None).calibrate(server))

    async def lumpy(text: str) -> int:  # every word counts 3: 1045 is unreachable
        return 3 * words(text) + OVERHEAD

    with pytest.raises(InputError, match="cannot reach exactly"):
        asyncio.run(PromptFactory(1045, None).calibrate(lumpy))
    f = PromptFactory(1045, None)
    asyncio.run(f.calibrate(lumpy, allow_mismatch=True))
    assert f.words is not None
    with pytest.raises(InputError, match="--tokenizer"):
        load_tokenizer(tmp_path / "nope")


def test_cached_tokenizer_found_in_the_hf_cache_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--btbtyler09--Qwen3.8-27B-GPTQ-4bit"
    assert find_cached_tokenizer("btbtyler09/Qwen3.8-27B-GPTQ-4bit") is None
    old, new = repo / "snapshots" / ("a" * 40), repo / "snapshots" / ("b" * 40)
    for snap in (old, new):
        snap.mkdir(parents=True)
        (snap / "tokenizer.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("b" * 40 + "\n")
    assert find_cached_tokenizer("btbtyler09/Qwen3.8-27B-GPTQ-4bit") == new / "tokenizer.json"
    assert find_cached_tokenizer("btbtyler09/Qwen3.8-27B-GPTQ-4bit", "a" * 40) == (
        old / "tokenizer.json"
    )
    assert find_cached_tokenizer("btbtyler09/Qwen3.8-27B-GPTQ-4bit", "c" * 40) is None
    assert find_cached_tokenizer("someone/else") is None


def test_seeded_prompts_repeat_across_servers_and_never_within_one() -> None:
    """Same seed and concurrency: the same prompts in the same order, whatever the calibration
    needed; another concurrency level (the same server's next sweep step) never repeats one."""

    async def lumpy(text: str) -> int:  # a second server whose calibration takes more probes
        return words(text) + OVERHEAD

    a = PromptFactory(100, None, nonce_stream(7, concurrency=4))
    asyncio.run(a.calibrate(server))
    b = PromptFactory(100, None, nonce_stream(7, concurrency=4))
    asyncio.run(b.calibrate(lumpy))
    first = [a.build() for _ in range(12)]
    assert first == [b.build() for _ in range(12)]
    assert len(set(first)) == 12
    c = PromptFactory(100, None, nonce_stream(7, concurrency=8))
    asyncio.run(c.calibrate(server))
    assert not set(first) & {c.build() for _ in range(12)}
    d = PromptFactory(100, None, nonce_stream(None, concurrency=4))
    asyncio.run(d.calibrate(server))
    assert d.build() not in first


def test_a_prompt_built_aside_leaves_the_seeded_sequence_where_it_was() -> None:
    """An iteration measured again (its streams arrived merged) takes prompts from outside
    the seeded sequence: every later iteration still gets the prompts the other servers get."""
    a = PromptFactory(100, None, nonce_stream(7, concurrency=2))
    b = PromptFactory(100, None, nonce_stream(7, concurrency=2))
    asyncio.run(a.calibrate(server))
    asyncio.run(b.calibrate(server))
    first = [a.build(), a.build()]
    again = [a.build(aside=True), a.build(aside=True)]
    later = [a.build(), a.build()]
    assert [b.build() for _ in range(4)] == first + later
    assert not set(again) & set(first + later) and len(set(again)) == 2
    assert all(words(p) + OVERHEAD == 100 for p in again)
