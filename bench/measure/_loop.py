"""Measure one engine endpoint: warmup, then measured iterations of C concurrent streams.

``measure(RunSpec) -> Payload`` is the single path used by ``specbench run`` and by the matrix
(once per concurrency level, against an already-running server). Per iteration: scrape the
engine's counters, open C connections, send C requests together, wait for every stream, scrape
again. Per request the client gives TTFT, decode tok/s ((completion_tokens - 1) / first-to-last
token window, tokens from usage) and E2E; per iteration the per-stream mean and the aggregate
(total completion tokens / (last token - first send)); over the valid measured iterations,
``bench.core.summarize`` gives mean, stddev, median, min, max and the 95% CI (the level's payload
is assembled from the iterations by ``_assemble.py``).

Server misbehaviour never raises: it becomes an invalid request/iteration with a one-line reason
and the payload's validity block says invalid. Bad input (unreachable server, unknown served
model, impossible prompt size) raises ``InputError``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from bench.core import (
    InputError,
    utc_now,
)
from bench.core._errors import ServerError
from bench.engines import get_engine
from bench.measure._acceptance import (
    METRICS,
    counters_went_back,
    delta,
    read_metrics,
    server_ttft_ms,
)
from bench.measure._assemble import level_payload, with_telemetry
from bench.measure._client import Connection, RawResponse, interpret_chat_stream, request
from bench.measure._gcpause import gc_paused
from bench.measure._merged import MERGED_RETRIES, merged_note, merged_only
from bench.measure._probes import logprob_probes
from bench.measure._promptset import PromptItem
from bench.measure._request import (
    PROBE_TIMEOUT_S,
    engine_chat_template,
    request_body,
)
from bench.measure._requestacc import SGLANG_REQUEST_FIELD, spec_tokens_of
from bench.measure._runspec import RunSpec
from bench.measure._validity import MetricsProblem
from bench.measure._workload import PromptFactory, load_tokenizer, nonce_stream
from bench.schema import (
    IterationRecord,
    MetricSnapshot,
    Payload,
    RequestRecord,
)

if TYPE_CHECKING:
    from bench.machine import Sampler

#: HTTP statuses after which a request that changed nothing may be sent again, at most
#: RETRIES times, after the server's Retry-After (DEFAULT_RETRY_S without one); a Retry-After
#: longer than MAX_RETRY_AFTER_S is not waited for
RETRY_STATUSES = (429, 503)
RETRIES = 3
DEFAULT_RETRY_S = 1.0
MAX_RETRY_AFTER_S = 60.0


class ProgressSink(Protocol):
    """Told about each iteration (warmups included) as it starts and ends."""

    def iteration_started(self, index: int, total: int, warmup: bool) -> None: ...

    def iteration_finished(self, record: IterationRecord) -> None: ...


def measure(
    spec: RunSpec,
    progress: ProgressSink | None = None,
    *,
    telemetry: Sampler | None = None,
    no_telemetry_reason: str | None = None,
) -> Payload:
    """Run the whole measurement against an already-running server (sync wrapper).

    ``telemetry``: a running ``bench.machine.Sampler`` (the matrix keeps one per
    configuration); the payload gets its summary over the measured iteration windows and any
    throttling as a validity warning. Without one the payload says why there is none."""
    measured = measure_level(
        spec, progress, telemetry=telemetry, no_telemetry_reason=no_telemetry_reason
    )
    return probe_level(spec, measured)


class Measured(NamedTuple):
    """A measured level and the prompts its logprob probes will send again."""

    payload: Payload
    probe_prompts: list[str]


def measure_level(
    spec: RunSpec,
    progress: ProgressSink | None = None,
    *,
    telemetry: Sampler | None = None,
    no_telemetry_reason: str | None = None,
) -> Measured:
    """The measurement without its logprob probes: the matrix sends every level's probes once
    all levels are measured, so a probe that upsets the server (vLLM 0.32.0's CPU build cannot
    compile the logprob kernel and its engine core dies) costs no measurement, and the server
    log of a level's window holds only the measured requests."""
    return asyncio.run(
        measure_async(spec, progress, telemetry=telemetry, no_telemetry_reason=no_telemetry_reason)
    )


def probe_level(spec: RunSpec, measured: Measured) -> Payload:
    """``measured``'s payload with its logprob probes (``evidence.logprob_probes``); unchanged
    under sampling (near-ties mean something under greedy decoding only) or without prompts."""
    if not measured.probe_prompts or spec.temperature != 0:
        return measured.payload
    probes = asyncio.run(
        logprob_probes(
            spec.base_url,
            spec.served_model,
            measured.probe_prompts,
            spec.max_tokens,
            spec.temperature,
            spec.request_timeout_s,
            spec.concurrency,
        )
    )
    ev = measured.payload.evidence
    update = {"evidence": ev.model_copy(update={"logprob_probes": probes})}
    return measured.payload.model_copy(update=update)


def retry_after(raw: RawResponse) -> float | None:
    """Seconds to wait before sending again a request answered 429/503 (its Retry-After, in
    seconds or as an HTTP date; DEFAULT_RETRY_S without one); None: not a retryable answer,
    or a wait longer than MAX_RETRY_AFTER_S."""
    if raw.status not in RETRY_STATUSES:
        return None
    value = raw.headers.get("retry-after", "").strip()
    if not value:
        return DEFAULT_RETRY_S
    wait = float(value) if value.isdigit() else None
    if wait is None:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return DEFAULT_RETRY_S
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        wait = max(0.0, (when - datetime.now(UTC)).total_seconds())
    return wait if wait <= MAX_RETRY_AFTER_S else None


def _refusal(raw: RawResponse) -> str:
    ra = raw.headers.get("retry-after")
    return f"HTTP {raw.status}" + (f" (Retry-After: {ra})" if ra else "")


async def _server_prompt_count(spec: RunSpec, prompt: str) -> int:
    body = request_body(spec, prompt, max_tokens=1)
    body.pop(SGLANG_REQUEST_FIELD, None)
    body["ignore_eos"] = False
    for attempt in range(RETRIES + 1):
        conn = Connection(spec.base_url, sse=True)
        try:
            await conn.open(PROBE_TIMEOUT_S)
        except (OSError, TimeoutError) as err:
            raise ServerError(
                f"--base-url {spec.base_url}: calibration: cannot connect: {err}"
            ) from None
        conn.send("POST", "/v1/chat/completions", json.dumps(body).encode())
        raw = await conn.wait(spec.request_timeout_s, spec.stall_timeout_s)
        conn.close()
        wait = retry_after(raw)
        if wait is None or attempt == RETRIES:
            break
        await asyncio.sleep(wait)
    rec = interpret_chat_stream(raw, "calibration", 0, max_tokens=1, model=spec.served_model)
    if rec.error is not None or rec.prompt_tokens is None:
        why = rec.error or "; ".join(rec.reasons) or "no usage.prompt_tokens"
        status = raw.status or 0
        if 400 <= status < 500 and status not in (408, *RETRY_STATUSES):
            # the request built from the user's options was refused (e.g. a prompt longer
            # than the server's context)
            raise InputError("--base-url", f"calibration request refused: {why}")
        retried = f" after {attempt} retr{'y' if attempt == 1 else 'ies'}" if attempt else ""
        raise ServerError(f"--base-url {spec.base_url}: calibration request failed{retried}: {why}")
    return rec.prompt_tokens


async def _probe(spec: RunSpec) -> tuple[bool, list[str]]:
    """Reachability and served-model check; returns (emulator announced?, served model ids)."""
    for attempt in range(RETRIES + 1):
        raw = await request(spec.base_url, "GET", "/v1/models", timeout_s=PROBE_TIMEOUT_S)
        wait = retry_after(raw)
        if wait is None or attempt == RETRIES:
            break
        await asyncio.sleep(wait)
    if raw.status is None and raw.error and raw.error.startswith("cannot connect"):
        raise InputError("--base-url", raw.error)  # nothing listens where the user pointed
    where = f"--base-url {spec.base_url}: GET /v1/models"
    if raw.status is None:
        raise ServerError(f"{where}: {raw.error or 'no response'}")
    if raw.status != 200:
        raise ServerError(f"{where} answered {_refusal(raw)}")
    try:
        ids = [str(m["id"]) for m in json.loads(raw.body)["data"]]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise ServerError(f"{where} did not return an OpenAI model list") from None
    if spec.served_model not in ids:
        raise InputError("--served-model", f"{spec.served_model!r} not served (serves: {ids})")
    return raw.is_emulator, ids


async def _server_version(spec: RunSpec) -> str | None:
    """The version the running server reports about itself (bench.engines: path and key);
    None when it does not answer."""
    engine = get_engine(spec.engine)
    if not engine.version_path:
        return None
    raw = await request(spec.base_url, "GET", engine.version_path, timeout_s=PROBE_TIMEOUT_S)
    if raw.status != 200:
        return None
    try:
        value = json.loads(raw.body).get(engine.version_key)
    except (ValueError, AttributeError, RecursionError):
        return None
    return str(value) if value else None


class Scrape(NamedTuple):
    """One GET /metrics: the snapshot of the served model's series, or what went wrong."""

    snapshot: MetricSnapshot | None
    is_emulator: bool
    problem: str | None = None
    status: int | None = None
    series: str = ""
    other_models: tuple[str, ...] = ()


async def _scrape(spec: RunSpec) -> Scrape:
    raw = await request(spec.base_url, "GET", "/metrics", timeout_s=PROBE_TIMEOUT_S)
    if raw.status is None:
        return Scrape(None, False, f"unreachable: {raw.error or 'no response'}")
    if raw.status != 200:
        return Scrape(None, raw.is_emulator, f"answered HTTP {raw.status}", raw.status)
    read = read_metrics(
        raw.body.decode("utf-8", "replace"), METRICS[spec.engine], spec.served_model
    )
    if read.problem is not None:
        return Scrape(None, raw.is_emulator, read.problem, raw.status)
    snap = MetricSnapshot(at=time.perf_counter(), values=read.values)
    return Scrape(snap, raw.is_emulator, None, 200, read.series, read.other_models)


async def _one_iteration(
    spec: RunSpec,
    prompts: list[str],
    index: int,
    warmup: bool,
    items: list[PromptItem] | None = None,
) -> tuple[IterationRecord, list[RawResponse]]:
    conns = [Connection(spec.base_url, sse=True) for _ in prompts]
    opened = await asyncio.gather(*(c.open(PROBE_TIMEOUT_S) for c in conns), return_exceptions=True)
    if items is None:
        bodies = [json.dumps(request_body(spec, p)).encode() for p in prompts]
    else:
        bodies = [json.dumps(request_body(spec, "", i.chat_messages())).encode() for i in items]
    # Send all C requests back to back, then wait: the streams start together. No cycle
    # collection from the first send to the last byte (bench/measure/_gcpause.py).
    with gc_paused():
        for conn, body, err in zip(conns, bodies, opened, strict=True):
            if isinstance(err, BaseException):
                conn.raw.error = f"cannot connect: {err or type(err).__name__}"
                continue
            conn.send("POST", "/v1/chat/completions", body)
        raws = await asyncio.gather(
            *(
                c.wait(spec.request_timeout_s, spec.stall_timeout_s)
                if not isinstance(e, BaseException)
                else _done(c.raw)
                for c, e in zip(conns, opened, strict=True)
            )
        )
    for c in conns:
        c.close()
    records = [
        interpret_chat_stream(
            raw, _request_id(raw, index, k), k, spec.max_tokens, model=spec.served_model
        )
        for k, raw in enumerate(raws)
    ]
    for k, (rec, prompt) in enumerate(zip(records, prompts, strict=True)):
        rec.prompt_sha256 = hashlib.sha256(prompt.encode()).hexdigest()
        rec.spec_tokens = spec_tokens_of(raws[k])
        if items is not None:
            rec.category = items[k].category
    it = _iteration_record(spec, index, warmup, records)
    it.category = items[0].category if items else None
    return it, list(raws)


async def _done(raw: RawResponse) -> RawResponse:
    return raw


def _request_id(raw: RawResponse, index: int, k: int) -> str:
    """The server's completion id (the emulator's truth key) when the stream gave one."""
    for _, data in raw.events[:1]:
        try:
            obj = json.loads(data)
            rid = obj.get("id") if isinstance(obj, dict) else None
            if isinstance(rid, str):
                return rid
        except (ValueError, RecursionError):
            pass
    return f"it{index}-s{k}"


def _iteration_record(
    spec: RunSpec, index: int, warmup: bool, records: list[RequestRecord]
) -> IterationRecord:
    sent = [r.sent_at for r in records if r.sent_at]
    start = min(sent) if sent else 0.0
    ends = [r.sent_at + r.last_token_at for r in records if r.last_token_at is not None]
    ended = [r.sent_at + r.ended_at for r in records if r.ended_at is not None]
    it = IterationRecord(
        index=index,
        warmup=warmup,
        window_start=start,
        window_end=max(ended) if ended else start,
        requests=records,
    )
    reasons: list[str] = []
    # real-text prompts have the length they have: no exact-P check
    if not spec.allow_prompt_mismatch and spec.prompt_set is None:
        for r in records:
            if r.prompt_tokens is not None and r.prompt_tokens != spec.prompt_tokens:
                r.reasons = [
                    *r.reasons,
                    f"prompt mismatch: server counted {r.prompt_tokens} prompt tokens, "
                    f"expected {spec.prompt_tokens}",
                ]
    bad = [r for r in records if not r.valid]
    if bad:
        first = bad[0]
        why = first.error or first.reasons[0]
        reasons.append(
            f"{len(bad)}/{len(records)} requests invalid; stream {first.stream_index}: {why}"
        )
    rates = [r.decode_tok_s for r in records if r.decode_tok_s is not None]
    if rates and not bad:
        it.per_stream_mean_tok_s = math.fsum(rates) / len(rates)
        total = sum(r.completion_tokens or 0 for r in records)
        if ends and max(ends) > start:
            it.aggregate_tok_s = total / (max(ends) - start)
    it.reasons = reasons
    return it


async def measure_async(
    spec: RunSpec,
    progress: ProgressSink | None = None,
    *,
    telemetry: Sampler | None = None,
    no_telemetry_reason: str | None = None,
) -> Measured:
    """The level's iterations in order, each reported to ``progress``, then their payload (and
    the prompts its logprob probes will send)."""
    started = utc_now()
    is_emulator, _ = await _probe(spec)
    warnings: list[str] = []
    spec = await _with_server_version(spec, warnings)
    factory = await _prompt_factory(spec)
    engine_template = await engine_chat_template(spec)
    slots = iteration_slots(spec)
    cursor: dict[str, int] = {}
    iterations: list[IterationRecord] = []
    first_prompt: str | None = None
    probe_prompts: list[str] = []
    metrics_problems: list[MetricsProblem] = []
    series: dict[str, Any] = {}
    total = len(slots)
    sending = _Sending(spec, factory, cursor, warnings)
    for i, (category, warmup) in enumerate(slots):
        if progress is not None:
            progress.iteration_started(i, total, warmup)
        sent = await sending.measurable(i, warmup, category)
        is_emulator = is_emulator or sent.saw_emulator
        it, prompts = sent.record, sent.prompts
        if sent.before is not None and sent.after is not None:
            series = _iteration_counters(spec, i, sent.before, sent.after, it, metrics_problems)
        if not warmup and first_prompt is None:
            first_prompt = prompts[0]
        if not warmup:
            probe_prompts += prompts[: spec.logprob_probes - len(probe_prompts)]
        iterations.append(it)
        if progress is not None:
            progress.iteration_finished(it)
    payload = level_payload(
        spec,
        iterations,
        first_prompt or "",
        is_emulator,
        started,
        warnings,
        metrics_problems,
        series,
        engine_template,
    )
    if spec.prompt_set is not None:
        # the logprob probes re-send synthetic prompts only
        probe_prompts = []
    return Measured(with_telemetry(payload, telemetry, no_telemetry_reason), probe_prompts)


async def _with_server_version(spec: RunSpec, warnings: list[str]) -> RunSpec:
    """``spec`` with the version the server reports, if it reports one (a warning when it is
    not the one expected)."""
    server_version = await _server_version(spec)
    if server_version is None:
        return spec
    if spec.engine_version and spec.engine_version != server_version:
        warnings.append(
            f"the server reports version {server_version}, expected {spec.engine_version}"
        )
    return spec.model_copy(update={"engine_version": server_version})


async def _prompt_factory(spec: RunSpec) -> PromptFactory | None:
    """The synthetic workload's prompt builder, calibrated against the server's own prompt
    count; None for a prompt set (real text)."""
    if spec.prompt_set is not None:
        return None
    counter = load_tokenizer(spec.tokenizer) if spec.tokenizer else None
    factory = PromptFactory(
        spec.prompt_tokens, counter, nonce_stream(spec.prompt_seed, spec.concurrency)
    )
    await factory.calibrate(
        lambda p: _server_prompt_count(spec, p), allow_mismatch=spec.allow_prompt_mismatch
    )
    return factory


class _Sent(NamedTuple):
    """One iteration as last sent: its record and prompts, the /metrics scrapes around it
    (None for a warmup), and whether any response or scrape came from the emulator."""

    record: IterationRecord
    prompts: list[str]
    before: Scrape | None
    after: Scrape | None
    saw_emulator: bool


@dataclass
class _Sending:
    """How every iteration of one level is sent: the run, where its prompts come from (the
    synthetic workload's factory, or the prompt set with each category's next position) and
    the level's warnings, which the sending adds to."""

    spec: RunSpec
    factory: PromptFactory | None
    cursor: dict[str, int]
    warnings: list[str]

    async def measurable(self, i: int, warmup: bool, category: str | None) -> _Sent:
        """Iteration ``i`` as ``send`` sends it, sent again (at most MERGED_RETRIES times)
        while every invalid stream of it arrived merged in one chunk; a measured iteration of
        synthetic prompts only (bench/measure/_merged.py says why)."""
        sent = await self.send(i, warmup, category)
        discarded: list[str] = []
        for attempt in range(MERGED_RETRIES):
            if warmup or self.factory is None or not merged_only(sent.record):
                break
            discarded.append(merged_note(sent.record, attempt))
            sent = await self.send(i, warmup, category, aside=True)
        self.warnings += discarded
        sent.record.discarded = discarded
        return sent

    async def send(self, i: int, warmup: bool, category: str | None, aside: bool = False) -> _Sent:
        """Iteration ``i`` between two scrapes of /metrics (none for a warmup), sent again
        while the server refuses it with 429/503 and a Retry-After (at most RETRIES times);
        with ``aside``, synthetic prompts from outside the seeded sequence."""
        spec = self.spec
        saw_emulator = False
        for attempt in range(RETRIES + 1):
            # fresh prompts on a retry too: streams of the refused attempt that were served
            # left their prompts in the server's prefix cache
            items: list[PromptItem] | None = None
            if self.factory is not None:
                prompts = [self.factory.build(aside) for _ in range(spec.concurrency)]
            else:
                items = _next_items(spec, category or "", self.cursor)
                prompts = [item.text() for item in items]
            before = None if warmup else await _scrape(spec)
            it, raws = await _one_iteration(spec, prompts, i, warmup, items)
            after = None if warmup else await _scrape(spec)
            saw_emulator = saw_emulator or any(r.is_emulator for r in raws)
            saw_emulator = saw_emulator or any(s.is_emulator for s in (before, after) if s)
            # A request the server refused with 429/503 produced nothing: the whole iteration
            # (its streams start together) is sent again once the server's Retry-After passed.
            waits = [retry_after(r) for r in raws if r.status in RETRY_STATUSES]
            if not waits or None in waits or attempt == RETRIES:
                break
            wait = max(w for w in waits if w is not None)
            refused = next(r for r in raws if r.status in RETRY_STATUSES)
            self.warnings.append(
                f"iteration {i}: the server answered {_refusal(refused)} to "
                f"{len(waits)}/{len(raws)} request(s); sent the iteration again, with fresh "
                f"prompts, after {wait:g} s"
            )
            await asyncio.sleep(wait)
        return _Sent(it, prompts, before, after, saw_emulator)


def _iteration_counters(
    spec: RunSpec,
    i: int,
    before: Scrape,
    after: Scrape,
    it: IterationRecord,
    metrics_problems: list[MetricsProblem],
) -> dict[str, Any]:
    """Give measured iteration ``i`` its acceptance and server-side TTFT from the counters
    read around it, or add to ``metrics_problems`` why they cannot be used (a scrape failed,
    a counter went back). Returns the series the counters were read from."""
    for scrape, when in ((before, "before"), (after, "after")):
        if scrape.problem is not None:
            metrics_problems.append(
                MetricsProblem(
                    "scrape",
                    i,
                    f"iteration {i}: GET /metrics {when} it {scrape.problem}",
                    scrape.status,
                )
            )
    if before.snapshot is not None and after.snapshot is not None:
        back = counters_went_back(before.snapshot, after.snapshot)
        if back:
            metrics_problems.append(
                MetricsProblem("reset", i, f"iteration {i}: {'; '.join(back[:4])}", after.status)
            )
        else:
            acc = delta(spec.engine, before.snapshot, after.snapshot, spec.spec_num_tokens)
            if acc is not None:
                acc = acc.model_copy(update={"source": f"{acc.source}, series {after.series}"})
            it.acceptance = acc
            it.server_ttft_ms = server_ttft_ms(spec.engine, before.snapshot, after.snapshot)
    return {"series": after.series, "other_models_ignored": list(after.other_models)}


def iteration_slots(spec: RunSpec) -> list[tuple[str | None, bool]]:
    """(category, warmup) of every iteration in order: the synthetic workload's warmup and
    measured iterations, or, for a prompt set, each category's own (its windows are
    contiguous, so the /metrics deltas of its iterations are its own)."""
    per = [i < spec.warmup for i in range(spec.warmup + spec.iterations)]
    if spec.prompt_set is None:
        return [(None, w) for w in per]
    return [(c, w) for c in spec.prompt_set.categories() for w in per]


def _next_items(spec: RunSpec, category: str, cursor: dict[str, int]) -> list[PromptItem]:
    """The category's next ``concurrency`` prompts, in file order, wrapping around."""
    assert spec.prompt_set is not None
    pool = spec.prompt_set.of(category)
    start = cursor.get(category, 0)
    cursor[category] = start + spec.concurrency
    return [pool[(start + k) % len(pool)] for k in range(spec.concurrency)]
