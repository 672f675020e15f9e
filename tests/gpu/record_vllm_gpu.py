"""Record the vLLM GPU fixtures on the device machine (not a test; scripts/gpu_tiny.sh runs it
after the matrix, with vLLM 0.26.0 unpacked there and the tiny models at /models):

    python3 tests/gpu/record_vllm_gpu.py --out DIR

Starts one speculative server (the partial draft, k=3, --cudagraph-metrics, as in
bench/experiments/tiny-vllm-gpu.yaml) and writes into DIR:
  stream.sse          one streamed chat completion, the SSE lines as received
  stream-chunks.json  the same stream parsed, with arrival times (s)
  stream-logprobs.sse the same request with logprobs and top_logprobs=2 (with speculation)
  metrics.txt         /metrics after the requests
  startup.log         the server's log up to "Application startup complete"
  server.log          the whole log (cudagraph metrics and SpecDecoding lines included)
  version.json        GET /version
  recording.json      argv, timings, counts
tests/contract/test_vllm_gpu_recordings.py holds specbench's patterns against them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

SPEC = '{"method":"draft_model","model":"/models/draft","num_speculative_tokens":3}'
PROMPT = "Tell me about the draft model and the server, in many words."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stream(base: str, body: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    raw: list[str] = []
    chunks: list[dict[str, Any]] = []
    t0 = time.monotonic()
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=120) as reply:
        reply.raise_for_status()
        for line in reply.iter_lines():
            raw.append(line)
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append({"t": round(time.monotonic() - t0, 6), "chunk": json.loads(line[6:])})
    return raw, chunks


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = ["vllm", "serve", "/models/target", "--max-model-len", "1024", "--max-num-seqs", "4"]
    argv += ["--gpu-memory-utilization", "0.10", "--cudagraph-metrics"]
    argv += ["--speculative-config", SPEC, "--served-model-name", "tiny"]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    log = out / "server.log"
    rec: dict[str, Any] = {"argv": argv}
    t0 = time.monotonic()
    with log.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"server exited {proc.returncode}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - t0 > 400:
                raise SystemExit("not healthy after 400 s")
            time.sleep(0.5)
        rec["healthy_after_s"] = round(time.monotonic() - t0, 1)
        body: dict[str, Any] = {
            "model": "tiny",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": args.max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        raw, chunks = stream(base, body)
        (out / "stream.sse").write_text("\n".join(raw) + "\n")
        (out / "stream-chunks.json").write_text(json.dumps(chunks, indent=1) + "\n")
        rec["stream_chunks"] = len(chunks)
        rec["usage"] = chunks[-1]["chunk"].get("usage") if chunks else None
        raw_lp, chunks_lp = stream(base, {**body, "logprobs": True, "top_logprobs": 2})
        (out / "stream-logprobs.sse").write_text("\n".join(raw_lp) + "\n")
        rec["logprobs_chunks"] = len(chunks_lp)
        # several requests at once, so the cudagraph table has batch sizes above 1
        with httpx.Client(timeout=120) as client, ThreadPoolExecutor(4) as pool:
            url = base + "/v1/chat/completions"
            # stream_options only with stream: vLLM answers 400 to it on a plain request
            plain = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
            list(pool.map(lambda _: client.post(url, json=plain), range(8)))
        time.sleep(11)  # one stats interval (VLLM_LOG_STATS_INTERVAL, 10 s): the logged tables
        (out / "metrics.txt").write_text(httpx.get(base + "/metrics", timeout=10).text)
        (out / "version.json").write_text(httpx.get(base + "/version", timeout=10).text + "\n")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text(encoding="utf-8", errors="replace")
    cut = text.find("Application startup complete")
    (out / "startup.log").write_text(text if cut < 0 else text[: text.index("\n", cut) + 1])
    (out / "recording.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
