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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any, Final

from bench.measure._client import Connection, RawResponse, chat_body, interpret_chat_stream
from bench.schema import LogprobProbe, LogprobProbes, TokenLogprobs, TopLogprob

#: candidates per token: the chosen one and its runner-up decide a near-tie
TOP_LOGPROBS: Final = 2
#: at most this many prompts are probed per level: a level with 5 iterations at concurrency 1
#: (the seed's workload) is probed whole, at the cost of one more pass; from concurrency 8 on
#: it costs one batch
MAX_PROBES: Final = 8
CONNECT_TIMEOUT_S: Final = 10.0


def parse_logprobs(raw: RawResponse) -> list[TokenLogprobs]:
    """Every ``choices[0].logprobs.content[]`` entry of a streamed chat completion, in order."""
    tokens: list[TokenLogprobs] = []
    for _, data in raw.events:
        if data == b"[DONE]":
            continue
        try:
            obj = json.loads(data)
        except ValueError:
            continue
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


def _probe(raw: RawResponse, prompt: str, max_tokens: int) -> LogprobProbe:
    rec = interpret_chat_stream(raw, "logprob-probe", 0, max_tokens)
    sha = hashlib.sha256(prompt.encode()).hexdigest()
    error = rec.error or ("; ".join(rec.reasons) if rec.reasons else None)
    try:
        tokens = parse_logprobs(raw)
    except (KeyError, TypeError, ValueError) as err:
        return LogprobProbe(
            prompt_sha256=sha, output_sha256=rec.output_sha256, error=f"bad logprobs: {err}"
        )
    count = rec.completion_tokens
    if error is None and not tokens:
        error = "the engine returned no logprobs"
    elif error is None and count is not None and len(tokens) != count:
        error = f"{len(tokens)} logprob entries for {count} tokens"
    return LogprobProbe(
        prompt_sha256=sha, output_sha256=rec.output_sha256, tokens=tokens, error=error
    )


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
    conns = [Connection(base_url, sse=True) for _ in prompts]
    opened = await asyncio.gather(
        *(c.open(CONNECT_TIMEOUT_S) for c in conns), return_exceptions=True
    )
    for conn, prompt, err in zip(conns, prompts, opened, strict=True):
        if isinstance(err, BaseException):
            conn.raw.error = f"cannot connect: {err or type(err).__name__}"
            continue
        body = chat_body(served_model, prompt, max_tokens, temperature)
        body |= {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
        conn.send("POST", "/v1/chat/completions", json.dumps(body).encode())
    raws = await asyncio.gather(
        *(
            c.wait(timeout_s) if not isinstance(e, BaseException) else _done(c.raw)
            for c, e in zip(conns, opened, strict=True)
        )
    )
    for c in conns:
        c.close()
    return [_probe(raw, p, max_tokens) for raw, p in zip(raws, prompts, strict=True)]


async def _done(raw: RawResponse) -> RawResponse:
    return raw
