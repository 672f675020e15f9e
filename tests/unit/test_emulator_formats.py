"""Emulator wire formats and the Prometheus text writer (shapes from the pinned engines)."""

from __future__ import annotations

import asyncio
import json

from bench.emulator import formats, load_profile
from bench.emulator.engine import EmulatedEngine, Request
from bench.emulator.metrics import go_float, render


def test_vllm_chunk_key_order_matches_upstream_serializer() -> None:
    role = json.loads(formats.vllm_role_chunk("chatcmpl-1", 1, "m"))
    assert list(role) == [
        "id",
        "object",
        "created",
        "model",
        "choices",
        "prompt_token_ids",
        "prompt_text",
    ]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    last = json.loads(formats.vllm_content_chunk("chatcmpl-1", 1, "m", " w1", "length"))
    assert list(last["choices"][0]) == [
        "index",
        "delta",
        "logprobs",
        "finish_reason",
        "stop_reason",
        "token_ids",
        "weight_versions",
    ]
    mid = json.loads(formats.vllm_content_chunk("chatcmpl-1", 1, "m", " w1", None))
    assert "stop_reason" not in mid["choices"][0]
    usage = json.loads(formats.vllm_usage_chunk("chatcmpl-1", 1, "m", 10, 5))
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 10, "total_tokens": 15, "completion_tokens": 5}


def test_sglang_chunks_always_carry_reasoning_content_and_separate_finish() -> None:
    content = json.loads(formats.sglang_content_chunk("r", 1, "m", " w"))
    assert content["choices"][0]["delta"] == {"reasoning_content": None, "content": " w"}
    assert "usage" not in content
    fin = json.loads(formats.sglang_finish_chunk("r", 1, "m", "stop", 5))
    assert fin["choices"][0]["finish_reason"] == "stop"
    assert fin["choices"][0]["matched_stop"] == 5
    usage = json.loads(formats.sglang_usage_chunk("r", 1, "m", 3, 4))
    assert usage["usage"]["reasoning_tokens"] == 0 and usage["sglext"] is None


def test_go_float_matches_prometheus_client() -> None:
    from prometheus_client.utils import floatToGoString

    for v in (0.0, 3.0, 1.5, 1796232224.6282978, 123456789.0, float("inf"), 1e-9):
        assert go_float(v) == floatToGoString(v)


async def run_one(profile: str, seed: int, tokens: int) -> tuple[EmulatedEngine, Request]:
    """One non-streamed request of ``tokens`` tokens through an engine, to completion."""
    p = load_profile(profile).with_overrides(time_scale=0.0001)
    e = EmulatedEngine(p, seed=seed, log=lambda s: None, on_exit=lambda c: None)
    task = asyncio.create_task(e.run())
    r = Request(
        rid=e.new_id(),
        model="m",
        prompt_tokens=20,
        reported_prompt_tokens=20,
        max_tokens=tokens,
        target_tokens=tokens,
        finish_reason="length",
        stream=False,
        include_usage=False,
        arrival=0.0,
    )
    e.submit(r)
    await asyncio.wait_for(r.done.wait(), 10)
    e.stop()
    await task
    return e, r


def test_metrics_text_parses_and_counts_acceptance() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    async def run() -> str:
        e, r = await run_one("vllm-dflash", 3, 200)
        assert r.emitted == 200
        assert r.drafts == len(r.steps) - 1
        return render(e)

    text = asyncio.run(run())
    samples = {
        (s.name, s.labels.get("position")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    drafts = samples[("vllm:spec_decode_num_drafts_total", None)]
    accepted = samples[("vllm:spec_decode_num_accepted_tokens_total", None)]
    assert samples[("vllm:spec_decode_num_draft_tokens_total", None)] == 4 * drafts
    per_pos = [
        samples[("vllm:spec_decode_num_accepted_tokens_per_pos_total", str(i))] for i in range(4)
    ]
    assert sum(per_pos) == accepted
    assert per_pos == sorted(per_pos, reverse=True)
    assert samples[("vllm:generation_tokens_total", None)] == 200


def test_same_seed_same_schedule() -> None:
    async def steps(seed: int) -> list[tuple[int, int]]:
        _, r = await run_one("sglang-mtp", seed, 100)
        return r.steps

    assert asyncio.run(steps(1)) == asyncio.run(steps(1))
    assert asyncio.run(steps(1)) != asyncio.run(steps(2))
