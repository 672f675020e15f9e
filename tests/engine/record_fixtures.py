"""Re-record the vLLM CPU fixtures the emulator's contract test holds it against, and print
the figures of each configuration (start-to-health, tok/s, acceptance, per-position counts,
greedy agreement with the baseline).

    PYTHONPATH=. .venv/bin/python tests/engine/record_fixtures.py [--configs baseline,...]

Builds docker/vllm-cpu (idempotent), makes the tiny models into a temporary folder, starts one
container per configuration (one at a time) and writes into tests/fixtures/vllm-cpu/:
  stream.sse        one streamed chat completion, the SSE lines as received
  stream-chunks.json the same stream parsed, chunk by chunk, with arrival times (s)
  metrics.txt       /metrics after speculative requests (partial draft, k=3)
  startup.log       the server's log up to "Application startup complete"
  version.json      GET /version
  recording.json    what was recorded: image, argv, tiny-model digests, figures
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import engine_server as es

import docker
from bench.tinymodel import make_tiny_models

FIXTURES = es.REPO / "tests" / "fixtures" / "vllm-cpu"
RECORD_CONFIG = "partial_draft"  # speculative, so /metrics has the spec_decode families


def record(server: es.Server, out: Path) -> dict[str, Any]:
    """Write the fixtures from a running (speculative) server."""
    out.mkdir(parents=True, exist_ok=True)
    done = es.chat_stream(server.base_url, "Tell me about the draft model and the server.", 24)
    (out / "stream.sse").write_text("\n".join(done.raw) + "\n")
    (out / "stream-chunks.json").write_text(json.dumps(done.chunks, indent=1) + "\n")
    text, _ = es.metrics(server.base_url)
    (out / "metrics.txt").write_text(text)
    log = server.logs()
    cut = log.find("Application startup complete")
    startup = log if cut < 0 else log[: log.index("\n", cut) + 1]
    (out / "startup.log").write_text(startup)
    (out / "version.json").write_text(json.dumps(es.version(server.base_url), indent=1) + "\n")
    return {"stream_chunks": len(done.chunks), "usage": done.usage}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--configs", default=",".join(es.CONFIGS))
    parser.add_argument("--out", type=Path, default=FIXTURES)
    parser.add_argument("--no-fixtures", action="store_true", help="figures only")
    parser.add_argument("--keep", type=Path, help="keep the models and payloads here")
    parser.add_argument("--summary", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    configs = args.configs.split(",")
    client = docker.from_env()
    image, build_s = es.build_image()
    summary: dict[str, Any] = {"image": image, "build_script_s": round(build_s, 1), "configs": {}}
    with tempfile.TemporaryDirectory(prefix="specbench-vllm-cpu-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        models = work / "models"
        made = make_tiny_models(models, seed=0)
        for folder in (models, made.target.path, made.draft.path):
            folder.chmod(0o755)
        summary["models"] = {
            "target_sha256": made.target.sha256["model.safetensors"],
            "draft_sha256": made.draft.sha256["model.safetensors"],
            "spec": made.spec.model_dump(),
        }
        baseline: list[str] | None = None
        for config in configs:
            keep = config == RECORD_CONFIG and not args.no_fixtures
            run, server = es.run_config(client, config, models, work, keep=keep)
            entry = run.figures()
            texts = [g.text for g in run.greedy]
            if config == "baseline":
                baseline = texts
                entry["greedy_sample"] = texts[0][:160]
            elif baseline is not None:
                entry["greedy_identical_to_baseline"] = [
                    a == b for a, b in zip(texts, baseline, strict=True)
                ]
            if server is not None:
                try:
                    entry["recorded"] = record(server, args.out)
                    summary["recorded_from"] = entry["argv"]
                finally:
                    server.stop()
            summary["configs"][config] = entry
            print(json.dumps({config: entry}, indent=1), flush=True)
    if "recorded_from" in summary:
        (args.out / "recording.json").write_text(json.dumps(summary, indent=1) + "\n")
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
