"""The emulated engine: admission with a cap, batched prefill, decode steps with speculative
acceptance, the engines' counters, and the truth of every chunk written.

One asyncio task runs the schedule. Each step's duration comes from the profile; the task
sleeps until the step's scheduled end (coarse ``asyncio.sleep`` then a short spin, so writes
land within tens of microseconds of the schedule), writes every running request's events
back to back, and records the monotonic time after each write: that is the truth a test
compares the client's measurement with. Times are ``time.monotonic()`` (CLOCK_MONOTONIC on
Linux, the same clock in every process of the host).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import bench.emulator.formats as formats
from bench.emulator.logprobs import Emission, emission, first_near_tie
from bench.emulator.profile import FailMode, Profile

#: seconds before a step's end at which the loop stops sleeping and spins
SPIN_S = 0.0015
#: finished requests whose truth is kept (oldest dropped first)
TRUTH_KEEP = 20000

LogFn = Callable[[str], None]


class Sink(Protocol):
    """Where a streamed request's bytes go; ``write`` hands them to the socket at once
    (no await), raising ConnectionError when the peer is gone."""

    def write(self, data: bytes) -> None: ...


class _Aborter(Protocol):
    def __call__(self) -> None: ...


@dataclass
class ChunkTruth:
    kind: str  # role | content | finish | sglext | usage | done | malformed | step (non-streamed)
    tokens: int
    scheduled: float
    t: float

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "tokens": self.tokens, "scheduled": self.scheduled, "t": self.t}


@dataclass
class Request:
    """One chat request inside the emulated engine."""

    rid: str
    model: str
    prompt_tokens: int
    reported_prompt_tokens: int
    max_tokens: int
    target_tokens: int
    finish_reason: str
    stream: bool
    include_usage: bool
    arrival: float
    sink: Sink | None = None
    abort: _Aborter | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    emitted: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    admitted: float | None = None
    chunks: list[ChunkTruth] = field(default_factory=list)
    steps: list[tuple[int, int]] = field(default_factory=list)  # (tokens, accepted) per step
    outcome: str = "pending"
    fault_done: bool = False
    text_parts: list[str] = field(default_factory=list)
    top_logprobs: int | None = None  # the request's top_logprobs when it asked for logprobs
    #: draft tokens accepted at every verify step (a profile category matched), else sampled
    fixed_accepted: int | None = None
    #: SGLang return_spec_tokens_details: send sglext.spec_tokens_details before the usage
    spec_details: bool = False
    #: verify steps that accepted exactly j draft tokens, j = 0..k
    accept_histogram: list[int] = field(default_factory=list)
    #: output position from which a lossy verifier (FLy, forced acceptance) emits draft tokens
    #: the target would not have chosen (None: every token is the target's)
    lossy_from: int | None = None
    #: draft tokens accepted at this request's last verify step (adaptive depth)
    last_accepted: int | None = None
    emissions: list[Emission] = field(default_factory=list)  # every token emitted, in order
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def finished(self) -> bool:
        return self.emitted >= self.target_tokens

    def truth(self) -> dict[str, Any]:
        return {
            "simulated": True,
            "request_id": self.rid,
            "prompt_tokens": self.prompt_tokens,
            "reported_prompt_tokens": self.reported_prompt_tokens,
            "max_tokens": self.max_tokens,
            "completion_tokens": self.emitted,
            "finish_reason": self.finish_reason if self.finished else None,
            "stream": self.stream,
            "arrival": self.arrival,
            "admitted": self.admitted,
            "outcome": self.outcome,
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "steps": [list(s) for s in self.steps],
            "chunks": [c.as_dict() for c in self.chunks],
        }


@dataclass
class Counters:
    """Cumulative counters, moved exactly when the engine being emulated moves them."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    success: dict[str, int] = field(default_factory=dict)  # vLLM finished_reason -> count
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    # SGLang: moved once per finished request (metrics_collector.py:1747-1793)
    # keyed by the is_streaming label value ("true"/"false")
    sg_prompt_tokens: dict[str, int] = field(default_factory=dict)
    sg_generation_tokens: dict[str, int] = field(default_factory=dict)
    sg_requests: dict[str, int] = field(default_factory=dict)
    sg_verify_calls: int = 0
    # SGLang gauges, refreshed at the decode-log interval only
    sg_accept_length: float = 0.0
    sg_accept_rate: float = 0.0
    sg_gen_throughput: float = 0.0
    created: float = field(default_factory=time.time)


class EmulatedEngine:
    """Runs the profile's schedule; the HTTP layer submits requests and waits on them."""

    def __init__(
        self,
        profile: Profile,
        *,
        seed: int,
        log: LogFn,
        on_exit: Callable[[int], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.profile = profile
        self.k = profile.spec.num_speculative_tokens if profile.spec else 0
        self.acceptance: tuple[float, ...] = profile.spec.acceptance if profile.spec else ()
        self.acceptance = verified_acceptance(profile, self.acceptance)
        if profile.has(FailMode.ZERO_ACCEPTANCE):
            self.acceptance = tuple(0.0 for _ in self.acceptance)
        self.cap = profile.admission_cap or 1_000_000
        self.scale = profile.time_scale
        self._rng = random.Random(seed)
        self._id_rng = random.Random(seed * 7919 + 17)
        self._log = log
        self._on_exit = on_exit
        self.clock = clock
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.counters = Counters(accepted_per_pos=[0] * self.k)
        self.truths: OrderedDict[str, Request] = OrderedDict()
        self.tokens_written = 0
        self.requests_seen = 0
        self._wake = asyncio.Event()
        self._stopped = False
        # interval stats for the periodic log lines
        self._iv_prompt = 0
        self._iv_gen = 0
        self._iv_drafts = 0
        self._iv_draft_tokens = 0
        self._iv_accepted = 0
        self._iv_per_pos = [0] * self.k
        self._sg_forward_ct = 0
        self._sg_accept_tokens = 0
        self._sg_steps = 0
        self._sg_gen = 0
        self._sg_last_log = clock()
        # vLLM --cudagraph-metrics: decode steps per batch size in the stats interval
        self._iv_graph_steps: dict[int, int] = {}

    def restart_counters(self) -> None:
        """Every counter from zero, as in a freshly started engine (failure mode
        engine_restart): a scrape after this one reads them lower than before."""
        self.counters = Counters(accepted_per_pos=[0] * self.k)

    # ---------------------------------------------------------------- requests
    def new_id(self) -> str:
        hex32 = f"{self._id_rng.getrandbits(128):032x}"
        if self.profile.engine == "vllm":
            return formats.vllm_request_id(hex32)
        return formats.sglang_request_id(hex32)

    def submit(self, req: Request) -> None:
        self.truths[req.rid] = req
        while len(self.truths) > TRUTH_KEEP:
            self.truths.popitem(last=False)
        self.waiting.append(req)
        self._wake.set()

    def drop(self, req: Request, outcome: str) -> None:
        """The client went away: stop generating for it (like an abort)."""
        if req.outcome == "pending":
            req.outcome = outcome
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.running:
            self.running.remove(req)
        req.done.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    # ---------------------------------------------------------------- schedule
    async def run(self) -> None:
        while not self._stopped:
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
                continue
            free = self.cap - len(self.running)
            if self.waiting and free > 0:
                await self._prefill_step(free)
            else:
                await self._decode_step()

    async def _sleep_until(self, target: float) -> None:
        delay = target - self.clock() - SPIN_S
        if delay > 0:
            await asyncio.sleep(delay)
        # Short spin (asyncio wakes up to ~1 ms late); sleep(0) drops the GIL each turn so an
        # in-process client thread (serve_in_thread) is not starved while the emulator spins.
        while self.clock() < target:
            time.sleep(0)

    def _jitter(self) -> float:
        sd = self.profile.step_jitter
        if sd <= 0:
            return 1.0
        return 1.0 + max(-3 * sd, min(3 * sd, self._rng.gauss(0.0, sd)))

    async def _prefill_step(self, free: int) -> None:
        batch: list[Request] = []
        while self.waiting and len(batch) < free:
            batch.append(self.waiting.popleft())
        start = self.clock()
        for r in batch:
            r.admitted = start
        total_prompt = sum(r.prompt_tokens for r in batch)
        duration = self.profile.prefill_ms(total_prompt) / 1000.0 * self.scale * self._jitter()
        target = start + duration
        if self.profile.engine == "sglang":
            self._log_sglang_prefill(len(batch), total_prompt)
        # the prefill produces each request's first token (no draft verified yet)
        plans = [(r, self._render(r, 1, first=True)) for r in batch]
        await self._sleep_until(target)
        self.running.extend(batch)
        self.counters.prompt_tokens += total_prompt
        self._iv_prompt += total_prompt
        await self._emit(plans, target)
        for r in batch:
            r.steps.append((1, 0))

    async def _decode_step(self) -> None:
        batch = list(self.running)
        start = self.clock()
        duration = self.profile.step_ms(len(batch)) / 1000.0 * self.scale * self._jitter()
        if not self.profile.graphs_used:  # eager: the seed's "several times slower"
            duration *= self.profile.eager_slowdown
        self._iv_graph_steps[len(batch)] = self._iv_graph_steps.get(len(batch), 0) + 1
        target = start + duration
        plans = []
        for r in batch:
            depth = self.profile.verification.depth(self.k, len(batch), r.last_accepted)
            accepted = self._accepted(r, depth)
            n = min(1 + accepted, r.target_tokens - r.emitted)
            if self.k:
                self._observe_draft(r, accepted, depth)
            r.steps.append((n, accepted))
            plans.append((r, self._render(r, n, first=False)))
        await self._sleep_until(target)
        await self._emit(plans, target)
        if self.profile.engine == "sglang":
            self._sg_steps += 1
            if self._sg_steps % self.profile.decode_log_interval == 0:
                self._log_sglang_decode()

    def _accepted(self, r: Request, depth: int) -> int:
        """Draft tokens accepted at this step: a category's fixed count, SGLang's simulated
        length (match-expected: floor or ceil, weighted to match), else sampled."""
        fixed = r.fixed_accepted
        if self.profile.has(FailMode.ZERO_ACCEPTANCE):
            return 0
        if fixed is not None:
            return min(fixed, depth)
        sim = self.profile.verification.simulate_acc_len
        if sim is not None:
            lo = int(sim)
            return min(depth, lo - 1 + (1 if self._rng.random() < sim - lo else 0))
        return min(depth, self._sample_accepted())

    def _sample_accepted(self) -> int:
        accepted = 0
        for p in self.acceptance:
            if self._rng.random() < p:
                accepted += 1
            else:
                break
        return accepted

    def _observe_draft(self, r: Request, accepted: int, depth: int) -> None:
        # vLLM counts every verified draft, including tokens cut by max_tokens
        # (vllm/v1/spec_decode/metrics.py:41-49: observe_draft)
        c = self.counters
        r.drafts += 1
        r.draft_tokens += depth
        r.accepted_tokens += accepted
        r.last_accepted = accepted
        if not r.accept_histogram:
            r.accept_histogram = [0] * (self.k + 1)
        r.accept_histogram[accepted] += 1
        c.drafts += 1
        c.draft_tokens += depth
        c.accepted_tokens += accepted
        self._iv_drafts += 1
        self._iv_draft_tokens += depth
        self._iv_accepted += accepted
        for i in range(accepted):
            c.accepted_per_pos[i] += 1
            self._iv_per_pos[i] += 1
        self._sg_forward_ct += 1
        self._sg_accept_tokens += 1 + accepted

    # ---------------------------------------------------------------- wire
    def _render(self, r: Request, n: int, *, first: bool) -> list[tuple[str, int, bytes]]:
        """The events of one step for one request: (kind, tokens, bytes), built before the
        step ends so the write at the deadline is only a socket write."""
        start = r.emitted
        r.emitted += n
        emitted = [self._emission(i, r.lossy_from) for i in range(start, start + n)]
        text = "".join(e.token for e in emitted)
        r.text_parts.append(text)
        r.emissions += emitted
        finished = r.finished
        events: list[tuple[str, int, bytes]] = []
        if not r.stream:
            return [("step", n, b"")]
        p = self.profile
        fails = p.failures
        if p.has(FailMode.MALFORMED_CHUNK) and not r.fault_done and r.emitted >= fails.after_tokens:
            r.fault_done = True
            # a truncated JSON object: what a half-written event looks like
            events.append(("malformed", 0, formats.sse(f'{{"id":"{r.rid}","object":"chat.c')))
        if p.engine == "vllm":
            events += self._vllm_events(r, n, text, emitted, first=first, finished=finished)
        else:
            events += self._sglang_events(r, n, text, emitted, first=first, finished=finished)
        if finished:
            events.append(("done", 0, formats.SSE_DONE))
        return events

    def _vllm_events(
        self, r: Request, n: int, text: str, emitted: list[Emission], *, first: bool, finished: bool
    ) -> list[tuple[str, int, bytes]]:
        """vLLM's events of one step: the role chunk first, the content chunk (with the finish
        reason on the last), then the usage chunk when asked for."""
        model = r.model
        events: list[tuple[str, int, bytes]] = []
        if first:
            events.append(
                ("role", 0, formats.sse(formats.vllm_role_chunk(r.rid, r.created, model)))
            )
        reason = r.finish_reason if finished else None
        lps = self.logprobs(r, emitted)
        chunk = formats.vllm_content_chunk(r.rid, r.created, model, text, reason, lps)
        events.append(("content", n, formats.sse(chunk)))
        if finished and r.include_usage and not self.profile.has(FailMode.MISSING_USAGE):
            usage = formats.vllm_usage_chunk(
                r.rid,
                r.created,
                model,
                r.reported_prompt_tokens,
                r.emitted,
                self._vllm_spec_metrics(r),
            )
            events.append(("usage", 0, formats.sse(usage)))
        return events

    def _sglang_events(
        self, r: Request, n: int, text: str, emitted: list[Emission], *, first: bool, finished: bool
    ) -> list[tuple[str, int, bytes]]:
        """SGLang's events of one step: the role chunk first, the content chunk, and on the last
        step the finish chunk, the speculative-token details when asked for, and the usage."""
        now = int(time.time())
        model = r.model
        events: list[tuple[str, int, bytes]] = []
        if first:
            events.append(("role", 0, formats.sse(formats.sglang_role_chunk(r.rid, now, model))))
        lps = self.logprobs(r, emitted)
        chunk = formats.sglang_content_chunk(r.rid, now, model, text, lps)
        events.append(("content", n, formats.sse(chunk)))
        if not finished:
            return events
        matched = formats.EMULATED_EOS_TOKEN_ID if r.finish_reason == "stop" else None
        finish = formats.sglang_finish_chunk(r.rid, now, model, r.finish_reason, matched)
        events.append(("finish", 0, formats.sse(finish)))
        if r.spec_details and self.k and r.drafts:
            details = formats.sglang_spec_tokens_details(
                r.drafts, r.accepted_tokens, self.k, r.emitted, r.accept_histogram
            )
            sglext = formats.sglang_sglext_chunk(r.rid, now, model, details)
            events.append(("sglext", 0, formats.sse(sglext)))
        if r.include_usage and not self.profile.has(FailMode.MISSING_USAGE):
            usage = formats.sglang_usage_chunk(
                r.rid, now, model, r.reported_prompt_tokens, r.emitted
            )
            events.append(("usage", 0, formats.sse(usage)))
        return events

    def _vllm_spec_metrics(self, r: Request) -> dict[str, Any] | None:
        """vLLM's per-request ``metrics.speculative_decoding``, when the server was started
        with --per-request-spec-decode-metrics (summary or detailed) and drafted."""
        level = self.profile.per_request_spec_decode_metrics
        if level == "none" or not self.k:
            return None
        hist = r.accept_histogram or [0] * (self.k + 1)
        return formats.vllm_spec_decoding_metrics(self.k, hist, level == "detailed")

    def _emission(self, i: int, lossy_from: int | None = None) -> Emission:
        """The token at output position ``i`` (bench.emulator.logprobs): the target's greedy
        choice, unless a speculative server's near_tie_flip or lossy_draft mode, or its lossy
        verification from the request's ``lossy_from``, changes it."""
        p = self.profile
        after = p.failures.after_tokens
        flip = first_near_tie(after) if self.k and p.has(FailMode.NEAR_TIE_FLIP) else None
        lossy = after if self.k and p.has(FailMode.LOSSY_DRAFT) else None
        if self.k and lossy_from is not None:
            lossy = lossy_from if lossy is None else min(lossy, lossy_from)
        return emission(i, flip_at=flip, lossy_from=lossy)

    def logprobs(self, r: Request, emitted: list[Emission]) -> dict[str, Any] | None:
        """``choices[].logprobs`` for ``emitted`` when the request asked for logprobs."""
        if r.top_logprobs is None:
            return None
        tokens = [(e.token, e.logprob, e.top) for e in emitted]
        return formats.chat_logprobs(tokens, r.top_logprobs, self.profile.engine)

    async def _emit(
        self, plans: list[tuple[Request, list[tuple[str, int, bytes]]]], scheduled: float
    ) -> None:
        p = self.profile
        fails = p.failures
        for r, events in plans:
            if r.outcome != "pending":
                continue
            n = sum(tok for _, tok, _ in events)
            if r.stream and r.sink is not None:
                data = b"".join(b for _, _, b in events)
                try:
                    r.sink.write(data)
                except (ConnectionError, RuntimeError):
                    self.drop(r, "client_gone")
                    continue
            t = self.clock()
            for kind, tok, _ in events:
                r.chunks.append(ChunkTruth(kind, tok, scheduled, t))
            self.tokens_written += n
            self.counters.generation_tokens += n
            self._iv_gen += n
            self._sg_gen += n
            if (
                p.has(FailMode.DISCONNECT)
                and r.stream
                and not r.finished
                and r.emitted >= fails.after_tokens
                and r.abort is not None
            ):
                r.abort()
                self.drop(r, "disconnected")
                continue
            if r.finished:
                self._finish(r)
        if p.has(FailMode.EXIT_MID_RUN) and self.tokens_written >= fails.after_tokens:
            self._log(self._engine_error_line("EngineCore encountered a fatal error."))
            self._on_exit(fails.exit_code)

    def _finish(self, r: Request) -> None:
        c = self.counters
        if r in self.running:
            self.running.remove(r)
        c.success[r.finish_reason] = c.success.get(r.finish_reason, 0) + 1
        key = "true" if r.stream else "false"
        c.sg_prompt_tokens[key] = c.sg_prompt_tokens.get(key, 0) + r.reported_prompt_tokens
        c.sg_generation_tokens[key] = c.sg_generation_tokens.get(key, 0) + r.emitted
        c.sg_requests[key] = c.sg_requests.get(key, 0) + 1
        c.sg_verify_calls += r.drafts
        r.outcome = "ok"
        r.done.set()

    def _engine_error_line(self, message: str) -> str:
        if self.profile.engine == "vllm":
            return formats.vllm_log("EngineCore", _pid(), "ERROR", "core.py:0", message)
        return formats.sglang_log(message, tp_rank=0)

    # ---------------------------------------------------------------- periodic logs
    async def vllm_stats_loop(self) -> None:
        """vLLM's LoggingStatLogger: every log interval, the throughput line and, when drafts
        were verified, the SpecDecoding line (vllm/v1/spec_decode/metrics.py:82-137)."""
        interval = self.profile.log_interval_s * self.scale
        last = self.clock()
        while not self._stopped:
            await asyncio.sleep(interval)
            now = self.clock()
            elapsed = max(now - last, 1e-9)
            last = now
            pid = _pid()
            if self._iv_prompt or self._iv_gen or self.running or self.waiting:
                src, tmpl = formats.VLLM_THROUGHPUT_LINE
                msg = tmpl % (
                    self._iv_prompt / elapsed,
                    self._iv_gen / elapsed,
                    len(self.running),
                    len(self.waiting),
                )
                self._log(formats.vllm_log("APIServer", pid, "INFO", src, msg))
            if self._iv_drafts:
                d, dt, a = self._iv_drafts, self._iv_draft_tokens, self._iv_accepted
                rates = ", ".join(f"{x / d:.3f}" for x in self._iv_per_pos)
                src, tmpl = formats.VLLM_SPEC_LINE
                msg = tmpl % (1 + a / d, a / elapsed, dt / elapsed, a, dt, rates, a / dt * 100)
                self._log(formats.vllm_log("APIServer", pid, "INFO", src, msg))
            if self.profile.cudagraph_metrics and self._iv_graph_steps:
                self._log(formats.vllm_log("APIServer", pid, "INFO", *self._cudagraph_table()))
            self._iv_prompt = self._iv_gen = 0
            self._iv_drafts = self._iv_draft_tokens = self._iv_accepted = 0
            self._iv_per_pos = [0] * self.k
            self._iv_graph_steps = {}

    #: vLLM's default capture sizes up to 16 (config/compilation.py), enough for the profiles
    CAPTURE_SIZES = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)

    def _cudagraph_table(self) -> tuple[str, str]:
        """(source, message) of the --cudagraph-metrics table for the interval's decode steps:
        FULL_AND_PIECEWISE with captured graphs, NONE steps when they run eager."""
        per_req = 1 + self.k
        mode = "FULL_AND_PIECEWISE" if self.profile.graphs_captured else "NONE"
        sizes = [s for s in self.CAPTURE_SIZES if self.profile.graphs_captured]
        rows = []
        for batch, count in sorted(self._iv_graph_steps.items()):
            tokens = batch * per_req
            padded = next((s for s in self.CAPTURE_SIZES if s >= tokens), tokens)
            if not self.profile.graphs_used:
                padded = tokens
            rows.append((tokens, padded, "FULL" if self.profile.graphs_used else "NONE", count))
        src, _ = formats.VLLM_CUDAGRAPH_SETTINGS
        return src, formats.vllm_cudagraph_table(mode, sizes, rows)

    def _log_sglang_prefill(self, new_seq: int, new_tokens: int) -> None:
        full = sum(r.prompt_tokens + r.emitted for r in self.running) + new_tokens
        msg = formats.SGLANG_PREFILL_LINE.format(
            new_seq=new_seq,
            new_token=new_tokens,
            full_usage=full / self.profile.max_total_num_tokens,
            mamba_usage=(len(self.running) + new_seq) / (self.cap + 1),
            running=len(self.running),
            queue=len(self.waiting),
        )
        self._log(formats.sglang_log(msg, tp_rank=0))

    def _log_sglang_decode(self) -> None:
        now = self.clock()
        gap = max(now - self._sg_last_log, 1e-9)
        self._sg_last_log = now
        c = self.counters
        c.sg_gen_throughput = self._sg_gen / gap
        self._sg_gen = 0
        spec = ""
        if self.k:
            fct = max(self._sg_forward_ct, 1)
            c.sg_accept_length = self._sg_accept_tokens / fct
            correct = self._sg_accept_tokens - self._sg_forward_ct
            c.sg_accept_rate = correct / (fct * self.k)
            spec = formats.SGLANG_SPEC_PART.format(
                accept_len=c.sg_accept_length, accept_rate=c.sg_accept_rate
            )
            self._sg_forward_ct = self._sg_accept_tokens = 0
        full = sum(r.prompt_tokens + r.emitted for r in self.running)
        msg = formats.SGLANG_DECODE_LINE.format(
            running=len(self.running),
            full_tokens=full,
            full_usage=full / self.profile.max_total_num_tokens,
            mamba_num=len(self.running),
            mamba_usage=len(self.running) / (self.cap + 1),
            spec=spec,
            graph=self.profile.graphs_used,
            gen_tput=c.sg_gen_throughput,
            queue=len(self.waiting),
        )
        self._log(formats.sglang_log(msg, tp_rank=0))


def _pid() -> int:
    return os.getpid()


#: FLy (emulated): this share of the standard verifier's rejections still rejects; the rest
#: is accepted loosely (SIMULATED, no upstream figure)
FLY_REJECT_SHARE = 0.6
#: a lossy verifier's first non-target token: LOSSY_FIRST + crc32(prompt) % LOSSY_SPREAD, so
#: some prompts' short answers stay the target's and others do not (SIMULATED)
LOSSY_FIRST = 2
LOSSY_SPREAD = 40


def verified_acceptance(profile: Profile, acceptance: tuple[float, ...]) -> tuple[float, ...]:
    """The conditional per-position acceptance under the profile's verification: vLLM's
    synthetic rates (unconditional) made conditional as vLLM does (each over the one before),
    FLy's looser acceptance, else the drafter's own."""
    v = profile.verification
    if v.method == "synthetic" and v.synthetic_rates:
        out, before = [], 1.0
        for u in v.synthetic_rates:
            out.append(u / before if before > 0 else 0.0)
            before = u
        return tuple(out)
    if v.method == "fly":
        return tuple(1.0 - (1.0 - p) * FLY_REJECT_SHARE for p in acceptance)
    return acceptance


def lossy_start(profile: Profile, prompt_text: str) -> int | None:
    """Where a lossy verifier's output leaves the target's for this prompt (None: lossless)."""
    if not profile.verification.lossy:
        return None
    return LOSSY_FIRST + zlib.crc32(prompt_text.encode()) % LOSSY_SPREAD
