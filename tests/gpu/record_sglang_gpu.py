"""Record the SGLang GPU fixtures on the device machine (not a test; scripts/gpu_sglang.sh runs
it after the matrices, with SGLang 0.5.17 unpacked there and the tiny models at /models):

    python3 tests/gpu/record_sglang_gpu.py --out DIR

Starts one speculative server (DFLASH on the chain target with its copy draft, k=3, the flags of
bench/experiments/tiny-sglang-gpu-dflash.yaml) and writes into DIR:
  stream.sse            one streamed chat completion, the SSE lines as received
  stream-chunks.json    the same stream parsed, with arrival times (s)
  logprobs-reply.json   the same request with logprobs=true: status code and body (DFLASH
                        refuses logprobs, HTTP 400, in 0.5.17)
  metrics-idle.txt      /metrics before any request (sglang:is_cuda_graph at idle)
  metrics.txt           /metrics after the requests and one decode-log interval
  server_info.json      GET /server_info (version, avg_spec_accept_length)
  version-reply.json    GET /version: status code and body (404 in 0.5.17)
  startup.log           the server's log up to "The server is fired up and ready to roll!"
  server.log            the whole log, shutdown included (SIGTERM to the process group)
  recording.json        argv, timings, counts, the exit code after SIGTERM
tests/contract/test_sglang_gpu_recordings.py holds specbench's patterns against them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

# the vLLM recorder's helpers: the same prompt, port and stream reader for both engines (this
# script runs from tests/gpu/, which Python puts first on sys.path)
from record_vllm_gpu import PROMPT, free_port, stream

READY_LINE = "The server is fired up and ready to roll!"
ARGV = [
    "python3", "-m", "sglang.launch_server", "--model-path", "/models/chain",
    "--served-model-name", "tiny", "--context-length", "1024", "--mem-fraction-static", "0.2",
    "--max-running-requests", "4", "--attention-backend", "triton",
    "--sampling-backend", "pytorch", "--enable-metrics",
    "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/models/dflash",
    "--speculative-num-draft-tokens", "4", "--speculative-draft-attention-backend", "triton",
]  # fmt: skip


def reply_record(reply: httpx.Response) -> str:
    return json.dumps({"status": reply.status_code, "body": reply.text[:4000]}, indent=1) + "\n"


def wait_healthy(proc: subprocess.Popen[bytes], base: str, t0: float) -> None:
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"server exited {proc.returncode}")
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() - t0 > 400:
            raise SystemExit("not healthy after 400 s")
        time.sleep(0.5)


def record(base: str, out: Path, rec: dict[str, Any], max_tokens: int) -> None:
    (out / "metrics-idle.txt").write_text(httpx.get(base + "/metrics", timeout=10).text)
    body: dict[str, Any] = {
        "model": "tiny",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
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
    url = base + "/v1/chat/completions"
    plain = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
    with httpx.Client(timeout=120) as client:
        lp = client.post(url, json=plain | {"logprobs": True, "top_logprobs": 2})
        (out / "logprobs-reply.json").write_text(reply_record(lp))
        rec["logprobs_status"] = lp.status_code
        # several requests at once, so batch sizes above 1 reach the graphs and the log
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda _: client.post(url, json=plain | {"max_tokens": 256}), range(8)))
        time.sleep(2)
        (out / "metrics.txt").write_text(client.get(base + "/metrics").text)
        (out / "server_info.json").write_text(client.get(base + "/server_info").text + "\n")
        (out / "version-reply.json").write_text(reply_record(client.get(base + "/version")))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [*ARGV, "--host", "127.0.0.1", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    log = out / "server.log"
    rec: dict[str, Any] = {"argv": argv}
    t0 = time.monotonic()
    with log.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(proc, base, t0)
        rec["healthy_after_s"] = round(time.monotonic() - t0, 1)
        record(base, out, rec, args.max_tokens)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            rec["exit_code_after_sigterm"] = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rec["exit_code_after_sigterm"] = f"killed after 30 s ({proc.wait()})"
    text = log.read_text(encoding="utf-8", errors="replace")
    cut = text.find(READY_LINE)
    (out / "startup.log").write_text(text if cut < 0 else text[: text.index("\n", cut) + 1])
    (out / "recording.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
