"""Turn a fetched GPU tiny run (scripts/gpu_tiny.sh unpack: art/, rec/, report/) into the
repository's recordings and worked example, trimmed to a few hundred KB:

    python3 scripts/gpu_tiny_fixtures.py SRC [SRC ...]

Each SRC is an unpacked fetch: art/ and report/ hold one folder per experiment (art/<name>/);
the first call of 2026-12-03 wrote tiny-vllm-gpu's flat (art/payloads, report/REPORT.md).

tests/fixtures/vllm-gpu/  hardware.json, payloads (a subset), logs without the access and
                          route lines, the recorder's stream, logprobs stream, metrics (vllm:*
                          families only), log and version
docs/gpu-tiny-example/    REPORT.md and its charts, as `specbench report` wrote them, one
                          folder per experiment besides the main one
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "vllm-gpu"
DOCS = REPO / "docs" / "gpu-tiny-example"
MAIN = "tiny-vllm-gpu"
# per experiment: the payloads and logs kept (prefixed with the experiment's method when not
# the main experiment's)
PAYLOADS = {
    MAIN: ("baseline-c1", "self-draft-c1", "self-draft-c4", "partial-draft-c1", "eager-c1"),
    "tiny-vllm-gpu-dflash": ("dflash-c1",),
}
LOGS = {MAIN: ("baseline", "self-draft", "eager"), "tiny-vllm-gpu-dflash": ("dflash",)}
# tiny-vllm-gpu-mtp's server exited at start: its log up to the first traceback's end
REFUSED = ("tiny-vllm-gpu-mtp", "mtp", "mtp-refused", 62)
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


def experiment(src: Path, name: str) -> tuple[Path, Path] | None:
    """(artifacts, report) folders of experiment ``name`` in one fetch, if it is there."""
    if (src / "art" / name / "payloads").is_dir():
        return src / "art" / name, src / "report" / name
    if name == MAIN and (src / "art" / "payloads").is_dir():
        return src / "art", src / "report"
    return None


def copy_run(art: Path, report: Path, name: str) -> None:
    if name == MAIN:
        shutil.copy(art / "hardware.json", FIXTURES / "hardware.json")
    for payload in PAYLOADS.get(name, ()):
        shutil.copy(art / "payloads" / f"{payload}.json", FIXTURES / "payloads")
    for log in LOGS.get(name, ()):
        text = (art / "logs" / f"{log}.log").read_text(encoding="utf-8")
        (FIXTURES / "logs" / f"{log}.log").write_text(trim_log(text), encoding="utf-8")
    docs = DOCS if name == MAIN else DOCS / name.removeprefix(MAIN + "-")
    docs.mkdir(parents=True, exist_ok=True)
    for f in report.iterdir() if report.is_dir() else ():
        if f.suffix in (".md", ".png"):
            shutil.copy(f, docs / f.name)


def copy_recorder(rec: Path) -> None:
    for name in ("stream.sse", "stream-chunks.json", "stream-logprobs.sse", "version.json"):
        shutil.copy(rec / name, FIXTURES / name)
    shutil.copy(rec / "recording.json", FIXTURES / "recording.json")
    log = (rec / "server.log").read_text(encoding="utf-8")
    (FIXTURES / "logs" / "spec-server.log").write_text(trim_log(log), encoding="utf-8")
    metrics = (rec / "metrics.txt").read_text(encoding="utf-8")
    (FIXTURES / "metrics.txt").write_text(vllm_families(metrics), encoding="utf-8")


def main(sources: list[Path]) -> int:
    (FIXTURES / "payloads").mkdir(parents=True, exist_ok=True)
    (FIXTURES / "logs").mkdir(exist_ok=True)
    for src in sources:
        for name in PAYLOADS:
            found = experiment(src, name)
            if found is not None:
                copy_run(*found, name)
        exp, log, name, lines = REFUSED
        refused = src / "art" / exp / "logs" / f"{log}.log"
        if refused.is_file() and not (src / "art" / exp / "payloads").is_dir():
            head = "".join(refused.read_text(encoding="utf-8").splitlines(keepends=True)[:lines])
            (FIXTURES / "logs" / f"{name}.log").write_text(trim_log(head), encoding="utf-8")
        if (src / "rec" / "stream.sse").is_file():
            copy_recorder(src / "rec")
    total = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    print(f"{FIXTURES}: {total // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main([Path(a) for a in sys.argv[1:]]))
