"""Turn a fetched SGLang GPU run (scripts/gpu_sglang.sh unpack: art/, rec/, report/) into the
repository's recordings, trimmed to a few hundred KB:

    python3 scripts/gpu_sglang_fixtures.py SRC

SRC is an unpacked fetch of the last call of a warm machine (its art/ holds every experiment the
machine ran). Writes tests/fixtures/sglang-gpu/:
  hardware.json              NVML's view of the device (from the DFLASH experiment)
  logs/<exp>-<config>.log    server logs without uvicorn's access lines and tqdm's bars
  payloads/<exp>-<name>.json a subset of the payloads
  status/<exp>.json          each experiment's status.json (the verdicts, the failures)
  rec/                       the recorder's stream, logprobs reply, /metrics (sglang:* families
                             only), /server_info, /version reply, recording.json, server log
tests/contract/test_sglang_gpu_recordings.py holds specbench's patterns against them.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "sglang-gpu"
SHORT = {
    "tiny-sglang-gpu": "tiny",
    "tiny-sglang-gpu-dflash": "dflash",
    "tiny-sglang-gpu-mtp": "mtp",
    "tiny-sglang-gpu-gptq": "gptq",
}
PAYLOADS = {
    "tiny-sglang-gpu": ("standalone-c1",),
    "tiny-sglang-gpu-dflash": ("baseline-c1", "dflash-c1", "dflash-c4"),
    "tiny-sglang-gpu-mtp": ("mtp-c1",),
}
# uvicorn's access lines and tqdm's progress bars: nothing specbench reads
NOISE = re.compile(r'INFO: +127\.0\.0\.1:\d+ - "|\|[ #█▏▎▍▌▋▊▉]*\| *\d+/\d+ \[')


def trim_log(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not NOISE.search(line))


def metric_lines(text: str) -> str:
    keep = [ln for ln in text.splitlines() if "sglang:" in ln]
    return "\n".join(keep) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    src = Path(argv[0])
    art = src / "art"
    if FIXTURES.exists():
        shutil.rmtree(FIXTURES)
    (FIXTURES / "logs").mkdir(parents=True)
    (FIXTURES / "payloads").mkdir()
    (FIXTURES / "status").mkdir()
    shutil.copy(art / "tiny-sglang-gpu-dflash" / "hardware.json", FIXTURES / "hardware.json")
    for exp, short in SHORT.items():
        folder = art / exp
        if not folder.is_dir():
            continue
        shutil.copy(folder / "status.json", FIXTURES / "status" / f"{short}.json")
        for log in sorted((folder / "logs").glob("*.log")):
            text = log.read_text(encoding="utf-8", errors="replace")
            (FIXTURES / "logs" / f"{short}-{log.name}").write_text(trim_log(text))
        for name in PAYLOADS.get(exp, ()):
            shutil.copy(
                folder / "payloads" / f"{name}.json", FIXTURES / "payloads" / f"{short}-{name}.json"
            )
    rec_src = src / "rec" / "dflash"
    rec = FIXTURES / "rec"
    rec.mkdir()
    for name in ("stream.sse", "stream-chunks.json", "logprobs-reply.json", "server_info.json",
                 "version-reply.json", "recording.json"):  # fmt: skip
        shutil.copy(rec_src / name, rec / name)
    for name in ("metrics.txt", "metrics-idle.txt"):
        (rec / name).write_text(metric_lines((rec_src / name).read_text(encoding="utf-8")))
    server = (rec_src / "server.log").read_text(encoding="utf-8", errors="replace")
    (rec / "server.log").write_text(trim_log(server))
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    print(f"{FIXTURES.relative_to(REPO)}: {total} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
