"""Turn a fetched GPU tiny run (scripts/gpu_tiny.sh unpack: art/, rec/, report/) into the
repository's recordings and worked example, trimmed to a few hundred KB:

    python3 scripts/gpu_tiny_fixtures.py /tmp/gpu-tiny

tests/fixtures/vllm-gpu/  hardware.json, payloads (a subset), logs without the access and
                          route lines, the recorder's stream, logprobs stream, metrics (vllm:*
                          families only), log and version
docs/gpu-tiny-example/    REPORT.md and its charts, as `specbench report` wrote them
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "vllm-gpu"
DOCS = REPO / "docs" / "gpu-tiny-example"
PAYLOADS = ("baseline-c1", "self-draft-c1", "self-draft-c4", "partial-draft-c1", "eager-c1")
LOGS = ("baseline", "self-draft", "eager")
# uvicorn's access lines, the route table and tqdm's 0% bars: nothing specbench reads
NOISE = re.compile(r'"(GET|POST) /|\] Route: /|: +0%\|')


def trim_log(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not NOISE.search(line))


def vllm_families(metrics: str) -> str:
    keep = []
    for line in metrics.splitlines(keepends=True):
        name = line.split()[2] if line.startswith("# ") and len(line.split()) > 2 else line
        if name.startswith("vllm:"):
            keep.append(line)
    return "".join(keep)


def main(src: Path) -> int:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / "payloads").mkdir(exist_ok=True)
    (FIXTURES / "logs").mkdir(exist_ok=True)
    shutil.copy(src / "art" / "hardware.json", FIXTURES / "hardware.json")
    for name in PAYLOADS:
        shutil.copy(src / "art" / "payloads" / f"{name}.json", FIXTURES / "payloads")
    for name in LOGS:
        text = (src / "art" / "logs" / f"{name}.log").read_text(encoding="utf-8")
        (FIXTURES / "logs" / f"{name}.log").write_text(trim_log(text), encoding="utf-8")
    rec = src / "rec"
    for name in ("stream.sse", "stream-chunks.json", "stream-logprobs.sse", "version.json"):
        shutil.copy(rec / name, FIXTURES / name)
    shutil.copy(rec / "recording.json", FIXTURES / "recording.json")
    log = (rec / "server.log").read_text(encoding="utf-8")
    (FIXTURES / "logs" / "spec-server.log").write_text(trim_log(log), encoding="utf-8")
    metrics = (rec / "metrics.txt").read_text(encoding="utf-8")
    (FIXTURES / "metrics.txt").write_text(vllm_families(metrics), encoding="utf-8")
    DOCS.mkdir(parents=True, exist_ok=True)
    for f in (src / "report").iterdir():
        if f.suffix in (".md", ".png"):
            shutil.copy(f, DOCS / f.name)
    total = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    print(f"{FIXTURES}: {total // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
