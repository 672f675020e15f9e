"""Benchmark (figures, not pass/fail) of bench.client: timing error and ingest capacity.

    .venv/bin/python tests/bench_client.py [--quick]

A raw-asyncio SSE server runs in its own process (pinned to another core when there is one)
and stamps ``time.perf_counter()`` right after each socket write; on Linux that is
CLOCK_MONOTONIC, shared by both processes, so the client's arrival stamps and the server's
write stamps are directly comparable. Three parts:

1. Timing error at concurrency 1 and 16, paced like an engine (prefill, then one write per
   step, one token per chunk: the worst case for per-chunk cost). TTFT error = client's first
   token time - server's first-token write time; decode error = client decode tok/s relative to
   the rate computed from the server's write times, both with usage's completion_tokens.
   Printed as p50/p99 of the absolute error, against the targets the integration tests once
   asserted (TTFT within 5 ms of the server's write, decode rate within 5%; a loaded machine
   broke them, so they are this benchmark's, recorded in docs/benchmarks.md with the load).
2. The same at a high aggregate rate (16 streams, short steps) to show where distortion starts.
3. Ingest capacity: 16 streams written as fast as the server can; client tokens per second of
   wall time and per CPU-second (the one-core capacity), for this client and, for comparison,
   httpx and aiohttp reading the same stream line by line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.core import percentile
from bench.measure import Connection, chat_body, interpret_chat_stream, request

HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _frame(obj: Any) -> bytes:
    data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _chunk(rid: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "bench-model",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


class _Server(asyncio.Protocol):
    truth: dict[str, list[tuple[float, int]]] = {}  # noqa: RUF012
    counter = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport
        self.buf = b""
        self.paused: asyncio.Future[None] | None = None

    def pause_writing(self) -> None:
        self.paused = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.paused is not None and not self.paused.done():
            self.paused.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buf[:end].decode()
        length = 0
        for line in head.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.lower() == "content-length":
                length = int(v)
        if len(self.buf) < end + 4 + length:
            return
        body = self.buf[end + 4 : end + 4 + length]
        if head.startswith("GET /truth"):
            payload = json.dumps(_Server.truth).encode()
            _Server.truth = {}
            self.t.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(payload), payload)
            )
            self.t.close()
            return
        asyncio.get_running_loop().create_task(self.stream(json.loads(body)))

    async def stream(self, body: dict[str, Any]) -> None:
        cfg = body["bench"]
        m = int(body["max_tokens"])
        _Server.counter += 1
        rid = f"chatcmpl-{_Server.counter}"
        frames = [_frame(_chunk(rid, {"content": f" tok{i}"})) for i in range(m)]
        tail = _frame(
            {
                "id": rid,
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": m, "total_tokens": m + 10},
            }
        )
        tail += _frame(b"[DONE]") + b"0\r\n\r\n"
        loop = asyncio.get_running_loop()
        writes: list[tuple[float, int]] = []
        self.t.write(HEAD + _frame(_chunk(rid, {"role": "assistant", "content": ""})))
        await asyncio.sleep(cfg["prefill_s"])
        step, per = cfg["step_s"], cfg["per_write"]
        nxt = loop.time()
        i = 0
        while i < m:
            n = min(per, m - i)
            self.t.write(b"".join(frames[i : i + n]))
            writes.append((time.perf_counter(), n))
            i += n
            if self.paused is not None and not self.paused.done():
                await self.paused
            if step:
                nxt += step
                await asyncio.sleep(max(0.0, nxt - loop.time()))
            elif i % 256 == 0:
                await asyncio.sleep(0)
        self.t.write(tail)
        _Server.truth[rid] = writes
        self.t.close()


def _serve(port_q: Any, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})

    async def main() -> None:
        loop = asyncio.get_running_loop()
        srv = await loop.create_server(_Server, "127.0.0.1", 0)
        port_q.put(srv.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(main())


async def _streams(url: str, c: int, m: int, cfg: dict[str, Any]) -> list[Any]:
    conns = [Connection(url, sse=True) for _ in range(c)]
    await asyncio.gather(*(x.open(5) for x in conns))
    body = chat_body("bench-model", "hi", m)
    body["bench"] = cfg
    data = json.dumps(body).encode()
    for x in conns:
        x.send("POST", "/v1/chat/completions", data)
    return list(await asyncio.gather(*(x.wait(120) for x in conns)))


def _interpret(raws: list[Any], m: int) -> list[Any]:
    # The server's completion id (first event) keys its truth record.
    return [
        interpret_chat_stream(r, json.loads(r.events[0][1])["id"], k, m) for k, r in enumerate(raws)
    ]


async def _iteration(url: str, c: int, m: int, cfg: dict[str, Any]) -> list[Any]:
    return _interpret(await _streams(url, c, m, cfg), m)


async def timing_error(url: str, c: int, m: int, iters: int, cfg: dict[str, Any]) -> dict[str, Any]:
    ttft_err: list[float] = []
    dec_err: list[float] = []
    for _ in range(iters):
        recs = await _iteration(url, c, m, cfg)
        truth_raw = await request(url, "GET", "/truth")
        truth = json.loads(truth_raw.body)
        for r in recs:
            assert r.valid, (r.error, r.reasons)
            w = truth[r.request_id]
            first_w, last_w = w[0][0], w[-1][0]
            assert r.first_token_at is not None and r.decode_tok_s is not None
            ttft_err.append((r.sent_at + r.first_token_at - first_w) * 1e3)
            true_rate = (m - 1) / (last_w - first_w)
            dec_err.append((r.decode_tok_s / true_rate - 1) * 100)
    return {
        "n": len(ttft_err),
        "ttft_err_ms_p50": percentile([abs(x) for x in ttft_err], 50),
        "ttft_err_ms_p99": percentile([abs(x) for x in ttft_err], 99),
        "ttft_err_ms_max": max(abs(x) for x in ttft_err),
        "decode_err_pct_p50": percentile([abs(x) for x in dec_err], 50),
        "decode_err_pct_p99": percentile([abs(x) for x in dec_err], 99),
    }


async def ingest_ours(url: str, c: int, m: int) -> tuple[float, float, float]:
    """(wall tok/s, tok per CPU-second while streaming, tok per CPU-second incl. decoding)."""
    cfg = {"prefill_s": 0.0, "step_s": 0.0, "per_write": 16}
    w0, p0 = time.perf_counter(), time.process_time()
    raws = await _streams(url, c, m, cfg)
    w1, p1 = time.perf_counter(), time.process_time()
    recs = _interpret(raws, m)
    p2 = time.process_time()
    await request(url, "GET", "/truth")
    tokens = sum(r.completion_tokens or 0 for r in recs)
    assert all(r.valid for r in recs), [r.error or r.reasons for r in recs]
    return tokens / (w1 - w0), tokens / (p1 - p0), tokens / (p2 - p0)


async def ingest_httpx(url: str, c: int, m: int) -> tuple[float, float, float]:
    import httpx

    cfg = {"prefill_s": 0.0, "step_s": 0.0, "per_write": 16}
    body = chat_body("bench-model", "hi", m)
    body["bench"] = cfg

    async def one(client: httpx.AsyncClient) -> int:
        times: list[float] = []
        usage = 0
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data:"):
                    times.append(time.perf_counter())
                    d = line[5:].strip()
                    if d != "[DONE]":
                        obj = json.loads(d)
                        if obj.get("usage"):
                            usage = obj["usage"]["completion_tokens"]
        return usage

    limits = httpx.Limits(max_connections=c)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        w0, p0 = time.perf_counter(), time.process_time()
        tokens = sum(await asyncio.gather(*(one(client) for _ in range(c))))
        w1, p1 = time.perf_counter(), time.process_time()
    await request(url, "GET", "/truth")
    rate = tokens / (p1 - p0)
    return tokens / (w1 - w0), rate, rate


async def ingest_aiohttp(url: str, c: int, m: int) -> tuple[float, float, float]:
    import aiohttp

    cfg = {"prefill_s": 0.0, "step_s": 0.0, "per_write": 16}
    body = chat_body("bench-model", "hi", m)
    body["bench"] = cfg

    async def one(session: aiohttp.ClientSession) -> int:
        usage = 0
        times: list[float] = []
        async with session.post(url + "/v1/chat/completions", json=body) as resp:
            async for raw in resp.content:
                if raw.startswith(b"data:"):
                    times.append(time.perf_counter())
                    d = raw[5:].strip()
                    if d != b"[DONE]":
                        obj = json.loads(d)
                        if obj.get("usage"):
                            usage = obj["usage"]["completion_tokens"]
        return usage

    conn = aiohttp.TCPConnector(limit=c)
    async with aiohttp.ClientSession(connector=conn) as session:
        w0, p0 = time.perf_counter(), time.process_time()
        tokens = sum(await asyncio.gather(*(one(session) for _ in range(c))))
        w1, p1 = time.perf_counter(), time.process_time()
    await request(url, "GET", "/truth")
    rate = tokens / (p1 - p0)
    return tokens / (w1 - w0), rate, rate


TARGET_TTFT_ERR_MS, TARGET_DECODE_ERR_PCT = 5.0, 5.0


def _verdict(r: dict[str, Any]) -> str:
    ttft_ok = r["ttft_err_ms_p99"] < TARGET_TTFT_ERR_MS
    ok = ttft_ok and r["decode_err_pct_p99"] < TARGET_DECODE_ERR_PCT
    return (
        f"   target p99 |TTFT error| < {TARGET_TTFT_ERR_MS:g} ms and |decode error| < "
        f"{TARGET_DECODE_ERR_PCT:g}%: {'met' if ok else 'MISSED'}"
    )


async def run(url: str, quick: bool) -> None:
    m = 256 if quick else 512
    it1, it16 = (10, 2) if quick else (30, 5)
    realistic = {"prefill_s": 0.05, "step_s": 0.01, "per_write": 1}
    print(
        f"# realistic pacing: prefill 50 ms, 10 ms/token (100 tok/s/stream), 1 token/chunk, M={m}"
    )
    for c, iters in ((1, it1), (16, it16)):
        r = await timing_error(url, c, m, iters, realistic)
        print(f"c={c:<2} {json.dumps({k: round(v, 4) for k, v in r.items()})}")
        print(_verdict(r))
    fast = {"prefill_s": 0.01, "step_s": 0.0005, "per_write": 1}
    print("# high rate: 16 streams x 2000 tok/s (32k tok/s aggregate), 1 token/chunk")
    r = await timing_error(url, 16, m * 2, 1 if quick else 3, fast)
    print(f"c=16 {json.dumps({k: round(v, 4) for k, v in r.items()})}")
    print(_verdict(r))
    print("# ingest capacity: 16 streams written as fast as possible (16 events per write)")
    mm = 2048 if quick else 8192
    for name, fn in (
        ("bench.client", ingest_ours),
        ("httpx", ingest_httpx),
        ("aiohttp", ingest_aiohttp),
    ):
        best = max([await fn(url, 16, mm) for _ in range(2 if quick else 3)], key=lambda x: x[1])
        print(
            f"{name:<13} wall {best[0]:>8.0f} tok/s | per client CPU-second: while streaming "
            f"{best[1]:>8.0f} tok/s, incl. JSON decoding {best[2]:>8.0f} tok/s"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu = cpus[-1] if len(cpus) > 1 else None
    if server_cpu is not None:
        os.sched_setaffinity(0, {cpus[0]})
    q: Any = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(target=_serve, args=(q, server_cpu), daemon=True)
    proc.start()
    port = q.get(timeout=30)
    print(f"# client on CPU {cpus[0]}, server on CPU {server_cpu}, python {sys.version.split()[0]}")
    print(f"# {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} (1 min) before")
    try:
        asyncio.run(run(f"http://127.0.0.1:{port}", args.quick))
    finally:
        proc.terminate()
        proc.join(5)
    print(f"# load average {os.getloadavg()[0]:.2f} (1 min) after")


if __name__ == "__main__":
    main()
