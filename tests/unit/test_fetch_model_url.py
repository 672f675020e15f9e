"""fetch_model.py (ansible/roles/models/files) fetches a file pinned by URL (issue 48: GSM8K's test
split at a commit of OpenAI's grade-school-math): `--url URL --sha256 HEX --dest DIR` downloads it
with the standard library, prints its sha256 for the pins lock, refuses bytes that do not hash to
the pin (leaving nothing behind), and does not download again a file already there for that URL.
Nothing here reaches the network: a `--mirror` maps the URL onto a local file:// copy, and a test
without one finds urlopen faked."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "ansible/roles/models/files/fetch_model.py"
PREFIX = "https://raw.githubusercontent.com/org/math/"
URL = PREFIX + "0123456789abcdef0123456789abcdef01234567/data/test.jsonl"
BODY = b'{"question": "What is 1 + 1?", "answer": "1 + 1 = 2\\n#### 2"}\n'
SHA = hashlib.sha256(BODY).hexdigest()


@pytest.fixture
def mod() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_model_url", SCRIPT)
    assert spec and spec.loader
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    """A local copy laid out as the URL's path after PREFIX."""
    root = tmp_path / "mirror"
    f = root / URL.removeprefix(PREFIX)
    f.parent.mkdir(parents=True)
    f.write_bytes(BODY)
    return root


def _run(
    mod: ModuleType, dest: Path, capsys: pytest.CaptureFixture[str], mirror: Path, *extra: str
) -> dict[str, Any]:
    argv = ["fetch_model.py", "--url", URL, "--dest", str(dest),
            f"--mirror={PREFIX}={mirror.as_uri()}/", *extra]  # fmt: skip
    old = sys.argv
    sys.argv = argv
    try:
        mod.main()
    finally:
        sys.argv = old
    return dict(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))


def test_the_file_is_fetched_once_and_its_sha256_printed(
    tmp_path: Path, mod: ModuleType, mirror: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "datasets" / "gsm8k-test"
    first = _run(mod, dest, capsys, mirror)
    assert first == {"changed": True, "url": URL, "file": "test.jsonl", "sha256": SHA}
    assert (dest / "test.jsonl").read_bytes() == BODY
    assert sorted(p.name for p in dest.iterdir()) == [mod.URL_RECORD, "test.jsonl"]
    # the record names the URL, not the mirror it came from
    assert json.loads((dest / mod.URL_RECORD).read_text())["url"] == URL
    # there and right: not fetched again (the mirror's copy gone shows it)
    (mirror / URL.removeprefix(PREFIX)).unlink()
    second = _run(mod, dest, capsys, mirror, "--sha256", SHA)
    assert second == {**first, "changed": False}


def test_bytes_that_do_not_hash_to_the_pin_fail_naming_both_and_leave_nothing(
    tmp_path: Path, mod: ModuleType, mirror: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pinned = "e" * 64
    dest = tmp_path / "d"
    with pytest.raises(SystemExit) as err:
        _run(mod, dest, capsys, mirror, "--sha256", pinned)
    assert SHA in str(err.value) and pinned in str(err.value) and URL in str(err.value)
    assert "mirror" in str(err.value)
    assert list(dest.iterdir()) == []


def test_a_changed_file_is_fetched_again(
    tmp_path: Path, mod: ModuleType, mirror: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "d"
    _run(mod, dest, capsys, mirror)
    (dest / "test.jsonl").write_bytes(b"edited by hand\n")
    again = _run(mod, dest, capsys, mirror, "--sha256", SHA)
    assert again["changed"] is True and (dest / "test.jsonl").read_bytes() == BODY


def test_check_mode_downloads_nothing(
    tmp_path: Path, mod: ModuleType, mirror: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(mod, tmp_path / "d", capsys, mirror, "--check", "--sha256", SHA)
    assert out == {"changed": True, "url": URL, "file": "test.jsonl", "sha256": SHA}
    assert not (tmp_path / "d").exists()


def test_a_failed_download_names_the_url(
    tmp_path: Path, mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "d"
    with pytest.raises(SystemExit) as err:
        _run(mod, dest, capsys, tmp_path / "no-mirror-here")
    assert f"download of {URL}" in str(err.value) and "failed" in str(err.value)
    assert list(dest.iterdir()) == []


def test_without_a_mirror_the_pinned_url_itself_is_asked(
    tmp_path: Path,
    mod: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    asked: list[str] = []

    class Answer:
        def __init__(self) -> None:
            self.left = [BODY]

        def read(self, _n: int) -> bytes:
            return self.left.pop() if self.left else b""

        def __enter__(self) -> Answer:
            return self

        def __exit__(self, *_: object) -> None:
            return None

    def urlopen(url: str, timeout: float) -> Answer:
        asked.append(url)
        return Answer()

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    old = sys.argv
    sys.argv = ["fetch_model.py", "--url", URL, "--dest", str(tmp_path), "--sha256", SHA]
    try:
        mod.main()
    finally:
        sys.argv = old
    assert asked == [URL]
    assert json.loads(capsys.readouterr().out)["sha256"] == SHA


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--url", URL.replace("https:", "http:")], "must be an https URL"),
        (["--url", PREFIX], "ending in a file name"),
        (["--url", URL, "--repo-id", "org/m"], "no --repo-id or --revision"),
        (["--url", URL, "--mirror", "no-equals-sign"], "PREFIX=REPLACEMENT"),
        ([], "--repo-id and --revision are required (or --url)"),
    ],
)
def test_bad_arguments_are_refused(
    tmp_path: Path, mod: ModuleType, argv: list[str], reason: str
) -> None:
    old = sys.argv
    sys.argv = ["fetch_model.py", "--dest", str(tmp_path / "d"), *argv]
    try:
        with pytest.raises(SystemExit) as err:
            mod.main()
    finally:
        sys.argv = old
    assert reason in str(err.value)
    assert not (tmp_path / "d").exists()
