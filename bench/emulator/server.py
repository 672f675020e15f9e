"""The emulator's HTTP server (aiohttp) and its lifecycle: load, (warm up), serve, fail.

Readiness as each pinned engine behaves:
- vLLM 0.33.0 binds its socket before building the engine and only listens once the engine is
  up (vllm/entrypoints/launchers/launcher.py:340-391, api_server/entry.py:164-199), so while
  loading a connection is refused; then ``/health`` is 200
  (vllm/entrypoints/serve/instrumentator/health.py:22-32).
- SGLang 0.5.19 starts its HTTP server after the scheduler loaded the weights
  (sglang/srt/entrypoints/http_server.py:2789-2847), then ``/health`` answers 503 while the
  server status is Starting, i.e. during warmup (http_server.py:662-677), and 200 after
  "The server is fired up and ready to roll!" (http_server.py:2412).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Callable
from typing import Any

from aiohttp import web

import bench.emulator.formats as formats
import bench.emulator.metrics as metrics
from bench.emulator.engine import EmulatedEngine, LogFn, Request, lossy_start
from bench.emulator.profile import FailMode, Profile
from bench.emulator.tokens import RULE, count_prompt_tokens

ENGINE_KEY: web.AppKey[EmulatedEngine] = web.AppKey("engine", EmulatedEngine)


def _vllm_worker(rank: int, tensor_parallel: int) -> str:
    """The process that logs a vLLM worker's lines: the engine core itself at TP 1 (the
    uniprocess executor; an H200 run of 0.26.0 logged "(EngineCore pid=N)", no _DP0), a
    Worker_TP<rank> process per GPU beyond that (the multiprocess executor)."""
    return "EngineCore" if tensor_parallel == 1 else f"Worker_TP{rank}"


class EmulatorServer:
    """One emulated engine: socket, lifecycle task, engine task, HTTP app."""

    def __init__(
        self,
        profile: Profile,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        log: LogFn,
        on_exit: Callable[[int], None],
    ) -> None:
        self.profile = profile
        self.host = host
        self.requested_port = port
        self.seed = seed
        self.log = log
        self.on_exit = on_exit
        self.phase = "init"  # init | loading | warmup | up | crashed | stopped
        self.engine = EmulatedEngine(profile, seed=seed, log=log, on_exit=self._exit)
        self._sock: socket.socket | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._live: set[asyncio.BaseTransport] = set()
        self.ready = asyncio.Event()
        self.scrapes = 0  # GET /metrics answered (failure modes metrics_garbage, engine_restart)

    @property
    def port(self) -> int:
        assert self._sock is not None
        return int(self._sock.getsockname()[1])

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Bind the port (not listening yet) and start loading."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.requested_port))
        sock.setblocking(False)
        self._sock = sock
        app = web.Application()
        app[ENGINE_KEY] = self.engine
        app.on_response_prepare.append(_mark_emulator)
        self._add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        self.log(
            formats.SIMULATED_BANNER.format(engine=self.profile.engine, profile=self.profile.name)
        )
        self._tasks.append(asyncio.create_task(self._lifecycle()))

    async def _listen(self) -> None:
        assert self._runner is not None and self._sock is not None
        site = web.SockSite(self._runner, self._sock)
        await site.start()

    async def _lifecycle(self) -> None:
        p = self.profile
        scale = p.time_scale
        self.phase = "loading"
        if p.has(FailMode.NEVER_READY) and p.engine == "vllm":
            self._startup_lines_before_load()
            return  # stuck loading: the socket never listens
        self._startup_lines_before_load()
        if p.has(FailMode.WEIGHTS_MISSING):  # the loader looks before it loads anything
            self._fatal_lines(FailMode.WEIGHTS_MISSING)
            self._exit(p.failures.exit_code)
            return
        await asyncio.sleep(p.load_s * scale)
        self._load_lines()
        if p.has(FailMode.CRASH_AT_START) or p.has(FailMode.CUDA_OOM_AT_START):
            if p.has(FailMode.CUDA_OOM_AT_START):
                self._fatal_lines(FailMode.CUDA_OOM_AT_START)
            else:
                self._crash_lines()
            self.phase = "crashed"
            self._exit(p.failures.exit_code)
            return
        self._tasks.append(asyncio.create_task(self.engine.run()))
        if p.engine == "vllm":
            self._tasks.append(asyncio.create_task(self.engine.vllm_stats_loop()))
            src, tmpl = formats.VLLM_STARTING_SERVER
            self._vlog(src, tmpl % f"http://{self.host}:{self.port}")
            await self._listen()
            self.phase = "up"
            self.ready.set()
            return
        # SGLang: HTTP up, 503 while warming up
        self.phase = "warmup"
        await self._listen()
        if p.has(FailMode.NEVER_READY):
            return
        await asyncio.sleep(p.warmup_s * scale)
        self.phase = "up"
        self.log(formats.sglang_log(formats.SGLANG_FIRED_UP))
        self.ready.set()

    def _vlog(self, source: str, message: str, process: str = "APIServer") -> None:
        self.log(formats.vllm_log(process, os.getpid(), "INFO", source, message))

    def _startup_lines_before_load(self) -> None:
        p = self.profile
        if p.engine == "vllm":
            # as upstream: the plain line only with VLLM_DISABLE_LOG_LOGO=1 (startup.py:17)
            plain = os.environ.get("VLLM_DISABLE_LOG_LOGO", "0") not in ("", "0")
            src, tmpl = formats.VLLM_VERSION_LINE if plain else formats.VLLM_VERSION_LOGO
            self._vlog(src, tmpl % (p.engine_version, p.model_path))
            src, tmpl = formats.VLLM_ENGINE_CONFIG
            spec = f"SpeculativeConfig(method={p.spec.method!r})" if p.spec else "None"
            self._vlog(
                src,
                tmpl
                % (p.engine_version, p.model_path, spec, p.model_path, 8192, p.tensor_parallel),
                "EngineCore",
            )
            if not p.graphs_captured:
                self._vlog(*formats.VLLM_EAGER_LINE)
            self._verification_lines()
            if p.spec and p.spec.method == "mtp" and p.spec.method_flag != "mtp":
                src, tmpl = formats.VLLM_MTP_DEPRECATED
                self.log(
                    formats.vllm_log(
                        "APIServer", os.getpid(), "WARNING", src, tmpl % p.spec.method_flag
                    )
                )
        else:
            args = {
                "model_path": p.model_path,
                "served_model_name": p.served_model,
                "tp_size": p.tensor_parallel,
                "dp_size": 1,
                "speculative_algorithm": p.spec.method_flag if p.spec else None,
                "speculative_adaptive": p.verification.adaptive,
            }
            self.log(formats.sglang_log(formats.SGLANG_SERVER_ARGS.format(args=args)))
            for rank in range(p.tensor_parallel):
                self.log(
                    formats.sglang_log(formats.SGLANG_LOAD_BEGIN.format(avail=23.1), tp_rank=rank)
                )

    def _verification_lines(self) -> None:
        """vLLM's record of its non-default arguments (the speculative config as given) and
        FLy's warning, as vLLM 0.33.0 logs them (formats.VLLM_NON_DEFAULT_ARGS, VLLM_FLY)."""
        v = self.profile.verification
        if v.spec_config is not None:
            src, tmpl = formats.VLLM_NON_DEFAULT_ARGS
            self._vlog(src, tmpl % ({"speculative_config": v.spec_config},))
        if v.method == "fly":
            src, tmpl = formats.VLLM_FLY
            self.log(formats.vllm_log("APIServer", os.getpid(), "WARNING", src, tmpl))

    def _load_lines(self) -> None:
        p = self.profile
        elapsed = p.load_s * p.time_scale * 0.8
        if p.engine == "vllm":
            for rank in range(p.tensor_parallel):
                proc = _vllm_worker(rank, p.tensor_parallel)
                src, tmpl = formats.VLLM_LOADING_WEIGHTS
                self._vlog(src, tmpl % elapsed, proc)
                src, tmpl = formats.VLLM_MODEL_LOADING
                self._vlog(src, tmpl % ("8.12", p.load_s * p.time_scale * 0.85), proc)
            if p.graphs_captured:
                for rank in range(p.tensor_parallel):
                    src, tmpl = formats.VLLM_GRAPH_CAPTURED_LINE
                    self._vlog(
                        src,
                        tmpl % (p.load_s * p.time_scale * 0.1, 0.45),
                        _vllm_worker(rank, p.tensor_parallel),
                    )
            return
        broken = p.has(FailMode.ZERO_ACCEPTANCE) and p.spec is not None and p.spec.method == "mtp"
        for rank in range(p.tensor_parallel):
            self.log(
                formats.sglang_log(
                    formats.SGLANG_LOAD_END.format(
                        elapsed=elapsed,
                        model_type=p.model_type,
                        quant="quant=gptq, bits=4, ",
                        avail=9.87,
                        usage=8.12,
                    ),
                    tp_rank=rank,
                )
            )
        if p.spec is not None:
            for rank in range(p.tensor_parallel):
                if broken:
                    for name in formats.SGLANG_SKIPPED_MTP_TENSORS:
                        msg = formats.SGLANG_SKIP_PARAM.format(name=name)
                        self.log(formats.sglang_log(msg, tp_rank=rank))
                # unpatched builds print the checkpoint's quant for the draft too
                quant = "quant=gptq, bits=4, " if broken else ""
                self.log(
                    formats.sglang_log(
                        formats.SGLANG_LOAD_END.format(
                            elapsed=elapsed * 0.05,
                            model_type=p.spec.draft_model_type,
                            quant=quant,
                            avail=8.95,
                            usage=0.92,
                        ),
                        tp_rank=rank,
                    )
                )
        if p.mamba_cap is not None and p.admission_cap != p.max_running_requests:
            for rank in range(p.tensor_parallel):
                msg = formats.SGLANG_MAMBA_CAP.format(
                    cap=p.mamba_cap, size=p.mamba_cap * 2, ratio=2
                )
                self.log(formats.sglang_log(msg, tp_rank=rank))
        if p.graphs_captured:
            self._sglang_graph_lines()
        self.log(
            formats.sglang_log(
                formats.SGLANG_CAPACITY_LINE.format(
                    max_total=p.max_total_num_tokens,
                    chunked=8192,
                    max_prefill=16384,
                    max_running=p.admission_cap or 0,
                    context_len=p.context_len,
                    avail=3.21,
                ),
                tp_rank=0,
            )
        )

    def _sglang_graph_lines(self) -> None:
        """Target graph capture per TP rank, after the weights (cuda_graph_setup.py:550-577)."""
        p = self.profile
        phase = "target verify" if p.spec is not None else "target decode"
        per_req = 1 + p.spec.num_speculative_tokens if p.spec is not None else 1
        bs = [b for b in (1, 2, 4, 8, 16) if b <= (p.max_running_requests or 16)]
        for rank in range(p.tensor_parallel):
            head = formats.SGLANG_GRAPH_CAPTURE_LINE
            begin = head.format(phase=phase, backend="CUDA graph", edge="begin")
            begin += formats.SGLANG_GRAPH_BEGIN_STATS.format(
                backend="full", per_req=per_req, bs=bs, avail=3.9
            )
            end = head.format(phase=phase, backend="CUDA graph", edge="end")
            end += formats.SGLANG_GRAPH_END_STATS.format(
                elapsed=p.load_s * p.time_scale * 0.1, usage=0.52, avail=3.38
            )
            self.log(formats.sglang_log(begin, tp_rank=rank))
            self.log(formats.sglang_log(end, tp_rank=rank))

    def _crash_lines(self) -> None:
        msg = "RuntimeError: SIMULATED startup failure (emulator failure mode crash_at_start)"
        if self.profile.engine == "vllm":
            self.log(formats.vllm_log("EngineCore", os.getpid(), "ERROR", "core.py:0", msg))
        else:
            self.log(formats.sglang_log(f"Scheduler hit an exception: {msg}", tp_rank=0))

    def _fatal_lines(self, mode: FailMode) -> None:
        """The engine's own line for a known fatal cause, then, as upstream, the traceback of
        the process that started the engine (long enough to push that line out of a failure
        message's last 40 log lines)."""
        p = self.profile
        why = f"(SIMULATED: emulator failure mode {mode.value})"
        if mode is FailMode.CUDA_OOM_AT_START:
            fatal = (
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
                "has a total capacity of 23.56 GiB of which 1.12 GiB is free. " + why
            )
        else:
            fatal = f"RuntimeError: Cannot find any model weights with `{p.model_path}` {why}"
        frames = [
            f'  File "/usr/lib/python3/site-packages/{p.engine}/frame_{k}.py", line {100 + k}, '
            f"in step_{k}\n    return step_{k + 1}(args)"
            for k in range(24)
        ]
        last = (
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}"
            if p.engine == "vllm"
            else "Exception: Rank 0 scheduler is dead. Please check if there are relevant logs."
        )
        if p.engine == "vllm":
            self.log(formats.vllm_log("EngineCore", os.getpid(), "ERROR", "core.py:708", fatal))
        else:
            self.log(formats.sglang_log(f"Scheduler hit an exception: {fatal}", tp_rank=0))
        self.log("Traceback (most recent call last):")
        for frame in frames:
            self.log(frame)
        self.log(last)

    def _exit(self, code: int) -> None:
        self.phase = "crashed"
        for transport in list(self._live):
            if isinstance(transport, asyncio.Transport):
                transport.abort()
        self.on_exit(code)

    async def stop(self) -> None:
        self.phase = "stopped"
        self.engine.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._runner is not None:
            await self._runner.cleanup()
        if self._sock is not None:
            self._sock.close()

    # ---------------------------------------------------------------- routes
    def _add_routes(self, app: web.Application) -> None:
        app.router.add_get("/health", self.health)
        if self.profile.engine == "sglang":
            app.router.add_get("/health_generate", self.health)
            app.router.add_get("/server_info", self.server_info)
            app.router.add_get("/get_server_info", self.server_info)
        else:
            app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/emulator/truth/{rid}", self.truth)
        app.router.add_get("/emulator/state", self.state)
        app.router.add_post("/emulator/tokenize", self.tokenize)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.phase == "up" else 503)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.profile.engine_version})

    async def server_info(self, request: web.Request) -> web.Response:
        p = self.profile
        return web.json_response(
            {
                "version": p.engine_version,
                "max_running_requests": p.max_running_requests,
                # server_args.chat_template: no --chat-template given, the model's own
                "chat_template": None,
                "internal_states": [
                    {
                        "avg_spec_accept_length": self.engine.counters.sg_accept_length,
                        "effective_max_running_requests_per_dp": p.max_running_requests,
                    }
                ],
                "emulator": self._emulator_info(),
            }
        )

    def _emulator_info(self) -> dict[str, Any]:
        return {
            "simulated": True,
            "engine": self.profile.engine,
            "profile": self.profile.name,
            "time_scale": self.profile.time_scale,
            "seed": self.seed,
            "failures": [m.value for m in self.profile.failures.modes],
            "tokenizer": RULE,
        }

    async def models(self, request: web.Request) -> web.Response:
        p = self.profile
        card = formats.model_card(p.engine, p.served_model, p.model_path, p.context_len)
        return web.json_response(
            {"object": "list", "data": [card], "emulator": self._emulator_info()}
        )

    async def metrics(self, request: web.Request) -> web.Response:
        p = self.profile
        self.scrapes += 1
        nth = self.scrapes % p.failures.every_n_scrapes == 0
        if p.has(FailMode.METRICS_GARBAGE) and nth:
            page = "<html><body><h1>502 Bad Gateway</h1>SIMULATED (metrics_garbage)</body></html>"
            return web.Response(text=page, content_type="text/html")
        if p.has(FailMode.ENGINE_RESTART) and self.scrapes == p.failures.every_n_scrapes:
            self.engine.restart_counters()  # a restarted engine's counters start from zero
        return web.Response(
            body=metrics.render(self.engine).encode(),
            headers={"Content-Type": metrics.CONTENT_TYPE},
        )

    async def truth(self, request: web.Request) -> web.Response:
        req = self.engine.truths.get(request.match_info["rid"])
        if req is None:
            return web.json_response({"error": "unknown request id"}, status=404)
        return web.json_response(req.truth())

    async def state(self, request: web.Request) -> web.Response:
        e = self.engine
        return web.json_response(
            {
                "simulated": True,
                "phase": self.phase,
                "running": len(e.running),
                "waiting": len(e.waiting),
                "tokens_written": e.tokens_written,
                "requests": e.requests_seen,
                "counters": {
                    "drafts": e.counters.drafts,
                    "draft_tokens": e.counters.draft_tokens,
                    "accepted_tokens": e.counters.accepted_tokens,
                    "generation_tokens": e.counters.generation_tokens,
                },
            }
        )

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        if body is None or not isinstance(body.get("messages"), list):
            return web.json_response({"error": "body needs a messages list"}, status=400)
        return web.json_response(
            {"count": count_prompt_tokens(body["messages"]), "rule": RULE, "simulated": True}
        )

    def _error(self, message: str, err_type: str, code: int) -> web.Response:
        if self.profile.engine == "vllm":
            return web.json_response(formats.vllm_error(message, err_type, code), status=code)
        return web.json_response(formats.sglang_error(message, err_type, code), status=code)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        p = self.profile
        if self.phase != "up":
            return self._error("Server is not ready", "ServiceUnavailableError", 503)
        body = await _json_body(request)
        if body is None:
            return self._error("Invalid JSON body", "BadRequestError", 400)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._error("messages: field required", "BadRequestError", 400)
        model = str(body.get("model") or p.served_model)
        if p.engine == "vllm" and body.get("model") and model != p.served_model:
            return web.json_response(formats.vllm_model_not_found(model), status=404)
        injected = self._injected_failure()
        if injected is not None:
            return injected
        prompt = count_prompt_tokens(messages)
        raw_max = body.get("max_completion_tokens", body.get("max_tokens"))
        max_tokens = int(raw_max) if raw_max is not None else p.context_len - prompt
        if max_tokens < 1 or prompt + max_tokens > p.context_len:
            return self._error(
                f"This model's maximum context length is {p.context_len} tokens. However, you "
                f"requested {prompt + max_tokens} tokens ({prompt} in the messages, "
                f"{max_tokens} in the completion).",
                "BadRequestError",
                400,
            )
        req = self._request(body, messages, model, prompt, max_tokens)
        if not req.stream:
            self.engine.submit(req)
            await req.done.wait()
            return self._full_response(req)
        return await self._stream(request, req)

    def _injected_failure(self) -> web.Response | None:
        """Count the request; the profile's injected HTTP 429 or 5xx when it is this one's turn
        (every ``every_n_requests``-th request)."""
        p = self.profile
        engine = self.engine
        engine.requests_seen += 1
        if p.has(FailMode.HTTP_429) and engine.requests_seen % p.failures.every_n_requests == 0:
            limited = self._error(
                "SIMULATED rate limit (emulator failure mode http_429)", "RateLimitError", 429
            )
            limited.headers["Retry-After"] = "0"
            return limited
        if p.has(FailMode.HTTP_5XX) and engine.requests_seen % p.failures.every_n_requests == 0:
            return self._error(
                "SIMULATED internal error (emulator failure mode http_5xx)",
                "InternalServerError",
                500,
            )
        return None

    def _request(
        self, body: dict[str, Any], messages: list[Any], model: str, prompt: int, max_tokens: int
    ) -> Request:
        """The engine's request for an accepted chat body: how many tokens it will get and why
        it stops (max_tokens; an injected early EOS; the profile's natural stop unless
        ``ignore_eos``), and what its stream carries."""
        p = self.profile
        engine = self.engine
        target, reason = max_tokens, "length"
        if p.has(FailMode.EARLY_EOS):
            target, reason = max(1, int(max_tokens * p.failures.early_eos_fraction)), "stop"
        elif (
            not body.get("ignore_eos")
            and p.natural_stop_tokens is not None
            and p.natural_stop_tokens < max_tokens
        ):
            target, reason = p.natural_stop_tokens, "stop"
        drift = p.failures.prompt_drift if p.has(FailMode.PROMPT_DRIFT) else 0
        options = body.get("stream_options") or {}
        return Request(
            rid=engine.new_id(),
            model=model if p.engine == "sglang" else p.served_model,
            prompt_tokens=prompt,
            reported_prompt_tokens=prompt + drift,
            max_tokens=max_tokens,
            target_tokens=target,
            finish_reason=reason,
            stream=bool(body.get("stream")),
            include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
            arrival=engine.clock(),
            top_logprobs=_top_logprobs(body),
            fixed_accepted=_category_accepted(p, messages),
            spec_details=p.engine == "sglang" and body.get("return_spec_tokens_details") is True,
            lossy_from=lossy_start(p, _last_user_text(messages)),
        )

    async def _stream(self, request: web.Request, req: Request) -> web.StreamResponse:
        """Answer with an SSE stream the engine writes into, step by step, until ``req`` is
        done; a client that goes away drops the request."""
        engine = self.engine
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream; charset=utf-8"}
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        transport = request.transport
        if not isinstance(transport, asyncio.Transport):
            return resp
        req.sink = _ChunkedSink(transport)
        req.abort = transport.abort
        self._live.add(transport)
        engine.submit(req)
        try:
            await req.done.wait()
        except asyncio.CancelledError:
            engine.drop(req, "client_gone")
            raise
        finally:
            self._live.discard(transport)
        if req.outcome == "ok":
            await resp.write_eof()
        return resp

    def _full_response(self, req: Request) -> web.Response:
        p = self.profile
        text = "".join(req.text_parts)
        usage_prompt = req.reported_prompt_tokens
        lps = self.engine.logprobs(req, req.emissions)
        if p.engine == "vllm":
            body = formats.vllm_full_response(
                req.rid,
                req.created,
                req.model,
                text,
                req.finish_reason,
                usage_prompt,
                req.emitted,
                lps,
            )
        else:
            matched = formats.EMULATED_EOS_TOKEN_ID if req.finish_reason == "stop" else None
            body = formats.sglang_full_response(
                req.rid,
                req.created,
                req.model,
                text,
                req.finish_reason,
                matched,
                usage_prompt,
                req.emitted,
                lps,
            )
        if p.has(FailMode.MISSING_USAGE):
            body.pop("usage", None)
        return web.json_response(body)


class _ChunkedSink:
    """Writes HTTP/1.1 chunks straight to the transport: the engine loop writes every
    stream of a step back to back without awaiting, which keeps writes on schedule.
    aiohttp's own writer only sends the final zero-length chunk (write_eof)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        if self._transport.is_closing():
            raise ConnectionResetError("client went away")
        self._transport.write(b"%x\r\n%b\r\n" % (len(data), data))


def _top_logprobs(body: dict[str, Any]) -> int | None:
    """How many candidates a request wants per token; None without ``logprobs: true`` (both
    engines' chat requests: ``logprobs: bool``, ``top_logprobs: int``; vLLM
    chat_completion/protocol.py:242-243, SGLang srt/entrypoints/openai/protocol.py:833-834)."""
    if not body.get("logprobs"):
        return None
    n = body.get("top_logprobs")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0


async def _mark_emulator(request: web.Request, response: web.StreamResponse) -> None:
    response.headers[formats.EMULATOR_HEADER] = "1"


async def _json_body(request: web.Request) -> dict[str, Any] | None:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _last_user_text(messages: list[Any]) -> str:
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    return content if isinstance(content, str) else ""


def _category_accepted(p: Profile, messages: list[Any]) -> int | None:
    """The fixed acceptance of the profile category the last user message matches, if any."""
    if p.spec is None or not p.spec.categories:
        return None
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    if not isinstance(content, str):
        return None
    cat = p.spec.category_of(content)
    return cat.accepted if cat is not None else None
