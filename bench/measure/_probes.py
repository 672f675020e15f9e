"""Logprob probes: a few greedy requests re-sent after the timed iterations with logprobs.

The lossless check compares greedy outputs of a speculative run with its baseline. On a GPU
they part at numeric near-ties (bf16 logits a rounding apart), which is no defect; a real
divergence is. Telling them apart needs the engine's top-2 at the first differing token, so
after a level's measured iterations (never inside them: logprobs cost time) the runner sends
the measured prompts again, in measured order and in batches of the level's concurrency (batch
shape moves GPU numerics), up to ``MAX_PROBES`` of them, with ``logprobs: true,
top_logprobs: 2`` (both engines' chat API: vLLM 0.33.0 chat_completion/protocol.py:242-243,
SGLang 0.5.19 srt/entrypoints/openai/protocol.py:833-834).
vLLM returns them with speculation too, several tokens per event
(tests/fixtures/vllm-gpu/stream-logprobs.sse, recorded on an H200).

Probes are plain (non-streamed) requests: timing does not matter here, and SGLang 0.5.19's
streaming path gives every token of an event the top list of the event's first token
(srt/entrypoints/openai/serving_chat.py:2029-2034, ``use_token_index=False``), wrong for the
second and later tokens of a speculative step; its plain path indexes each token. vLLM builds
the same entries either way (chat_completion/serving.py:1216-1280).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any, Final

from bench.measure._client import RawResponse, chat_body, request
from bench.schema import LogprobProbe, LogprobProbes, TokenLogprobs, TopLogprob

#: candidates per token: the chosen one and its runner-up decide a near-tie
TOP_LOGPROBS: Final = 2
#: at most this many prompts are probed per level: a level with 5 iterations at concurrency 1
#: (the seed's workload) is probed whole, at the cost of one more pass; from concurrency 8 on
#: it costs one batch
MAX_PROBES: Final = 8


def parse_logprobs(raw: RawResponse) -> list[TokenLogprobs]:
    """Every ``choices[0].logprobs.content[]`` entry of a chat completion, in order: of each SSE
    event of a streamed one, or of the JSON body of a plain one."""
    objs: list[Any] = []
    if raw.events:
        objs = [json.loads(data) for _, data in raw.events if data != b"[DONE]"]
    elif raw.body:
        objs = [json.loads(raw.body)]
    tokens: list[TokenLogprobs] = []
    for obj in objs:
        choices = obj.get("choices") if isinstance(obj, dict) else None
        for choice in choices or ():
            lp = choice.get("logprobs") if isinstance(choice, dict) else None
            for entry in (lp or {}).get("content") or ():
                tokens.append(_token(entry))
    return tokens


def _token(entry: dict[str, Any]) -> TokenLogprobs:
    top = [
        TopLogprob(token=str(t["token"]), logprob=float(t["logprob"]))
        for t in entry.get("top_logprobs") or ()
    ]
    return TokenLogprobs(token=str(entry["token"]), logprob=float(entry["logprob"]), top=top)


def plain_answer(raw: RawResponse) -> tuple[str | None, int | None, str | None]:
    """(text, completion tokens, error) of a plain chat completion. The text is what the
    streaming client would have joined: reasoning first (it streams first), then content."""
    if raw.status != 200:
        body = " ".join(raw.body.decode("utf-8", "replace").split())[:200]
        return None, None, raw.error or f"HTTP {raw.status}: {body or '(empty body)'}"
    try:
        obj = json.loads(raw.body)
        msg = obj["choices"][0]["message"]
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
        count = (obj.get("usage") or {}).get("completion_tokens")
        return reasoning + (msg.get("content") or ""), count, None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as err:
        return None, None, f"not a chat completion: {type(err).__name__} {err}"


def _probe(raw: RawResponse, prompt: str, max_tokens: int) -> LogprobProbe:
    sha = hashlib.sha256(prompt.encode()).hexdigest()
    text, count, error = plain_answer(raw)
    out = hashlib.sha256(text.encode()).hexdigest() if text is not None else None
    if error is not None:
        return LogprobProbe(prompt_sha256=sha, output_sha256=out, error=error)
    try:
        tokens = parse_logprobs(raw)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as err:
        return LogprobProbe(prompt_sha256=sha, output_sha256=out, error=f"bad logprobs: {err}")
    if not tokens:
        error = "the engine returned no logprobs"
    elif count != max_tokens or len(tokens) != count:
        error = f"{len(tokens)} logprob entries, {count} tokens, {max_tokens} asked"
    return LogprobProbe(prompt_sha256=sha, output_sha256=out, tokens=tokens, error=error)


async def logprob_probes(
    base_url: str,
    served_model: str,
    prompts: list[str],
    max_tokens: int,
    temperature: float,
    timeout_s: float,
    concurrency: int = 1,
) -> LogprobProbes:
    """Send ``prompts`` with logprobs, ``concurrency`` at a time; one probe per prompt.
    Nothing here raises on server misbehaviour: a failed probe carries its error."""
    probes: list[LogprobProbe] = []
    for at in range(0, len(prompts), concurrency):
        batch = prompts[at : at + concurrency]
        probes += await _batch(base_url, served_model, batch, max_tokens, temperature, timeout_s)
    failed = [p for p in probes if p.error]
    note = None
    if failed:
        note = f"{len(failed)} of {len(probes)} probes failed; first: {failed[0].error}"
    return LogprobProbes(top_logprobs=TOP_LOGPROBS, requests=probes, note=note)


async def _batch(
    base_url: str,
    served_model: str,
    prompts: list[str],
    max_tokens: int,
    temperature: float,
    timeout_s: float,
) -> list[LogprobProbe]:
    bodies = []
    for prompt in prompts:
        body = chat_body(served_model, prompt, max_tokens, temperature)
        del body["stream_options"]  # vLLM answers 400 to stream_options on a plain request
        bodies.append(body | {"stream": False, "logprobs": True, "top_logprobs": TOP_LOGPROBS})
    raws = await asyncio.gather(
        *(request(base_url, "POST", "/v1/chat/completions", b, timeout_s) for b in bodies)
    )
    return [_probe(raw, p, max_tokens) for raw, p in zip(raws, prompts, strict=True)]
