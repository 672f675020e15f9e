"""A tiny vLLM-shaped server for the client's tests and benchmark (not the product's emulator).

It streams chat completions whose shape each test chooses (role-only first chunk, reasoning
first, several tokens per chunk, usage on the last content chunk or in its own chunk, missing
usage, early EOS, prompt-count offset, HTTP errors, malformed events, disconnects) and records
``time.perf_counter()`` right before and right after writing each chunk, served at
``/truth/{id}``: no byte of a chunk can reach the client before its ``before`` stamp (what the
tests assert, whatever the machine's load), and ``tests/bench_client.py`` measures how far after
it the client stamps it. Prompt tokens are counted with the tests'
tokenizer (``tests/integration/tokenizer.py``) plus a fixed chat-template overhead.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TEMPLATE_OVERHEAD = 9
_WORD = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """The tests' tokenizer: one token per word or punctuation mark (see tokenizer.py)."""
    return len(_WORD.findall(text))


@dataclass
class Shape:
    model: str = "test-model"
    role_first: bool = True
    reasoning_first: int = 0  # first N tokens go out as reasoning_content
    tokens_per_chunk: int = 1
    step_s: float = 0.001  # delay between chunks
    prefill_s: float = 0.002
    usage_in_last_chunk: bool = False  # else a separate usage-only chunk
    missing_usage: bool = False
    early_eos_at: int | None = None  # stop after this many tokens, finish_reason=stop
    prompt_offset: int = 0  # added to the counted prompt tokens
    faults_after: int = 0  # chat requests served normally before the faults below apply
    http_status: int = 200
    malformed_at: int | None = None  # chunk index whose JSON is broken
    disconnect_at: int | None = None  # chunk index after which the connection drops
    emulator_header: bool = False
    accept_per_step: int = 2  # for /metrics: accepted drafts per speculative step
    spec_tokens: int = 3


@dataclass
class State:
    shape: Shape = field(default_factory=Shape)
    truth: dict[str, dict[str, Any]] = field(default_factory=dict)
    counters: dict[str, float] = field(
        default_factory=lambda: {"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0}
    )
    prompts: list[str] = field(default_factory=list)
    # prompts of requests that asked for logprobs (the runner's probes re-send measured prompts)
    logprob_prompts: list[str] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=itertools.count)


def _chunk(rid: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def make_app(state: State) -> web.Application:
    app = web.Application()

    def headers() -> dict[str, str]:
        return {"x-specbench-emulator": "1"} if state.shape.emulator_header else {}

    async def models(_: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": state.shape.model, "object": "model"}]},
            headers=headers(),
        )

    async def metrics(_: web.Request) -> web.Response:
        c = state.counters
        # the served model's series (vLLM labels each with model_name = the served name)
        labels = f'{{engine="0",model_name="{state.shape.model}"}}'
        lines = [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            f"vllm:spec_decode_num_drafts_total{labels} {c['drafts']}",
            f"vllm:spec_decode_num_draft_tokens_total{labels} {c['draft_tokens']}",
            f"vllm:spec_decode_num_accepted_tokens_total{labels} {c['accepted']}",
        ]
        return web.Response(text="\n".join(lines) + "\n", headers=headers())

    async def truth(request: web.Request) -> web.Response:
        return web.json_response(state.truth.get(request.match_info["rid"], {}))

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        nreq = len(state.prompts)
        sh = (
            state.shape
            if nreq >= state.shape.faults_after
            else Shape(model=state.shape.model, emulator_header=state.shape.emulator_header)
        )
        if sh.http_status != 200:
            return web.json_response(
                {"error": {"message": "server exploded", "code": sh.http_status}},
                status=sh.http_status,
            )
        content = body["messages"][-1]["content"]
        (state.logprob_prompts if body.get("logprobs") else state.prompts).append(content)
        if body.get("stream") is not True:
            return web.json_response({"error": {"message": "test server streams only"}}, status=400)
        max_tokens = int(body["max_tokens"])
        n_out = max_tokens
        if sh.early_eos_at is not None:  # a server that ignores ignore_eos
            n_out = min(n_out, sh.early_eos_at)
        rid = f"chatcmpl-{next(state.ids)}"
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **headers()}
        )
        await resp.prepare(request)
        before: list[float] = []
        writes: list[float] = []
        tokens_at: list[int] = []
        gc_enabled: list[bool] = []
        k = 0

        async def send(obj: dict[str, Any] | str, ntok: int = 0) -> None:
            nonlocal k
            if sh.malformed_at == k:
                data = b'data: {"id": "broken", "choices": [\n\n'
            else:
                data = b"data: " + (obj if isinstance(obj, str) else json.dumps(obj)).encode()
                data += b"\n\n"
            before.append(time.perf_counter())
            await resp.write(data)
            writes.append(time.perf_counter())
            # this server runs in the client's process: whether the client left the cycle
            # collector running while the stream was open
            gc_enabled.append(gc.isenabled())
            tokens_at.append(ntok)
            k += 1
            if sh.disconnect_at is not None and k > sh.disconnect_at:
                assert request.transport is not None
                request.transport.close()
                raise ConnectionResetError

        usage = {
            "prompt_tokens": count_tokens(content) + TEMPLATE_OVERHEAD + sh.prompt_offset,
            "completion_tokens": n_out,
            "total_tokens": 0,
        }
        try:
            if sh.role_first:
                await send(_chunk(rid, {"role": "assistant", "content": ""}))
            await asyncio.sleep(sh.prefill_s)
            sent = 0
            while sent < n_out:
                n = min(sh.tokens_per_chunk, n_out - sent)
                key = "reasoning_content" if sent < sh.reasoning_first else "content"
                text = "".join(f" w{sent + i}" for i in range(n))
                last = sent + n >= n_out
                finish = ("length" if n_out == max_tokens else "stop") if last else None
                obj = _chunk(rid, {key: text}, finish)
                if last and sh.usage_in_last_chunk and not sh.missing_usage:
                    obj["usage"] = usage
                await send(obj, n)
                sent += n
                if not last and sh.step_s:
                    await asyncio.sleep(sh.step_s)
            if not sh.usage_in_last_chunk and not sh.missing_usage:
                await send(
                    {"id": rid, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                )
            await send("[DONE]")
            steps = max(1, n_out - 1)
            state.counters["drafts"] += steps
            state.counters["draft_tokens"] += steps * sh.spec_tokens
            state.counters["accepted"] += steps * sh.accept_per_step
        except ConnectionResetError:
            return resp
        finally:
            state.truth[rid] = {
                "before": before,
                "writes": writes,
                "tokens": tokens_at,
                "completion_tokens": n_out,
                "gc_enabled": gc_enabled,
            }
        await resp.write_eof()
        return resp

    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/truth/{rid}", truth)
    app.router.add_post("/v1/chat/completions", chat)
    return app


class ServerThread:
    """Serve ``make_app`` on 127.0.0.1 (ephemeral port) in a background thread."""

    def __init__(self, state: State | None = None) -> None:
        self.state = state or State()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(make_app(self.state), access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]
        self._runner = runner
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    def start(self) -> ServerThread:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
