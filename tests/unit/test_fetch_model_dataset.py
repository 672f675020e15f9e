"""fetch_model.py (ansible/roles/models/files) fetches a dataset prompt set the way it fetches
weights (issue 37): `--repo-type dataset --file FILE` downloads only that file at the pinned
commit (resolving 'unresolved' through --resolve-ref against the hub's *dataset* API), prints its
sha256 for the pins lock, refuses a file that does not hash to the pinned sha256, and does not
download again a file already there for that revision. huggingface_hub is faked here: the
download writes the file the way `hf_hub_download(local_dir=...)` does."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "ansible/roles/models/files/fetch_model.py"
REV = "0123456789abcdef0123456789abcdef01234567"
OTHER_REV = "89abcdef0123456789abcdef0123456789abcdef"
BODY = b'{"category": "code", "prompt": "def f():"}\n'
SHA = hashlib.sha256(BODY).hexdigest()


class Hub:
    """The fake hub: what was downloaded, and what the dataset's `main` is."""

    def __init__(self) -> None:
        self.downloads: list[dict[str, Any]] = []
        self.body = BODY
        self.info: list[tuple[str, str, str]] = []


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Hub:
    import huggingface_hub

    h = Hub()

    def download(repo_id: str, filename: str, **kw: Any) -> str:
        h.downloads.append({"repo_id": repo_id, "filename": filename, **kw})
        out = Path(kw["local_dir"]) / filename
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(h.body)
        return str(out)

    class Api:
        def dataset_info(self, repo_id: str, revision: str) -> Any:
            h.info.append(("dataset", repo_id, revision))
            return type("Info", (), {"sha": REV})()

        def model_info(self, repo_id: str, revision: str) -> Any:
            h.info.append(("model", repo_id, revision))
            return type("Info", (), {"sha": OTHER_REV})()

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    return h


@pytest.fixture
def mod() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_model_dataset", SCRIPT)
    assert spec and spec.loader
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _run(
    mod: ModuleType, dest: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> dict[str, Any]:
    argv = ["fetch_model.py", "--repo-id", "org/prompts", "--dest", str(dest),
            "--repo-type", "dataset", "--file", "data/code.jsonl", *extra]  # fmt: skip
    if "--revision" not in extra:
        argv += ["--revision", REV]
    old = sys.argv
    sys.argv = argv
    try:
        mod.main()
    finally:
        sys.argv = old
    return dict(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))


def test_only_the_file_is_fetched_once_and_its_sha256_printed(
    tmp_path: Path, hub: Hub, mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _run(mod, tmp_path, capsys)
    assert first == {"changed": True, "revision": REV, "file": "data/code.jsonl", "sha256": SHA}
    assert hub.downloads == [
        {"repo_id": "org/prompts", "filename": "data/code.jsonl", "revision": REV,
         "repo_type": "dataset", "local_dir": tmp_path}
    ]  # fmt: skip
    assert (tmp_path / "data/code.jsonl").read_bytes() == BODY
    second = _run(mod, tmp_path, capsys, "--sha256", SHA)
    assert second == {**first, "changed": False}
    assert len(hub.downloads) == 1


def test_a_file_that_does_not_hash_to_the_pin_fails_naming_both(
    tmp_path: Path, hub: Hub, mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    pinned = "e" * 64
    with pytest.raises(SystemExit) as err:
        _run(mod, tmp_path, capsys, "--sha256", pinned)
    assert SHA in str(err.value) and pinned in str(err.value)
    assert not (tmp_path / mod.DATASET).exists()


def test_a_changed_file_or_another_revision_is_fetched_again(
    tmp_path: Path, hub: Hub, mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(mod, tmp_path, capsys)
    (tmp_path / "data/code.jsonl").write_bytes(b"edited by hand\n")
    again = _run(mod, tmp_path, capsys, "--sha256", SHA)
    assert again["changed"] is True and again["sha256"] == SHA
    moved = _run(mod, tmp_path, capsys, "--revision", OTHER_REV)
    assert moved["changed"] is True and moved["revision"] == OTHER_REV
    assert [d["revision"] for d in hub.downloads] == [REV, REV, OTHER_REV]


def test_check_mode_downloads_nothing(
    tmp_path: Path, hub: Hub, mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(mod, tmp_path, capsys, "--check", "--sha256", SHA)
    assert out == {"changed": True, "revision": REV, "file": "data/code.jsonl", "sha256": SHA}
    assert hub.downloads == [] and not (tmp_path / "data").exists()


def test_unresolved_resolves_through_the_dataset_api(
    tmp_path: Path, hub: Hub, mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(mod, tmp_path, capsys, "--revision", "unresolved", "--resolve-ref", "main")
    assert hub.info == [("dataset", "org/prompts", "main")]
    assert out["revision"] == REV and hub.downloads[0]["revision"] == REV


def test_a_file_outside_the_repository_is_refused(
    tmp_path: Path, hub: Hub, mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    old = sys.argv
    sys.argv = ["fetch_model.py", "--repo-id", "org/prompts", "--revision", REV, "--dest",
                str(tmp_path), "--repo-type", "dataset", "--file", "../escape.jsonl"]  # fmt: skip
    try:
        with pytest.raises(SystemExit, match="inside the repository"):
            mod.main()
    finally:
        sys.argv = old
    assert hub.downloads == []
