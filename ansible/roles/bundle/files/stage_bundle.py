"""Pack the parts of the repository a host needs into a byte-reproducible tar.gz.

Runs on the controller. Same inputs -> same bytes (sorted names, zeroed times and owners, gzip
without a timestamp), so Ansible's copy of the archive to the host changes only when the bundle
did. Prints {"path", "sha256", "files"} as JSON.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
from pathlib import Path

SKIP_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules"}
# the pins lock travels on its own (the benchmark role copies it), so that a pin resolved by
# this run does not change the bundle it runs with
SKIP_SUFFIXES = (".pyc", ".pyo", ".lock.yaml")


def members(repo: Path, paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for rel in paths:
        top = repo / rel
        if top.is_file():
            out.append(top)
            continue
        if not top.is_dir():
            sys.exit(f"stage_bundle: {top} does not exist")
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
            out.extend(Path(root) / f for f in sorted(files) if not f.endswith(SKIP_SUFFIXES))
    return sorted(set(out), key=lambda p: p.relative_to(repo).as_posix())


def pack(repo: Path, files: list[Path]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            info = tarfile.TarInfo(f.relative_to(repo).as_posix())
            data = f.read_bytes()
            info.size = len(data)
            info.mode = 0o755 if os.access(f, os.X_OK) else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repo", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    repo = args.repo.resolve()
    files = members(repo, args.paths)
    blob = pack(repo, files)
    if not args.out.exists() or args.out.read_bytes() != blob:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_bytes(blob)
        tmp.replace(args.out)
    digest = hashlib.sha256(blob).hexdigest()
    print(json.dumps({"path": str(args.out), "sha256": digest, "files": len(files)}))


if __name__ == "__main__":
    main()
