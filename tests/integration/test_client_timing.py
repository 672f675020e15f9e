"""bench.measure (client) over a real socket: the exact request it writes, and the clock it
starts when it writes it. A raw asyncio server on 127.0.0.1 answers with chunks spaced by known
sleeps, so TTFT and the decode window have lower bounds we typed, not measured (and no upper
bound: that is the machine's load; tests/bench_client.py measures the client's error)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from bench.measure import interpret_chat_stream
from bench.measure._client import Connection, request

GAP_S = 0.05  # the server sleeps this long before the first token and between tokens
SETUP_S = 0.4  # the client waits this long between connecting and sending


def _chunk(obj: object) -> bytes:
    data = b"data: " + json.dumps(obj).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _serve(seen: list[bytes]) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        if length:
            rest = await reader.readexactly(length)
        else:  # nothing may follow a request without a body
            try:
                rest = await asyncio.wait_for(reader.read(100), 0.2)
            except TimeoutError:
                rest = b""
        seen.append(head + rest)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        for piece in ("a", "b", "c"):
            await asyncio.sleep(GAP_S)
            writer.write(_chunk({"choices": [{"delta": {"content": piece}}]}))
            await writer.drain()
        usage = {"prompt_tokens": 5, "completion_tokens": 3}
        writer.write(_chunk({"choices": [], "usage": usage}))
        data = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_the_clock_starts_when_the_request_is_written() -> None:
    seen: list[bytes] = []

    async def go() -> tuple[Connection, int, float]:
        server = await _serve(seen)
        port = server.sockets[0].getsockname()[1]
        conn = Connection(f"http://127.0.0.1:{port}/v1/", sse=True)
        await conn.open(5.0)
        await asyncio.sleep(SETUP_S)  # connection set-up is not part of TTFT
        before_send = time.perf_counter()
        conn.send("POST", "/chat/completions", b'{"x": 1}')
        await conn.wait(5.0)
        conn.close()
        server.close()
        await server.wait_closed()
        return conn, port, before_send

    conn, port, before_send = asyncio.run(go())
    assert seen == [
        b"POST /v1/chat/completions HTTP/1.1\r\n"
        + f"Host: 127.0.0.1:{port}\r\n".encode()
        + b"Accept: text/event-stream, application/json, */*\r\n"
        b"Connection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: 8\r\n"
        b'\r\n{"x": 1}'
    ]
    raw = conn.raw
    assert raw.complete and raw.status == 200 and raw.error is None
    assert raw.first_byte_at is not None and raw.ended_at is not None
    # the clock starts at the write, after the set-up wait (stamped at the connection's
    # opening, sent_at would come before before_send, loaded machine or not)
    assert before_send <= raw.sent_at <= raw.first_byte_at <= raw.events[0][0] <= raw.ended_at
    rec = interpret_chat_stream(raw, "r", 0, 3)
    assert rec.valid, (rec.error, rec.reasons)
    # the server sleeps GAP_S before the first token: a floor no load can lower
    assert rec.ttft_ms is not None and rec.ttft_ms >= GAP_S * 1e3
    # 2 gaps between the first and the last token: (3 - 1) tokens / (>= 0.1 s), a ceiling no
    # load can raise. The server shares the client's event loop and sleeps between writes, so
    # each token is read before the next is written: three reads, never one.
    assert rec.decode_tok_s is not None and rec.decode_tok_s <= 2 / (2 * GAP_S)


def test_a_plain_request_without_a_body_and_a_refused_connection() -> None:
    seen: list[bytes] = []

    async def go() -> tuple[bytes, str | None]:
        server = await _serve(seen)
        port = server.sockets[0].getsockname()[1]
        got = await request(f"http://127.0.0.1:{port}", "GET", "/metrics")
        server.close()
        await server.wait_closed()
        refused = await request(f"http://127.0.0.1:{port}", "GET", "/metrics", timeout_s=1.0)
        return got.body, refused.error

    _, refused = asyncio.run(go())
    assert seen[0] == (
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:"
        + seen[0].split(b"Host: 127.0.0.1:")[1].split(b"\r\n")[0]
        + b"\r\nAccept: text/event-stream, application/json, */*\r\nConnection: close\r\n\r\n"
    )
    assert refused is not None and refused.startswith("cannot connect to http://127.0.0.1:")


@pytest.mark.parametrize("sse", [True, False])
def test_send_before_open_is_a_programming_error(sse: bool) -> None:
    with pytest.raises(AssertionError):
        Connection("http://127.0.0.1:1", sse=sse).send("GET", "/")
