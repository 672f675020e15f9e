"""Streaming HTTP client: one chat-completions request -> a ``RequestRecord`` with exact timing.

Design (why not httpx or aiohttp): the measurement needs the arrival time of every SSE event,
and the cost per event bounds how many tokens per second one process can ingest without the
timestamps drifting. httpx's async streaming pays several coroutine hops and buffer copies per
line; aiohttp stamps only when the reading coroutine is resumed, one event-loop turn after the
bytes arrived. This module is a small HTTP/1.1 client on a raw ``asyncio.Protocol``:
``data_received`` stamps ``time.perf_counter()`` on entry (the moment the bytes leave the
kernel), de-chunks the body and splits SSE events in place, and keeps ``(time, bytes)`` pairs.
JSON decoding happens after the stream ends (``interpret_chat_stream``), off the timing path.
``tests/bench_client.py`` measures the resulting error against the server's own write times and
compares the ingest rate with httpx and aiohttp.

Scope is deliberately narrow: plain ``http://`` (engines run on the same host or LAN),
``Content-Length``, ``chunked`` or read-until-close bodies, one request per connection
(connections are opened before an iteration starts so TTFT excludes TCP setup). TCP_NODELAY
is set on every socket so a request is never held back by Nagle's algorithm.

Token accounting follows the measurement contract: the first token is the first chunk carrying
non-empty ``content``, ``reasoning_content`` (SGLang 0.5.19, ``srt/entrypoints/openai/
protocol.py`` DeltaMessage) or ``reasoning`` (vLLM 0.33.0, ``entrypoints/generate/base/
protocol.py`` DeltaMessage); a role-only or empty chunk is not a token. Token counts come from
the server's ``usage`` only; chunks are never counted as tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bench.measure._merged import MERGED
from bench.schema import RequestRecord

EMULATOR_HEADER = "x-specbench-emulator"
_MAX_HEADER_BYTES = 64 * 1024
_MAX_PLAIN_BODY = 16 * 1024 * 1024
#: what one streamed response may send in all (a sane stream of 8192 tokens with logprobs is a
#: few tens of MB): a server that floods would otherwise fill memory until the request timeout
MAX_STREAM_BYTES = 256 * 1024 * 1024
_json_decode = json.JSONDecoder().decode


@dataclass
class RawResponse:
    """What came back on one connection, before any JSON decoding.

    ``events`` holds ``(arrival, data)`` for every SSE ``data:`` field, ``arrival`` being
    ``time.perf_counter()`` when the bytes completing the event were received."""

    sent_at: float = 0.0
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[tuple[float, bytes]] = field(default_factory=list)
    body: bytes = b""
    first_byte_at: float | None = None
    ended_at: float | None = None
    complete: bool = False
    error: str | None = None
    #: SSE lines that are neither a ``data:`` field nor a comment (the first few, and how many):
    #: a server that sends its events without ``data:`` would otherwise lose them silently
    stray: list[bytes] = field(default_factory=list)
    stray_count: int = 0
    #: ``time.perf_counter()`` of the last bytes received (the stall timeout counts from it)
    last_data_at: float | None = None

    @property
    def is_emulator(self) -> bool:
        return self.headers.get(EMULATOR_HEADER, "").strip() == "1"


class _Protocol(asyncio.Protocol):
    """HTTP/1.1 response parser that stamps arrival times as bytes come in."""

    def __init__(self, raw: RawResponse, sse: bool) -> None:
        self.raw = raw
        self.sse = sse
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._head = bytearray()
        self._in_body = False
        self._chunked = False
        self._remaining: int | None = None  # Content-Length left, None = until close
        self._rest = b""  # undecoded chunked framing
        self._sbuf = bytearray()  # decoded body not yet split into SSE events
        self._plain = bytearray()
        self._received = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        raw = self.raw
        if raw.first_byte_at is None:
            raw.first_byte_at = now
        raw.last_data_at = now
        if self.done.done():
            return
        self._received += len(data)
        if self._received > MAX_STREAM_BYTES:
            self._fail(f"response larger than {MAX_STREAM_BYTES / 2**20:g} MiB")
            return
        try:
            if not self._in_body:
                self._head += data
                end = self._head.find(b"\r\n\r\n")
                if end < 0:
                    if len(self._head) > _MAX_HEADER_BYTES:
                        self._fail("response headers too large")
                    return
                data = bytes(self._head[end + 4 :])
                self._parse_head(bytes(self._head[:end]))
                self._in_body = True
                if self._remaining == 0:
                    self._finish()
                    return
            if self._chunked:
                self._feed_chunked(data, now)
            else:
                self._feed_plain(data, now)
        except _HttpError as err:
            self._fail(str(err))

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise _HttpError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
        try:
            self.raw.status = int(parts[1])
        except ValueError:
            raise _HttpError(f"bad status line: {lines[0][:80]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        self.raw.headers = headers
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif "content-length" in headers:
            try:
                self._remaining = int(headers["content-length"])
            except ValueError:
                raise _HttpError("bad Content-Length") from None
        # Only a 200 text/event-stream body is split into events; anything else is kept whole.
        ctype = headers.get("content-type", "")
        self.sse = self.sse and self.raw.status == 200 and "text/event-stream" in ctype

    def _feed_plain(self, data: bytes, now: float) -> None:
        if self._remaining is not None:
            data = data[: self._remaining]
            self._remaining -= len(data)
        self._body(data, now)
        if self._remaining == 0:
            self._finish()

    def _feed_chunked(self, data: bytes, now: float) -> None:
        if self._rest:
            data = self._rest + data
            self._rest = b""
        events = self.raw.events
        # Fast path: a chunk holding exactly one whole SSE event (how both engines write).
        fast = self.sse and not self._sbuf
        pos, n = 0, len(data)
        while True:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                break
            try:
                size = int(data[pos:eol].split(b";", 1)[0], 16)
            except ValueError:
                raise _HttpError(f"bad chunk size {data[pos:eol][:20]!r}") from None
            if size == 0:
                # Trailers are not used by the engines; the terminating chunk ends the body.
                self._finish()
                return
            start = eol + 2
            end = start + size
            if n < end + 2:
                break
            if (
                fast
                and data.startswith(b"data:", start)
                and data.startswith(b"\n\n", end - 2)
                and data.find(b"\n", start, end - 2) < 0
            ):
                events.append((now, data[start + 5 : end - 2].strip()))
            else:
                self._body(data[start:end], now)
                fast = self.sse and not self._sbuf
            pos = end + 2
        if pos < n:
            self._rest = data[pos:]

    def _body(self, data: bytes, now: float) -> None:
        if not data:
            return
        if not self.sse:
            self._plain += data
            if len(self._plain) > _MAX_PLAIN_BODY:
                raise _HttpError("response body too large")
            return
        sbuf = self._sbuf
        sbuf += data
        if b"\r" in data:
            sbuf[:] = sbuf.replace(b"\r\n", b"\n")
        start = 0
        events = self.raw.events
        while True:
            end = sbuf.find(b"\n\n", start)
            if end < 0:
                break
            block = bytes(sbuf[start:end])
            start = end + 2
            fields: list[bytes] = []
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    fields.append(line[5:].strip())
                elif line and line.split(b":", 1)[0] not in _OTHER_FIELDS:
                    self.raw.stray_count += 1
                    if len(self.raw.stray) < 4:
                        self.raw.stray.append(line[:200])
            if fields:  # an event's data lines join with newlines (the SSE standard)
                events.append((now, b"\n".join(fields)))
        if start:
            del sbuf[:start]

    def _finish(self) -> None:
        if not self.done.done():
            self.raw.ended_at = time.perf_counter()
            self.raw.complete = True
            self.raw.body = bytes(self._plain)
            self.done.set_result(None)
        if self.transport is not None:
            self.transport.close()

    def _fail(self, reason: str) -> None:
        if not self.done.done():
            self.raw.ended_at = time.perf_counter()
            self.raw.error = reason
            self.raw.body = bytes(self._plain)
            self.done.set_result(None)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done.done():
            return
        if self._in_body and not self._chunked and self._remaining is None:
            self._finish()  # read-until-close body
            return
        what = "during headers" if not self._in_body else "mid-body"
        detail = f": {exc}" if exc else ""
        self._fail(f"server closed the connection {what}{detail}")


#: SSE lines that are legal without data: a comment (empty field name) and the other fields
_OTHER_FIELDS = frozenset({b"", b"event", b"id", b"retry"})


class _HttpError(Exception):
    pass


def split_base_url(base_url: str) -> tuple[str, int, str]:
    """``http://host:port/prefix`` -> (host, port, prefix without trailing slash)."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"expected http://host[:port][/prefix], got {base_url!r}")
    return parts.hostname, parts.port or 80, parts.path.rstrip("/")


class Connection:
    """One TCP connection carrying one request. Open it early, ``send`` when the iteration
    starts, then ``await wait()``."""

    def __init__(self, base_url: str, sse: bool) -> None:
        self.host, self.port, self.prefix = split_base_url(base_url)
        self.raw = RawResponse()
        self._sse = sse
        self._proto: _Protocol | None = None

    async def open(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        _, proto = await asyncio.wait_for(
            loop.create_connection(lambda: _Protocol(self.raw, self._sse), self.host, self.port),
            timeout_s,
        )
        self._proto = proto

    def send(self, method: str, path: str, body: bytes | None = None) -> None:
        assert self._proto is not None and self._proto.transport is not None
        head = (
            f"{method} {self.prefix}{path} HTTP/1.1\r\n"
            f"Host: {self.host}:{self.port}\r\n"
            "Accept: text/event-stream, application/json, */*\r\n"
            "Connection: close\r\n"
        )
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        msg = (head + "\r\n").encode("latin-1") + (body or b"")
        self.raw.sent_at = time.perf_counter()
        self._proto.transport.write(msg)

    async def wait(self, timeout_s: float, stall_s: float | None = None) -> RawResponse:
        """The response once complete, failed, ``timeout_s`` after the send, or (``stall_s``)
        once no byte came for that long after the first SSE event: a server that stops
        mid-stream is named as stalled, not waited for until the whole request's timeout."""
        assert self._proto is not None
        proto, raw = self._proto, self.raw
        deadline = raw.sent_at + timeout_s if raw.sent_at else time.perf_counter() + timeout_s
        while not proto.done.done():
            now = time.perf_counter()
            if now >= deadline:
                proto._fail(f"no complete response within {timeout_s:g} s")
                break
            until = deadline
            if stall_s is not None:
                if raw.events and raw.last_data_at is not None:
                    stalled_at = raw.last_data_at + stall_s
                    if now >= stalled_at:
                        proto._fail(
                            f"stream stalled: no bytes for {stall_s:g} s (--stall-timeout) "
                            f"after {len(raw.events)} event(s)"
                        )
                        break
                    until = min(until, stalled_at)
                else:  # look again once the stream may have begun
                    until = min(until, now + stall_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proto.done), until - now)
        return raw

    def close(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()


async def request(
    base_url: str, method: str, path: str, body: Any = None, timeout_s: float = 10.0
) -> RawResponse:
    """One non-streamed request; a connection failure comes back as ``RawResponse.error``."""
    conn = Connection(base_url, sse=False)
    try:
        await conn.open(timeout_s)
    except (OSError, TimeoutError) as err:
        conn.raw.error = f"cannot connect to {base_url}: {err or type(err).__name__}"
        return conn.raw
    data = json.dumps(body).encode() if body is not None else None
    conn.send(method, path, data)
    raw = await conn.wait(timeout_s)
    conn.close()
    return raw


def chat_body(model: str, prompt: str, max_tokens: int, temperature: float = 0.0) -> dict[str, Any]:
    """The request body of the measurement contract (both engines accept ``ignore_eos``)."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
        "temperature": temperature,
        "ignore_eos": True,
    }


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def interpret_chat_stream(
    raw: RawResponse,
    request_id: str,
    stream_index: int,
    max_tokens: int,
    model: str | None = None,
) -> RequestRecord:
    """Decode the events of one streamed chat completion into a RequestRecord (times in seconds
    relative to ``sent_at``). Anything off — HTTP error, malformed event, missing usage, early
    stop, disconnect, a stream that is not what it claims (another ``model`` than the one
    asked for, a second choice, events after ``[DONE]`` or tokens after ``finish_reason``, two
    usage chunks that disagree, fields of the wrong JSON type, lines without ``data:``, more
    token chunks than tokens) — leaves ``error`` or ``reasons`` set, so the record is invalid."""
    rec = RequestRecord(request_id=request_id, stream_index=stream_index, sent_at=raw.sent_at)
    rec.http_status = raw.status
    if not _response_is_a_stream(raw, rec):
        return rec
    stream = _read_stream(raw, rec, model)
    if rec.error is not None or not _stream_ended_cleanly(raw, rec, stream.done_seen):
        return rec
    _account_tokens(rec, stream, raw.sent_at, max_tokens)
    return rec


def _response_is_a_stream(raw: RawResponse, rec: RequestRecord) -> bool:
    """Whether ``raw`` is an answered HTTP 200 SSE stream; if not, ``rec.error`` says why.
    Sets the end-to-end time of a response that ended."""
    sent = raw.sent_at
    if raw.ended_at is not None and raw.ended_at < sent:
        # the connection was lost between its opening and the send (a server that died in
        # between, its port's proxy still accepting): nothing came back for this request
        rec.error = f"the connection closed before the request was sent ({raw.error or 'EOF'})"
        return False
    if raw.ended_at is not None:
        rec.ended_at = raw.ended_at - sent
        rec.e2e_ms = (raw.ended_at - sent) * 1e3
    if raw.status is not None and raw.status != 200:
        body = raw.body.decode("utf-8", "replace")
        rec.error = f"HTTP {raw.status}: {_one_line(body) or '(empty body)'}"
        return False
    if raw.status is None:
        rec.error = raw.error or "no response"
        return False
    if not raw.events and raw.body:
        rec.error = "response is not an SSE stream: " + _one_line(
            raw.body.decode("utf-8", "replace")
        )
        return False
    return True


@dataclass
class _Stream:
    """What the events of one stream said: its usage, the arrival of its first and last text
    chunk (perf_counter seconds), whether ``[DONE]`` came, and how many chunks carried text."""

    usage: dict[str, Any] | None = None
    first: float | None = None
    last: float | None = None
    done_seen: bool = False
    token_chunks: int = 0


def _read_stream(raw: RawResponse, rec: RequestRecord, model: str | None) -> _Stream:
    """Walk the events in order until the first one that is wrong (``rec.error``); every event
    read gives ``rec`` its arrival time and text characters, and the text its output hash."""
    stream = _Stream()
    sent = raw.sent_at
    text_parts: list[str] = []
    times: list[float] = []
    chars: list[int] = []
    for k, (t, data) in enumerate(raw.events):
        if stream.done_seen:
            rec.error = f"stream went on after data: [DONE] (event #{k})"
            break
        if data == b"[DONE]":
            stream.done_seen = True
            continue
        obj, problem = _decode_event(data, k)
        n = 0
        if obj is not None:
            n, problem = _read_event(obj, k, model, rec, text_parts)
            if problem is None and obj.get("usage") is not None:
                stream.usage, problem = _read_usage(obj["usage"], stream.usage, k)
        if problem is not None:
            rec.error = problem
            break
        times.append(t - sent)
        chars.append(n)
        if n:
            stream.token_chunks += 1
            if stream.first is None:
                stream.first = t
            stream.last = t
    rec.chunk_times = times
    rec.chunk_chars = chars
    text = "".join(text_parts)
    rec.output_sha256 = hashlib.sha256(text.encode()).hexdigest()
    rec.output_text = text
    return stream


def _decode_event(data: bytes, k: int) -> tuple[dict[str, Any] | None, str | None]:
    """Event ``k`` as a JSON object, or why it is not one (a server's error event included)."""
    try:
        obj = _json_decode(data.decode())
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
        return None, f"malformed SSE event #{k}: {_one_line(data.decode('utf-8', 'replace'), 80)}"
    if not isinstance(obj, dict):
        return None, f"malformed SSE event #{k}: not a JSON object"
    if "error" in obj and not obj.get("choices"):
        err = obj["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        return None, f"server error event: {_one_line(str(msg))}"
    return obj, None


def _read_usage(
    usage: object, seen: dict[str, Any] | None, k: int
) -> tuple[dict[str, Any] | None, str | None]:
    """The stream's usage after event ``k`` carried ``usage``, or what is wrong with it: not an
    object, or another usage than an earlier chunk's."""
    if not isinstance(usage, dict):
        return seen, f"SSE event #{k}: usage is {_json_type(usage)}, not an object"
    if seen is not None and usage != seen:
        return seen, (
            f"two usage chunks disagree: {_one_line(json.dumps(seen), 80)} then "
            f"{_one_line(json.dumps(usage), 80)} (event #{k})"
        )
    return usage, None


def _stream_ended_cleanly(raw: RawResponse, rec: RequestRecord, done_seen: bool) -> bool:
    """Whether the stream ended as one should: unbroken, with ``[DONE]``, every line a
    ``data:`` line; if not, ``rec.error`` says why."""
    if raw.error is not None:
        rec.error = f"stream broken: {raw.error}"
        return False
    if not done_seen:
        rec.error = "stream ended without data: [DONE] (disconnect)"
        return False
    if raw.stray_count:
        rec.error = (
            f"{raw.stray_count} SSE line(s) without a data: field (first: "
            f"{_one_line(raw.stray[0].decode('utf-8', 'replace'), 80)!r})"
        )
        return False
    return True


def _account_tokens(rec: RequestRecord, stream: _Stream, sent: float, max_tokens: int) -> None:
    """TTFT, token counts (from usage only) and the decode rate of a well-formed stream, with
    a reason for each thing that makes the request unusable (early stop, chunks without
    tokens, usage that contradicts itself or the chunks)."""
    first, last, usage = stream.first, stream.last, stream.usage
    if first is not None and last is not None:
        rec.first_token_at = first - sent
        rec.last_token_at = last - sent
        rec.ttft_ms = (first - sent) * 1e3
    else:
        rec.reasons.append("no chunk carried content or reasoning content")
    if usage is None:
        rec.reasons.append("missing usage (stream_options.include_usage ignored by the server)")
        return
    rec.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
    rec.completion_tokens = _int_or_none(usage.get("completion_tokens"))
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict):
        rec.reasoning_tokens = _int_or_none(details.get("reasoning_tokens"))
    ct = rec.completion_tokens
    if ct is None:
        rec.reasons.append("usage without completion_tokens")
        return
    if ct != max_tokens:
        rec.reasons.append(
            f"early stop: completion_tokens={ct} != max_tokens={max_tokens} "
            f"(finish_reason={rec.finish_reason})"
        )
    if stream.token_chunks > ct:
        rec.reasons.append(
            f"{stream.token_chunks} chunks carried text but usage counts {ct} completion tokens "
            "(each chunk carries at least one token: chunks repeated?)"
        )
    if rec.reasoning_tokens is not None and rec.reasoning_tokens > ct:
        rec.reasons.append(
            f"usage inconsistent: reasoning_tokens={rec.reasoning_tokens} > completion_tokens={ct}"
        )
    if first is not None and last is not None and ct >= 2:
        if last > first:
            rec.decode_tok_s = (ct - 1) / (last - first)
        else:
            rec.reasons.append(MERGED)


_TEXT_KEYS = ("content", "reasoning_content", "reasoning")


def _json_type(v: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if v is None:
        return "null"
    return names.get(type(v), "a number")


def _read_event(
    obj: dict[str, Any],
    k: int,
    model: str | None,
    rec: RequestRecord,
    text_parts: list[str],
) -> tuple[int, str | None]:
    """The text characters event ``k`` carried (appended to ``text_parts``) and what is wrong
    with it, if anything: another model, choices/delta/text of the wrong JSON type, a second
    choice (the request asked for one), text after a finish_reason."""
    named = obj.get("model")
    if model is not None and named is not None and named != model:
        return 0, f"SSE event #{k} names model {_one_line(str(named), 80)!r}, asked for {model!r}"
    choices = obj.get("choices")
    if choices is None:
        return 0, None
    if not isinstance(choices, list):
        return 0, f"SSE event #{k}: choices is {_json_type(choices)}, not an array"
    n = 0
    for choice in choices:
        if not isinstance(choice, dict):
            return 0, f"SSE event #{k}: a choice is {_json_type(choice)}, not an object"
        index = choice.get("index", 0)
        if index != 0 or len(choices) > 1:
            return 0, (
                f"SSE event #{k} carries {len(choices)} choice(s), index {index}: one was asked for"
            )
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            return 0, f"SSE event #{k}: delta is {_json_type(delta)}, not an object"
        for key in _TEXT_KEYS:
            piece = delta.get(key)
            if piece is None:
                continue
            if not isinstance(piece, str):
                return 0, f"SSE event #{k}: delta.{key} is {_json_type(piece)}, not a string"
            if piece:
                if rec.finish_reason is not None:
                    return 0, (
                        f"SSE event #{k} carries text after finish_reason={rec.finish_reason!r}"
                    )
                n += len(piece)
                text_parts.append(piece)
        finish = choice.get("finish_reason")
        if finish is not None:
            if not isinstance(finish, str):
                return 0, f"SSE event #{k}: finish_reason is {_json_type(finish)}, not a string"
            if finish:
                rec.finish_reason = finish
    return n, None


def _int_or_none(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
