"""Build the emulator image offline and run one emulated engine in a container."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from bench.emulator.tokens import words_for


def test_emulator_image_serves_a_stream(docker_client: Any, emulator_image: str) -> None:
    container = docker_client.containers.run(
        emulator_image,
        ["sglang", "--host", "0.0.0.0", "--port", "8000", "--time-scale", "0.01"],
        ports={"8000/tcp": ("127.0.0.1", None)},
        detach=True,
    )
    try:
        container.reload()
        port = container.attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"]
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        status = 0
        while time.monotonic() < deadline and status != 200:
            try:
                status = httpx.get(f"{base}/health", timeout=2).status_code
            except httpx.TransportError:
                time.sleep(0.1)
        assert status == 200
        payload = {
            "model": "qwen38-27b-gptq",
            "messages": [{"role": "user", "content": "word " * words_for(100)}],
            "max_tokens": 32,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }
        events = []
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=payload, timeout=30) as r:
            assert r.headers["x-specbench-emulator"] == "1"
            events = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
        assert events[-1] == "[DONE]"
        usage = json.loads(events[-2])["usage"]
        assert usage == {**usage, "completion_tokens": 32, "prompt_tokens": 100}
        logs = container.logs().decode()
        assert logs.splitlines()[0].startswith("SIMULATED")
        assert "Load weight end." in logs
    finally:
        container.remove(force=True)
