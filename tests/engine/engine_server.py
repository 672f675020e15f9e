"""vLLM's CPU build in a container, driven the way the engine tier and the fixture recorder
need it: build the image, start one server per configuration, wait for /health, stream a chat
completion, read /metrics and /version.

The container is started with the GPU image's argv: ``--entrypoint vllm IMAGE serve MODEL
--flags --host 0.0.0.0 --port 8000 --served-model-name NAME`` (bench/engines/vllm.py), CPU
only, the port published on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "docker" / "vllm-cpu" / "build.sh"
IMAGE = os.environ.get("VLLM_CPU_IMAGE_TAG", "specbench/vllm-cpu:0.32.0")
# Containers get this prefix (plus the pid), so leftovers can be found and removed.
NAME_PREFIX = os.environ.get("SPECBENCH_ENGINE_PREFIX", "specbench-engine")
SERVED = "tiny"
PORT = 8000
START_TIMEOUT_S = float(os.environ.get("SPECBENCH_ENGINE_START_TIMEOUT", "900"))
K = 3  # speculative tokens of every speculative configuration here


def speculative(method: str, model: str | None = None, *, k: int = K, **extra: Any) -> list[str]:
    spec: dict[str, Any] = {"method": method, **({"model": model} if model else {})}
    spec |= {"num_speculative_tokens": k, **extra}
    return ["--speculative-config", json.dumps(spec, separators=(",", ":"))]


# The seed's two vLLM methods with its own --speculative-config shapes (seed report:
# DFlash with 4 speculative tokens, MTP '{"method":"qwen3_next_mtp","num_speculative_tokens":2}'),
# on the chain models of bench/tinymodel/_chain.py, whose answers are known in advance.
SEED_K = {"dflash": 4, "mtp": 2}

# name -> server flags (the model directory is mounted at /models: target/, draft/, chain/,
# dflash/, mtp/ as `specbench tiny-model` writes them).
CONFIGS: dict[str, list[str]] = {
    "baseline": [],
    "self_draft": speculative("draft_model", "/models/target"),
    "partial_draft": speculative("draft_model", "/models/draft"),
    "ngram": speculative("ngram", prompt_lookup_min=2, prompt_lookup_max=4),
    "dflash": speculative("dflash", "/models/dflash", k=SEED_K["dflash"]),
    # vLLM 0.32.0's CPU build serves a hybrid (GDN) target only without prefix caching: with it
    # (the default for hybrid models, mamba_cache_mode "align") the first request dies in the
    # Triton kernel precopy_mamba_align_fused_kernel (v1/worker/mamba_utils.py:1226), and the
    # CPU build has no Triton.
    "mtp": [*speculative("qwen3_next_mtp", k=SEED_K["mtp"]), "--no-enable-prefix-caching"],
    # the seed's drafter class (DFlash2DraftModel), which the CPU build refuses
    "dflash2": speculative("dflash", "/models/dflash2", k=SEED_K["dflash"]),
}
# The target each configuration serves (default: the random tiny target).
TARGETS = {"dflash": "/models/chain", "mtp": "/models/mtp", "dflash2": "/models/chain"}
# ``specbench run --spec-method`` of each configuration (a label; the counters are vLLM's).
RUN_METHODS = {"baseline": "none", "dflash": "dflash", "mtp": "mtp"}


def build_image() -> tuple[str, float]:
    """Run docker/vllm-cpu/build.sh (idempotent); the tag and the seconds it took."""
    start = time.monotonic()
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        env={**os.environ, "VLLM_CPU_IMAGE_TAG": IMAGE},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1], time.monotonic() - start


def server_command(config: str) -> list[str]:
    """The command after ``--entrypoint vllm``: exactly what the GPU image is given."""
    return [
        "serve", TARGETS.get(config, "/models/target"), *CONFIGS[config],
        "--host", "0.0.0.0", "--port", str(PORT), "--served-model-name", SERVED,
    ]  # fmt: skip


@dataclass
class Server:
    config: str
    container: Any
    base_url: str
    started_at: float
    healthy_after_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def logs(self) -> str:
        raw: bytes = self.container.logs(stdout=True, stderr=True)
        return raw.decode(errors="replace")

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.container.remove(force=True)


def start_server(client: Any, config: str, models_dir: Path, *, image: str = IMAGE) -> Server:
    """Start the container for ``config`` and wait until /health answers 200."""
    name = f"{NAME_PREFIX}-{os.getpid()}-{config.replace('_', '-')}"
    for old in client.containers.list(all=True, filters={"name": name}):
        old.remove(force=True)
    started = time.monotonic()
    container = client.containers.run(
        image,
        entrypoint=["vllm"],
        command=server_command(config),
        name=name,
        detach=True,
        ports={f"{PORT}/tcp": ("127.0.0.1", None)},
        volumes={str(models_dir): {"bind": "/models", "mode": "ro"}},
        shm_size="1g",
        environment={"VLLM_CPU_KVCACHE_SPACE": "1"},
        labels={"specbench.managed": "true", "specbench.config": config},
    )
    container.reload()
    host_port = container.attrs["NetworkSettings"]["Ports"][f"{PORT}/tcp"][0]["HostPort"]
    server = Server(config, container, f"http://127.0.0.1:{host_port}", started)
    deadline = started + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(server.base_url + "/health", timeout=2).status_code == 200:
                server.healthy_after_s = time.monotonic() - started
                return server
        except httpx.HTTPError:
            pass
        container.reload()
        if container.status in ("exited", "dead"):
            logs = server.logs()
            server.stop()
            raise RuntimeError(f"{config}: the server exited before /health:\n{logs[-4000:]}")
        time.sleep(1)
    logs = server.logs()
    server.stop()
    raise RuntimeError(f"{config}: no /health within {START_TIMEOUT_S:.0f} s:\n{logs[-4000:]}")


@dataclass
class Completion:
    text: str
    usage: dict[str, Any]
    chunks: list[dict[str, Any]]  # every data: payload, parsed, with its arrival time
    raw: list[str]  # the SSE lines as received
    seconds: float


def chat_stream(base_url: str, prompt: str, max_tokens: int, *, timeout: float = 600) -> Completion:
    """One streamed chat completion (greedy, ignore_eos, usage in the last chunk)."""
    body = {
        "model": SERVED,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    raw: list[str] = []
    chunks: list[dict[str, Any]] = []
    text: list[str] = []
    usage: dict[str, Any] = {}
    start = time.monotonic()
    with httpx.stream("POST", base_url + "/v1/chat/completions", json=body, timeout=timeout) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            raw.append(line)
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            chunks.append({"t": time.monotonic() - start, "data": chunk})
            for choice in chunk.get("choices") or []:
                text.append((choice.get("delta") or {}).get("content") or "")
            if chunk.get("usage"):
                usage = chunk["usage"]
    return Completion("".join(text), usage, chunks, raw, time.monotonic() - start)


def metrics(base_url: str) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """/metrics as text and as {(sample name, sorted labels): value}."""
    text = httpx.get(base_url + "/metrics", timeout=30).text
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return text, values


def per_position(values: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> list[float]:
    """vllm:spec_decode_num_accepted_tokens_per_pos_total by position."""
    found: dict[int, float] = {}
    for (name, labels), value in values.items():
        if name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
            found[int(dict(labels)["position"])] = value
    return [found[i] for i in sorted(found)]


def counter(values: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    """Sum of a counter over its label sets."""
    return sum(v for (n, _), v in values.items() if n == name)


def version(base_url: str) -> dict[str, Any]:
    reply: dict[str, Any] = httpx.get(base_url + "/version", timeout=30).json()
    return reply


# --- one configuration, measured: greedy outputs, `specbench run`, counters ------------------

GREEDY_PROMPTS = (
    "Write about the draft model and the target model.",
    "The server will report the latency of each request.",
    "Count: one two three four five six seven eight.",
    "Speculative decoding accepts some tokens and rejects others.",
)
GREEDY_TOKENS = int(os.environ.get("SPECBENCH_ENGINE_GREEDY_TOKENS", "96"))
P = int(os.environ.get("SPECBENCH_ENGINE_P", "256"))
# 256 output tokens (~1.5 s at c=1): in a fresh-machine CI run (2026-12-04) one 128-token stream of
# the baseline probe's `specbench run` (0.74 s) reached the client in one read, its 130 SSE events
# all at 744 ms, in the quiet second phase; the server had written them as separate events on time
# (it merges its outputs when its own loop falls behind), so something between the server and the
# client held them for the whole stream. Cause not found; the client's verdict (decode rate
# undefined) is right, and a longer stream needs a longer hold to lose its decode window.
M = int(os.environ.get("SPECBENCH_ENGINE_M", "256"))
ITERATIONS = int(os.environ.get("SPECBENCH_ENGINE_ITERATIONS", "3"))


def hardware_file(folder: Path) -> Path:
    path = folder / "hardware.json"
    path.write_text(
        json.dumps(
            {
                "hwClass": "CPU_ONLY",
                "gpuName": "none",
                "gpuCount": 0,
                "vramGb": 0,
                "gpus": [],
                "cpu": "engine test host",
                "ramGb": 1,
                "os": "linux",
            }
        )
    )
    return path


def specbench_run(base_url: str, config: str, models: Path, work: Path) -> dict[str, Any]:
    """``specbench run vllm --mode remote`` against the server (the README's command with
    small numbers and the tiny model's tokenizer); the payload, plus ``_exit_code``."""
    out = work / f"{config}.json"
    method = RUN_METHODS.get(config, "mtp")  # a label; counters are vLLM's
    argv = [
        sys.executable, "-m", "bench", "run", "vllm", "--mode", "remote",
        "--base-url", base_url, "--hf-id", "specbench/tiny-qwen3",
        "--served-model", SERVED, "--quantization", "BF16",
        "--hardware", str(hardware_file(work)), "--spec-method", method,
        "--prompt-tokens", str(P), "--max-tokens", str(M), "--tokenizer", str(models / "target"),
        "--warmup", "1", "--iterations", str(ITERATIONS), "--out", str(out),
        # the CPU build's engine core dies on logprobs (docker/vllm-cpu/README.md)
        "--logprob-probes", "0",
    ]  # fmt: skip
    if method != "none":
        argv += ["--spec-num-tokens", str(SEED_K.get(config, K))]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO)
    if not out.exists():
        raise RuntimeError(f"specbench run failed ({done.returncode}): {done.stderr[-2000:]}")
    payload: dict[str, Any] = json.loads(out.read_text())
    payload["_exit_code"] = done.returncode
    payload["_stderr"] = done.stderr[-2000:]
    return payload


@dataclass
class ConfigRun:
    """What one configuration's server did."""

    config: str
    argv: list[str]
    start_to_health_s: float
    version: dict[str, Any]
    startup_log: str
    greedy: list[Completion]
    greedy_s: float
    payload: dict[str, Any]
    metrics_text: str
    metric_values: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    def measured_windows(self) -> list[dict[str, Any]]:
        its: list[dict[str, Any]] = self.payload["evidence"]["iterations"]
        return [it for it in its if not it["warmup"]]

    def figures(self) -> dict[str, Any]:
        ev = self.payload["evidence"]
        acc = ev.get("acceptance") or {}
        windows = []
        for it in self.measured_windows():
            w = it.get("acceptance") or {}
            windows.append(
                {
                    "acceptance_rate": w.get("acceptance_rate"),
                    "mean_acceptance_length": w.get("mean_acceptance_length"),
                    "drafts": w.get("drafts"),
                    "accepted_per_position": w.get("accepted_per_position"),
                    "prompt_tokens": [r["prompt_tokens"] for r in it["requests"]],
                }
            )
        return {
            "argv": self.argv,
            "start_to_health_s": round(self.start_to_health_s, 1),
            "version": self.version,
            "greedy_s": round(self.greedy_s, 2),
            "greedy_prompt_tokens": [g.usage.get("prompt_tokens") for g in self.greedy],
            "greedy_completion_tokens": [g.usage.get("completion_tokens") for g in self.greedy],
            "run_exit_code": self.payload["_exit_code"],
            "tokSOut": self.payload["tokSOut"],
            "ttftMs": self.payload["ttftMs"],
            "engineVersion": self.payload.get("engineVersion"),
            "backend": self.payload.get("backend"),
            "acceptance_rate": acc.get("acceptance_rate"),
            "mean_acceptance_length": acc.get("mean_acceptance_length"),
            "accepted_per_position": acc.get("accepted_per_position"),
            "drafts": acc.get("drafts"),
            "windows": windows,
            "valid": ev["validity"].get("valid"),
            "validity_reasons": ev["validity"].get("reasons"),
            "metrics_per_position_total": per_position(self.metric_values),
            "metrics_drafts_total": counter(
                self.metric_values, "vllm:spec_decode_num_drafts_total"
            ),
        }


def run_config(
    client: Any, config: str, models: Path, work: Path, *, keep: bool = False
) -> tuple[ConfigRun, Server | None]:
    """Start ``config``, measure it, stop it (unless ``keep``: then the server is returned)."""
    server = start_server(client, config, models)
    try:
        ver = version(server.base_url)
        start = time.monotonic()
        greedy = [chat_stream(server.base_url, p, GREEDY_TOKENS) for p in GREEDY_PROMPTS]
        greedy_s = time.monotonic() - start
        payload = specbench_run(server.base_url, config, models, work)
        text, values = metrics(server.base_url)
        run = ConfigRun(
            config=config,
            argv=["vllm", *server_command(config)],
            start_to_health_s=server.healthy_after_s or -1.0,
            version=ver,
            startup_log=server.logs(),
            greedy=greedy,
            greedy_s=greedy_s,
            payload=payload,
            metrics_text=text,
            metric_values=values,
        )
    except BaseException:
        server.stop()
        raise
    if keep:
        return run, server
    server.stop()
    return run, None
