"""fetch_model.py (ansible/roles/models/files) does not hash the weights again on a second run
(issue 29): each LFS file that hashed to its etag is kept in `.specbench-verified.json` with its
size, mtime and inode, for the revision; a later run hashes only what changed since. Here on a
snapshot laid out as huggingface_hub's local_dir leaves it (`.cache/huggingface/download/<file>
.metadata`: commit, etag), with the module's sha256 counted."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "ansible/roles/models/files/fetch_model.py"
REV = "0123456789abcdef0123456789abcdef01234567"
OTHER_REV = "89abcdef0123456789abcdef0123456789abcdef"


@pytest.fixture
def fetch(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, list[str]]:
    spec = importlib.util.spec_from_file_location("fetch_model_verified", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    hashed: list[str] = []
    real = mod.sha256

    def counted(path: Path) -> str:
        hashed.append(path.name)
        return str(real(path))

    monkeypatch.setattr(mod, "sha256", counted)
    return mod, hashed


def _snapshot(dest: Path, files: dict[str, bytes], revision: str = REV) -> None:
    meta = dest / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    for name, body in files.items():
        (dest / name).write_bytes(body)
        etag = hashlib.sha256(body).hexdigest() if name.endswith(".safetensors") else "g" * 40
        (meta / f"{name}.metadata").write_text(f"{revision}\n{etag}\n1700000000.0\n")
    (dest / ".specbench-revision").write_text(revision + "\n")


def _run(mod: ModuleType, dest: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    argv = ["fetch_model.py", "--repo-id", "o/m", "--revision", REV, "--dest", str(dest), *extra]
    old = sys.argv
    sys.argv = argv
    try:
        mod.main()
    finally:
        sys.argv = old
    return dict(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))


FILES = {
    "model-00001-of-00002.safetensors": b"a" * 4096,
    "model-00002-of-00002.safetensors": b"b" * 4096,
    "config.json": b"{}",
}


def test_a_second_run_hashes_nothing(
    tmp_path: Path, fetch: tuple[ModuleType, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    mod, hashed = fetch
    _snapshot(tmp_path, FILES)
    first = _run(mod, tmp_path, capsys)
    assert first == {"changed": False, "revision": REV, "files": 3, "verified": True, "hashed": 2}
    assert sorted(hashed) == sorted(n for n in FILES if n.endswith(".safetensors"))
    side = json.loads((tmp_path / ".specbench-verified.json").read_text())
    assert side["revision"] == REV and sorted(side["files"]) == sorted(hashed)
    entry = side["files"]["model-00001-of-00002.safetensors"]
    assert set(entry) == {"etag", "size", "mtime_ns", "ino"} and entry["size"] == 4096
    hashed.clear()
    second = _run(mod, tmp_path, capsys)
    assert second["verified"] and second["hashed"] == 0 and hashed == []
    # --rehash hashes every file again
    assert _run(mod, tmp_path, capsys, "--rehash")["hashed"] == 2


def test_a_changed_file_is_hashed_again_and_caught(
    tmp_path: Path, fetch: tuple[ModuleType, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    mod, hashed = fetch
    _snapshot(tmp_path, FILES)
    _run(mod, tmp_path, capsys)
    hashed.clear()
    shard = tmp_path / "model-00002-of-00002.safetensors"
    st = shard.stat()
    # same size, other bytes, a new mtime: hashed again, refused, and the download starts over
    shard.write_bytes(b"c" * 4096)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    _, problems, n = mod.verify(tmp_path, REV)
    assert n == 1 and hashed == ["model-00002-of-00002.safetensors"]
    assert problems == [f"model-00002-of-00002.safetensors: sha256 differs from the hub's "
                        f"{hashlib.sha256(b'b' * 4096).hexdigest()}"]  # fmt: skip
    side = json.loads((tmp_path / ".specbench-verified.json").read_text())
    assert "model-00002-of-00002.safetensors" not in side["files"]  # never kept once wrong
    # only touched (same bytes, new mtime): hashed again, and kept again
    shard.write_bytes(b"b" * 4096)
    hashed.clear()
    assert mod.verify(tmp_path, REV)[1:] == ([], 1)
    assert mod.verify(tmp_path, REV)[1:] == ([], 0)


def test_the_record_holds_for_its_revision_only(
    tmp_path: Path, fetch: tuple[ModuleType, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    mod, hashed = fetch
    _snapshot(tmp_path, FILES)
    _run(mod, tmp_path, capsys)
    side = tmp_path / ".specbench-verified.json"
    data = json.loads(side.read_text())
    data["revision"] = OTHER_REV
    side.write_text(json.dumps(data))
    hashed.clear()
    assert mod.verify(tmp_path, REV)[2] == 2  # another revision's record counts for nothing
    side.write_text("{not json")
    assert mod.verify(tmp_path, REV)[2] == 2  # nor does an unreadable one
    assert mod.verify(tmp_path, REV)[2] == 0


def test_check_mode_writes_no_record(
    tmp_path: Path, fetch: tuple[ModuleType, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    mod, _ = fetch
    _snapshot(tmp_path, FILES)
    assert _run(mod, tmp_path, capsys, "--check")["verified"] is True
    assert not (tmp_path / ".specbench-verified.json").exists()
