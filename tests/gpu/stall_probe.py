"""Where does an SGLang server stall? (not a test; scripts/gpu_sglang.sh step `stall` runs it on
the device machine, SGLang 0.5.17 unpacked there, the tiny models at /models):

    python3 tests/gpu/stall_probe.py --out DIR --model /models/mtp35-gptq [--stall-s 60] -- FLAGS

Starts `python3 -m sglang.launch_server --model-path MODEL FLAGS` with PYTHONFAULTHANDLER=1 and
watches its log. Healthy: one greedy chat request, its reply recorded. A stall (no log line but
our own /health polls for --stall-s seconds, or --deadline-s in all): SIGABRT to every process of
the server's tree, so Python's fault handler prints each thread's stack to the log; that stack is
what the stall hides.
Writes DIR/server.log and DIR/probe.json (outcome, seconds, the last log line before the stall).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx

# the vLLM recorder's helpers (this script runs from tests/gpu/, first on sys.path)
from record_vllm_gpu import PROMPT, free_port


def descendants(pid: int) -> list[int]:
    """Every process under pid, read from /proc (no psutil on the device machine)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--stall-s", type=float, default=60.0)
    ap.add_argument("--deadline-s", type=float, default=240.0)
    ap.add_argument("flags", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    flags = [f for f in args.flags if f != "--"]
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", args.model,
            "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
            *flags]  # fmt: skip
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    log_path = args.out / "server.log"
    last = {"t": time.monotonic(), "line": ""}
    t0 = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
        assert proc.stdout is not None
        out = proc.stdout

        def pump() -> None:
            for raw in out:
                line = raw.decode(errors="replace")
                log.write(line)
                log.flush()
                if "GET /health" not in line:  # our own polling is not progress
                    last["t"], last["line"] = time.monotonic(), line.rstrip()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        record: dict[str, object] = {"argv": argv}
        while True:
            now = time.monotonic()
            if proc.poll() is not None:
                record.update(outcome="exited", exit_code=proc.returncode)
                break
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    reply = httpx.post(base + "/v1/chat/completions", timeout=60, json={
                        "model": "tiny", "max_tokens": 32, "temperature": 0,
                        "messages": [{"role": "user", "content": PROMPT}]})  # fmt: skip
                    record.update(outcome="served", status=reply.status_code,
                                  body=reply.text[:2000])  # fmt: skip
                    break
            except httpx.HTTPError:
                pass
            if now - last["t"] > args.stall_s or now - t0 > args.deadline_s:
                record.update(outcome="stalled", stalled_after_line=last["line"])
                for pid in descendants(proc.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGABRT)  # the fault handler prints every stack
                time.sleep(5)
                break
            time.sleep(1)
        record["seconds"] = round(time.monotonic() - t0, 1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join(timeout=5)
    (args.out / "probe.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "body"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
