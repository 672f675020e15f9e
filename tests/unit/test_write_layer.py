"""The writing layer (bench/core/_files.py, issue 42 "one writing layer"): writes and deletes
stay inside the folder given (a link planted inside is never followed), every write is atomic,
a failed write (a full disk) leaves the old file and no temporary, and the error names the
file and the cause."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core import (
    InputError,
    WriteError,
    check_new_output,
    made_dirs,
    remove_file,
    write_text,
)

pytestmark = pytest.mark.unit


def _outside(tmp_path: Path) -> tuple[Path, Path]:
    out, victim = tmp_path / "out", tmp_path / "victim"
    out.mkdir()
    victim.mkdir()
    (victim / "mine.json").write_text("precious")
    return out, victim


def test_a_linked_folder_inside_the_output_is_not_written_through(tmp_path: Path) -> None:
    out, victim = _outside(tmp_path)
    (out / "payloads").symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link inside the output folder"):
        write_text(out / "payloads" / "mine.json", "overwritten", root=out)
    with pytest.raises(InputError, match="symbolic link"):
        write_text(out / "payloads" / "new.json", "x", root=out)
    assert (victim / "mine.json").read_text() == "precious"
    assert sorted(p.name for p in victim.iterdir()) == ["mine.json"]


def test_a_linked_file_is_replaced_and_removed_itself_never_its_target(tmp_path: Path) -> None:
    out, victim = _outside(tmp_path)
    (out / "a.svg").symlink_to(victim / "mine.json")
    write_text(out / "a.svg", "<svg/>", root=out)
    assert not (out / "a.svg").is_symlink() and (out / "a.svg").read_text() == "<svg/>"
    (out / "b.svg").symlink_to(victim / "mine.json")
    assert remove_file(out / "b.svg", root=out)
    (out / "logs").symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"):
        remove_file(out / "logs" / "mine.json", root=out)
    assert (victim / "mine.json").read_text() == "precious"


@pytest.mark.parametrize("name", ["../victim/mine.json", "/abs/mine.json", "a/../../x"])
def test_a_path_that_leaves_the_output_is_refused(tmp_path: Path, name: str) -> None:
    out, victim = _outside(tmp_path)
    with pytest.raises(InputError):
        write_text(out / name, "x", root=out)
    with pytest.raises(InputError):
        remove_file(out / name, root=out)
    assert (victim / "mine.json").read_text() == "precious"


def _disk_full_after(monkeypatch: pytest.MonkeyPatch, nbytes: int) -> None:
    """os.write takes ``nbytes`` bytes in all, then fails as a full disk does."""
    real = os.write
    left = [nbytes]

    def write(fd: int, data: bytes | memoryview) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, bytes(data[: left[0]]))
        left[0] -= n
        return n

    monkeypatch.setattr(os, "write", write)


def test_disk_full_mid_write_keeps_the_old_file_whole_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    write_text(out / "payloads" / "a.json", "old and whole", root=out)
    _disk_full_after(monkeypatch, 4)
    with pytest.raises(WriteError) as caught:
        write_text(out / "payloads" / "a.json", "new" * 1000, root=out)
    assert caught.value.full and caught.value.exit_code == 1
    assert "a.json: cannot write: No space left on device" in str(caught.value)
    assert (out / "payloads" / "a.json").read_text() == "old and whole"
    assert [p.name for p in (out / "payloads").iterdir()] == ["a.json"]


def test_an_output_that_is_an_input_or_holds_files_is_refused_before_writing(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    (run / "payloads").mkdir(parents=True)
    with pytest.raises(InputError, match="inside the input"):
        check_new_output(run / "bundle", "--out", inputs=[run])
    with pytest.raises(InputError, match="not empty"):
        check_new_output(run, "--out")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        check_new_output(tmp_path / "file", "--out")
    (tmp_path / "empty").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "empty")
    with pytest.raises(InputError, match="symbolic link"):
        check_new_output(tmp_path / "linked", "--out")  # publish would rmdir it, then fail
    assert not (run / "bundle").exists()


def test_made_dirs_removes_what_it_made_on_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), made_dirs(tmp_path / "a" / "b" / "c") as made:
        write_text(made / "x.json", "{}")
        raise RuntimeError("failed later")
    assert list(tmp_path.iterdir()) == []


def test_a_report_removes_only_the_stale_charts_it_drew(tmp_path: Path) -> None:
    """Stale charts go (issue 42 class 1: only plain names inside --out); a file of a chart's
    name that the user put in the folder, or that a hostile .charts.json lists, stays."""
    import hashlib
    import json

    from bench.report._charts import MANIFEST, render_charts

    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.png").write_bytes(b"the user's figure")
    (out / "decode.png").write_bytes(b"the user's other figure")  # a pre-manifest chart name
    ours = b"<svg>an earlier render</svg>"
    (out / "old.svg").write_bytes(ours)
    (out / MANIFEST).write_text(
        json.dumps(
            {
                "thesis.png": {"sha256": "0" * 64},
                "old.svg": {"sha256": hashlib.sha256(ours).hexdigest()},
            }
        )
    )
    render_charts(out, [], [], simulated=False)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "decode.png", "thesis.png"]


def test_a_live_log_is_never_opened_through_a_link(tmp_path: Path) -> None:
    from bench.core import open_stream

    out, victim = _outside(tmp_path)
    (out / "server.log").symlink_to(victim / "mine.json")
    with pytest.raises(InputError, match="symbolic link"):
        open_stream(out / "server.log")
    assert (victim / "mine.json").read_text() == "precious"
    with open_stream(out / "logs" / "new.log") as fh:
        fh.write(b"line\n")
    assert (out / "logs" / "new.log").read_bytes() == b"line\n"


_SEGMENT = st.sampled_from(["a", "b", "..", ".", "", "in", "out", "link_dir", "link_file", "x\x00"])


@settings(derandomize=True, deadline=None, max_examples=150, database=None)
@given(
    segments=st.lists(_SEGMENT, min_size=1, max_size=5),
    absolute=st.booleans(),
    delete=st.booleans(),
)
def test_no_generated_path_writes_or_deletes_outside_the_output(
    segments: list[str], absolute: bool, delete: bool
) -> None:
    """Whatever name a file (a manifest, a configuration name) makes up, with links planted in
    the output: the write or delete lands inside it or is refused with exit 2 or 1, and
    nothing outside changes."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        box = Path(tmp)
        out, victim = _outside(box)
        (out / "in").mkdir()
        (out / "link_dir").symlink_to(victim)
        (out / "link_file").symlink_to(victim / "mine.json")
        rel = "/".join(segments)
        path = Path("/" + rel) if absolute else out / rel

        def outside() -> dict[str, bytes]:
            return {
                str(p): p.read_bytes()
                for p in box.rglob("*")
                if out not in p.parents and p.is_file() and not p.is_symlink()
            }

        before = outside()
        existed = os.path.lexists("/" + rel)
        try:
            if delete:
                remove_file(path, root=out)
            else:
                write_text(path, "written", root=out)
        except (InputError, WriteError):
            pass
        assert outside() == before
        assert os.path.lexists("/" + rel) == existed  # nothing made outside, absolute or not
