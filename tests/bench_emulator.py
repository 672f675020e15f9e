"""Benchmark: the emulator's own timing fidelity (a figure, not a pass/fail test).

Starts ``python -m bench.emulator vllm`` as a separate process, drives 16 concurrent streamed
requests at a time scale that gives >= 2000 tok/s aggregate, then reads every request's truth
and prints the gap between each chunk's scheduled and actual write time (p50/p99/max).

    .venv/bin/python tests/bench_emulator.py [--concurrency 16] [--time-scale 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any

import aiohttp

from bench.emulator.tokens import words_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_health(base: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("emulator did not become ready")


async def one(session: aiohttp.ClientSession, base: str, model: str, prompt: int, out: int) -> str:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "word " * words_for(prompt)}],
        "max_tokens": out,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    rid = ""
    async with session.post(f"{base}/v1/chat/completions", json=body) as resp:
        async for line in resp.content:
            if line.startswith(b"data: {") and not rid:
                rid = json.loads(line[6:])["id"]
    return rid


async def drive(base: str, model: str, conc: int, rounds: int, prompt: int, out: int) -> list[str]:
    ids: list[str] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(rounds):
            ids += await asyncio.gather(
                *(one(session, base, model, prompt, out) for _ in range(conc))
            )
    return ids


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--time-scale", type=float, default=0.05)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=1044)
    ap.add_argument("--max-tokens", type=int, default=512)
    args = ap.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "bench.emulator", "vllm", "--port", str(port)]
    cmd += ["--profile", "vllm-dflash", "--time-scale", str(args.time_scale)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        wait_health(base, 30)
        t0 = time.monotonic()
        ids = asyncio.run(
            drive(
                base,
                "qwen38-27b-gptq",
                args.concurrency,
                args.rounds,
                args.prompt_tokens,
                args.max_tokens,
            )
        )
        wall = time.monotonic() - t0
        gaps: list[float] = []
        tokens = 0
        first_t, last_t = float("inf"), 0.0
        for rid in ids:
            with urllib.request.urlopen(f"{base}/emulator/truth/{rid}") as r:
                truth: dict[str, Any] = json.loads(r.read())
            for c in truth["chunks"]:
                if c["tokens"]:
                    gaps.append((c["t"] - c["scheduled"]) * 1000.0)
                    tokens += c["tokens"]
                    first_t, last_t = min(first_t, c["t"]), max(last_t, c["t"])
    finally:
        proc.terminate()
        proc.wait(10)
    agg = tokens / (last_t - first_t)
    print("SIMULATED emulator timing fidelity (scheduled vs actual write time)")
    print(f"  concurrency={args.concurrency} time_scale={args.time_scale} requests={len(ids)}")
    print(f"  tokens={tokens} aggregate={agg:.0f} tok/s (first..last token) wall={wall:.2f}s")
    print(f"  token-bearing chunks={len(gaps)}")
    print(
        f"  gap ms: p50={statistics.median(gaps):.3f} p99={pct(gaps, 0.99):.3f} "
        f"max={max(gaps):.3f} mean={statistics.fmean(gaps):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
