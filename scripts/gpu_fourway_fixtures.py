"""Keep a fetched four-way GPU run (scripts/gpu_fourway.sh unpack: /tmp/gpu-4w/art/) as the
repository's recordings, whole and compressed, and render its report into docs/:

    python3 scripts/gpu_fourway_fixtures.py SRC [SUFFIX]

SRC/art/<experiment>/ is each run folder as the matrix left it (payloads, logs, status.json,
hardware.json, provenance.json, the lock, SHA256SUMS). Each is kept byte for byte as
tests/fixtures/gpu-runs/<experiment>[-SUFFIX].tar.xz (a run folder is a few MB of JSON and logs; xz
makes it a few hundred KB, and the device carries of later sessions stay under 64 MiB), so
`specbench validate` and `specbench report` run on exactly what ran. Then
`specbench report` renders docs/gpu-fourway-example/<experiment>/ from the kept folder.
tests/contract/test_fourway_gpu_recordings.py holds specbench's rules to them.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KEPT = REPO / "tests" / "fixtures" / "gpu-runs"
DOCS = REPO / "docs" / "gpu-fourway-example"
EXPERIMENTS = ("tiny-fourway-gpu", "tiny-sglang-gpu-determinism")


def keep(run: Path, name: str) -> Path:
    """``run`` as ``KEPT/<name>.tar.xz`` (its folder named ``name`` inside), members sorted and
    stamped so a rerun is identical."""
    KEPT.mkdir(parents=True, exist_ok=True)
    out = KEPT / f"{name}.tar.xz"

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    with tarfile.open(out, "w:xz", preset=9) as tar:
        for path in sorted(run.rglob("*")):
            tar.add(path, arcname=f"{name}/{path.relative_to(run)}", recursive=False,
                    filter=clean)  # fmt: skip
    return out


def render(archive: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        name = archive.name.removesuffix(".tar.xz")
        out = DOCS / name
        subprocess.run(
            [sys.executable, "-m", "bench", "report", str(Path(tmp) / name), "--out", str(out)],
            check=True,
        )


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    art = Path(argv[0]) / "art"
    suffix = f"-{argv[1]}" if len(argv) == 2 else ""
    for name in EXPERIMENTS:
        run = art / name
        if not run.is_dir():
            print(f"{run}: not fetched, skipped", file=sys.stderr)
            continue
        archive = keep(run, name + suffix)
        print(f"{archive.relative_to(REPO)}: {archive.stat().st_size} bytes")
        render(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
