"""Download one pinned Hugging Face snapshot into a host folder and verify it, idempotently.

Runs on the host with the bundle's virtual environment (huggingface_hub is a dependency). The
token, if any, comes from the file HF_TOKEN_PATH names (huggingface_hub reads it), never argv.
Prints one JSON line: {"changed", "revision", "files", "verified"}; exit 1 with a reason on error.

`--revision unresolved --resolve-ref main` first asks the hub which commit `main` is now and
uses that commit (printed as "revision", also with --check), so a run can resolve a pin once
and record it; the role writes what it resolved to the controller.

Verification is offline: every file huggingface_hub recorded for the snapshot must exist, carry
the pinned commit, and (for LFS files, whose etag is their sha256) hash to that etag.

A second run does not hash the weights again (a 27B checkpoint is some 20 GB): each LFS file that
hashed to its etag is kept in `.specbench-verified.json` with its size, mtime and inode, and is
hashed again only when one of them, its etag or the revision changed (`--rehash` hashes all).

`--repo-type dataset --file FILE [--sha256 HEX]` (issue 37) fetches one file of a dataset
repository instead, a prompt set: only that file, at the revision, into --dest; prints
{"changed", "revision", "file", "sha256"}. An expected sha256 (not 'unresolved') that the file
does not hash to is a failure naming both. A file already there for that revision (its record in
`.specbench-dataset.json`) that hashes right is not downloaded again.

`--url URL [--sha256 HEX] [--mirror PREFIX=REPLACEMENT]` (issue 48) fetches one file pinned by
its https URL instead (GSM8K's test split on GitHub, at a commit) into --dest, under the URL's
last segment, with the standard library alone; prints {"changed", "url", "file", "sha256"}. The
same rules: an expected sha256 the bytes do not hash to fails naming both (nothing is left
behind), a file already there for that URL (`.specbench-url.json`) that hashes right is not
downloaded again. A mirror serves the URL's bytes from elsewhere (an air-gapped host's copy, the
tests' stand-in): the sha256 pin is checked all the same; what the lock records is the URL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import urllib.request
from pathlib import Path

MARKER = ".specbench-revision"
VERIFIED = ".specbench-verified.json"
VERIFIED_SCHEMA = "specbench.verified/1"
DATASET = ".specbench-dataset.json"
DATASET_SCHEMA = "specbench.dataset/1"
URL_RECORD = ".specbench-url.json"
URL_SCHEMA = "specbench.url/1"
#: a file pinned by URL is a small task file (GSM8K's test split is 0.7 MB); more is a mistake
MAX_URL_BYTES = 64 * 1024 * 1024
URL_TIMEOUT_S = 60


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def _load_verified(dest: Path, revision: str) -> dict[str, dict[str, object]]:
    """What an earlier run hashed for this revision (empty: absent, stale or unreadable)."""
    try:
        data = json.loads((dest / VERIFIED).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != VERIFIED_SCHEMA:
        return {}
    if data.get("revision") != revision or not isinstance(data.get("files"), dict):
        return {}
    return {k: v for k, v in data["files"].items() if isinstance(v, dict)}


def _save_verified(dest: Path, revision: str, files: dict[str, dict[str, object]]) -> None:
    tmp = dest / (VERIFIED + ".tmp")
    body = {"schema": VERIFIED_SCHEMA, "revision": revision, "files": files}
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    tmp.replace(dest / VERIFIED)


def verify(
    dest: Path, revision: str, rehash: bool = False, record: bool = True
) -> tuple[int, list[str], int]:
    """Check the files huggingface_hub recorded under dest/.cache/huggingface/download.
    Returns (files, problems, files hashed now); with `record`, keeps what hashed right (and is
    unchanged since) in dest/.specbench-verified.json for the next run."""
    meta_root = dest / ".cache" / "huggingface" / "download"
    problems: list[str] = []
    metas = sorted(meta_root.rglob("*.metadata")) if meta_root.is_dir() else []
    if not metas:
        return 0, [f"{dest}: no download metadata; not a huggingface_hub snapshot"], 0
    known = {} if rehash else _load_verified(dest, revision)
    verified: dict[str, dict[str, object]] = {}
    hashed = 0
    for meta in metas:
        rel = meta.relative_to(meta_root).as_posix()[: -len(".metadata")]
        lines = meta.read_text().splitlines()
        commit, etag = [*lines, "", ""][:2]
        target = dest / rel
        if not target.is_file():
            problems.append(f"{rel}: missing")
        elif commit != revision:
            problems.append(f"{rel}: from commit {commit}, pinned {revision}")
        elif len(etag) == 64:
            stamp = _stamp(target)
            if known.get(rel) == {"etag": etag, **stamp}:
                verified[rel] = known[rel]
                continue
            hashed += 1
            if sha256(target) != etag:
                problems.append(f"{rel}: sha256 differs from the hub's {etag}")
            elif _stamp(target) == stamp:  # unchanged while it was read
                verified[rel] = {"etag": etag, **stamp}
    if not (dest / "config.json").is_file():
        problems.append("config.json: missing")
    if record and (verified != known or (dest / VERIFIED).exists() != bool(verified)):
        _save_verified(dest, revision, verified)
    return len(metas), problems, hashed


def resolve(repo_id: str, ref: str, repo_type: str = "model") -> str:
    """The commit `ref` (a branch or tag) of `repo_id` points at now, as 40 hex digits."""
    from huggingface_hub import HfApi

    try:
        api = HfApi()
        info = api.dataset_info if repo_type == "dataset" else api.model_info
        sha = info(repo_id, revision=ref).sha
    except Exception as err:  # the hub's errors are many; the message is what a person needs
        sys.exit(f"cannot resolve {repo_id}@{ref}: {type(err).__name__}: {err}")
    if not isinstance(sha, str) or len(sha) != 40 or any(c not in "0123456789abcdef" for c in sha):
        sys.exit(f"cannot resolve {repo_id}@{ref}: the hub answered {sha!r}, not a commit")
    return sha


def _dataset_record(dest: Path) -> dict[str, str]:
    """What an earlier run fetched into dest (empty: absent or unreadable)."""
    try:
        data = json.loads((dest / DATASET).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != DATASET_SCHEMA:
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)}


def fetch_dataset(
    repo_id: str, revision: str, file: str, expected: str, dest: Path, check: bool
) -> dict[str, object]:
    """One file of a dataset repository at `revision` in dest, hash-checked; the JSON answer.
    Exits with a reason on a failed download or a sha256 other than `expected`."""
    if file.startswith("/") or ".." in Path(file).parts:
        sys.exit(f"{repo_id}: --file {file!r} must be a path inside the repository")
    target = dest / file
    want = None if expected == "unresolved" else expected
    held = _dataset_record(dest)
    if held.get("revision") == revision and held.get("file") == file and target.is_file():
        have = sha256(target)
        if have == held.get("sha256") and want in (None, have):
            return {"changed": False, "revision": revision, "file": file, "sha256": have}
    if check:
        return {"changed": True, "revision": revision, "file": file, "sha256": want}
    from huggingface_hub import hf_hub_download

    dest.mkdir(parents=True, exist_ok=True)
    try:
        hf_hub_download(repo_id, file, revision=revision, repo_type="dataset", local_dir=dest)
    except Exception as err:  # the hub's errors are many; the message is what a person needs
        sys.exit(f"download of {repo_id}@{revision} {file} failed: {type(err).__name__}: {err}")
    if not target.is_file():
        sys.exit(f"{repo_id}@{revision}: {file} is not at {target} after the download")
    have = sha256(target)
    if want is not None and have != want:
        sys.exit(
            f"{repo_id}@{revision} {file}: sha256 {have}, the experiment pins {want} (the file "
            "at that commit is not the one pinned)"
        )
    tmp = dest / (DATASET + ".tmp")
    body = {"schema": DATASET_SCHEMA, "revision": revision, "file": file, "sha256": have}
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    tmp.replace(dest / DATASET)
    return {"changed": True, "revision": revision, "file": file, "sha256": have}


def _url_record(dest: Path) -> dict[str, str]:
    """What an earlier run fetched into dest by URL (empty: absent or unreadable)."""
    try:
        data = json.loads((dest / URL_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != URL_SCHEMA:
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)}


def mirrored(url: str, mirrors: list[str]) -> str:
    """Where to fetch `url` from: the first mirror whose prefix it starts with, else itself."""
    for m in mirrors:
        prefix, sep, to = m.partition("=")
        if not sep or not prefix or not to:
            sys.exit(f"--mirror {m!r}: want PREFIX=REPLACEMENT")
        if url.startswith(prefix):
            return to + url[len(prefix) :]
    return url


def _download(src: str, part: Path) -> str:
    """The bytes at `src` into `part`; their sha256. OSError/ValueError on a failure."""
    h = hashlib.sha256()
    size = 0
    with urllib.request.urlopen(src, timeout=URL_TIMEOUT_S) as answer, part.open("wb") as out:
        for block in iter(lambda: answer.read(1 << 20), b""):
            size += len(block)
            if size > MAX_URL_BYTES:
                raise ValueError(f"more than {MAX_URL_BYTES} bytes: not a task file")
            h.update(block)
            out.write(block)
    return h.hexdigest()


def fetch_url(
    url: str, expected: str, dest: Path, check: bool, mirrors: list[str]
) -> dict[str, object]:
    """The file at `url` in dest, hash-checked; the JSON answer. Exits with a reason on a
    failed download or a sha256 other than `expected`, leaving nothing behind."""
    name = url.rsplit("/", 1)[-1]
    if not url.startswith("https://") or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        sys.exit(f"--url {url!r} must be an https URL ending in a file name")
    target = dest / name
    want = None if expected == "unresolved" else expected
    held = _url_record(dest)
    if held.get("url") == url and held.get("file") == name and target.is_file():
        have = sha256(target)
        if have == held.get("sha256") and want in (None, have):
            return {"changed": False, "url": url, "file": name, "sha256": have}
    if check:
        return {"changed": True, "url": url, "file": name, "sha256": want}
    src = mirrored(url, mirrors)
    via = f" (from the mirror {src})" if src != url else ""
    dest.mkdir(parents=True, exist_ok=True)
    part = dest / (name + ".part")
    try:
        have = _download(src, part)
    except (OSError, ValueError) as err:  # urllib's errors are OSErrors; a bad URL, ValueError
        part.unlink(missing_ok=True)
        sys.exit(f"download of {url}{via} failed: {type(err).__name__}: {err}")
    if want is not None and have != want:
        part.unlink(missing_ok=True)
        sys.exit(
            f"{url}{via}: sha256 {have}, the experiment pins {want} (the file served is not "
            "the one pinned)"
        )
    part.replace(target)
    tmp = dest / (URL_RECORD + ".tmp")
    body = {"schema": URL_SCHEMA, "url": url, "file": name, "sha256": have}
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    tmp.replace(dest / URL_RECORD)
    return {"changed": True, "url": url, "file": name, "sha256": have}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repo-id", default=None, help="the repository (not with --url)")
    ap.add_argument("--revision", default=None, help="its pinned commit (not with --url)")
    ap.add_argument("--dest", required=True, type=Path)
    ap.add_argument("--check", action="store_true", help="report what would happen, change nothing")
    ap.add_argument(
        "--rehash",
        action="store_true",
        help="hash every LFS file again (ignore .specbench-verified.json)",
    )
    ap.add_argument(
        "--resolve-ref",
        default=None,
        help="with --revision unresolved: resolve this branch/tag to its commit and use that",
    )
    ap.add_argument("--repo-type", choices=("model", "dataset"), default="model")
    ap.add_argument("--file", default=None, help="with --repo-type dataset: the one file to fetch")
    ap.add_argument(
        "--sha256",
        default="unresolved",
        help="with --repo-type dataset or --url: the file's pinned sha256 ('unresolved': "
        "record it)",
    )
    ap.add_argument("--url", default=None, help="fetch the one file at this https URL instead")
    ap.add_argument(
        "--mirror",
        action="append",
        default=[],
        help="with --url: PREFIX=REPLACEMENT, fetch a URL that starts with PREFIX from there",
    )
    args = ap.parse_args()
    if args.url is not None:
        if args.repo_id or args.revision:
            sys.exit("--url fetches one file: no --repo-id or --revision")
        out = fetch_url(args.url, args.sha256, args.dest, args.check, args.mirror)
        print(json.dumps(out))
        return
    if not args.repo_id or not args.revision:
        sys.exit("--repo-id and --revision are required (or --url)")
    if args.repo_type == "dataset" and not args.file:
        sys.exit(f"{args.repo_id}: --repo-type dataset needs --file")
    if args.revision == "unresolved":
        if not args.resolve_ref:
            sys.exit(f"{args.repo_id}: revision is 'unresolved'; pass --resolve-ref to resolve it")
        args.revision = resolve(args.repo_id, args.resolve_ref, args.repo_type)
    dest: Path = args.dest
    if args.repo_type == "dataset":
        out = fetch_dataset(args.repo_id, args.revision, args.file, args.sha256, dest, args.check)
        print(json.dumps(out))
        return
    marker = dest / MARKER
    have = marker.read_text().strip() if marker.is_file() else ""
    if have == args.revision:
        files, problems, hashed = verify(dest, args.revision, args.rehash, record=not args.check)
        if not problems:
            print(
                json.dumps(
                    {"changed": False, "revision": have, "files": files, "verified": True,
                     "hashed": hashed}
                )
            )  # fmt: skip
            return
    if args.check:
        print(
            json.dumps({"changed": True, "revision": args.revision, "files": 0, "verified": False})
        )
        return
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(repo_id=args.repo_id, revision=args.revision, local_dir=dest)
    except Exception as err:  # the hub's errors are many; the message is what a person needs
        sys.exit(f"download of {args.repo_id}@{args.revision} failed: {type(err).__name__}: {err}")
    files, problems, hashed = verify(dest, args.revision, args.rehash)
    if problems:
        sys.exit(f"{args.repo_id}@{args.revision}: verification failed: " + "; ".join(problems[:5]))
    marker.write_text(args.revision + "\n")
    print(
        json.dumps(
            {"changed": True, "revision": args.revision, "files": files, "verified": True,
             "hashed": hashed}
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
