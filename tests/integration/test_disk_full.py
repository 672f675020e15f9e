"""Disk full during a matrix run (issue 38, fault 8): the run stops cleanly (exit 1, the file and
the cause named, the command that resumes; no traceback), every artifact written before is
intact, no file is half-written (the writing layer's atomic guarantee: bench/core/_files.py),
and once space is back ``--resume`` finishes the run with the earlier payloads kept.

The disk is a real tmpfs filled to the last byte where this process may mount one (root on
Linux); elsewhere every write into it fails as a full disk does (ENOSPC from ``os.write``,
after part of the bytes), which is what the writing layer sees either way."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from emulator_profiles import without_load_time

from bench.cli import main
from bench.matrix import Artifacts
from bench.schema import EXPERIMENTS_DIR, Payload, read_payload

FIRST, SECOND = "vllm-dflash", "vllm-mtp"  # in the experiment's order


class Disk:
    """A folder whose filesystem can be made full and freed again."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, mounted: bool) -> None:
        self.root = root
        self.mounted = mounted
        self.full = False
        if not mounted:
            real = os.write

            def write(fd: int, data: Any) -> int:
                if self.full and os.readlink(f"/proc/self/fd/{fd}").startswith(str(root)):
                    real(fd, bytes(data[:100]))  # part of it, as a filling disk takes
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return int(real(fd, data))

            monkeypatch.setattr(os, "write", write)

    def fill(self) -> None:
        self.full = True
        if self.mounted:
            with (self.root / "filler").open("wb", buffering=0) as fh:
                try:
                    while True:
                        fh.write(b"\0" * 65536)
                except OSError as err:
                    assert err.errno == errno.ENOSPC
                try:  # the last partial page
                    while True:
                        fh.write(b"\0" * 512)
                except OSError:
                    pass

    def free(self) -> None:
        self.full = False
        (self.root / "filler").unlink(missing_ok=True)


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    root = tmp_path / "disk"
    root.mkdir()
    mounted = (
        os.geteuid() == 0
        and shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(root)],
            capture_output=True,
        ).returncode
        == 0
    )
    try:
        yield Disk(root, monkeypatch, mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(root)], check=False)


def _experiment(tmp_path: Path) -> Path:
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    data["configurations"] = [c for c in data["configurations"] if c["name"] in (FIRST, SECOND)]
    for c in data["configurations"]:
        c["concurrency"] = [1]
        # the profile at its own speed without its emulated load time: a 16-token stream then
        # takes a few hundred ms, which a loaded machine does not read as one chunk (at time
        # scale 0.01 it took ~2 ms and CI once read it whole: an invalid payload, measured again)
        without_load_time(c, tmp_path)
    data["workload"].update(prompt_tokens=64, max_tokens=16, warmup=0, iterations=2)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _matrix(
    capsys: pytest.CaptureFixture[str], exp: Path, out: Path, *extra: str
) -> tuple[int, str]:
    argv = ["matrix", str(exp), "--out", str(out), "--launcher", "process"]
    try:
        main([*argv, "--no-progress", *extra])
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    return code, capsys.readouterr().err


def test_disk_full_stops_the_run_cleanly_and_resume_finishes_it(
    tmp_path: Path,
    disk: Disk,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exp = _experiment(tmp_path)
    out = disk.root / "out"
    arts = Artifacts(out)
    real_write = Artifacts.write_payload

    def write_payload(self: Artifacts, config: str, k: int, payload: Payload) -> Path:
        if config == SECOND and not disk.full and not disk_was_filled:
            disk_was_filled.append(True)
            disk.fill()  # the second configuration is measured; its payload meets a full disk
        return real_write(self, config, k, payload)

    disk_was_filled: list[bool] = []
    monkeypatch.setattr(Artifacts, "write_payload", write_payload)

    code, err = _matrix(capsys, exp, out)
    assert disk_was_filled, err
    assert code == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "No space left on device" in err and f"{SECOND}-c1.json" in err
    assert f"--resume --out {out}" in err

    # every artifact written before is whole; nothing half-written, no temporary left
    first = read_payload(arts.payload(FIRST, 1))
    assert first.evidence.validity.valid
    kept = arts.payload(FIRST, 1).read_bytes()
    assert arts.log(FIRST).is_file()
    assert not arts.payload(SECOND, 1).exists()
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    for p in out.rglob("*.json"):
        json.loads(p.read_text())  # each one parses: whole, old or new

    disk.free()
    code, err = _matrix(capsys, exp, out, "--resume")
    assert code == 0, err
    assert arts.payload(FIRST, 1).read_bytes() == kept  # kept, not measured again
    assert read_payload(arts.payload(SECOND, 1)).evidence.validity.valid
    assert arts.check_sums() == []


def test_a_report_on_a_full_disk_keeps_the_earlier_one(
    tmp_path: Path, disk: Disk, capsys: pytest.CaptureFixture[str]
) -> None:
    from report_factory import seed_matrix, write_artifacts

    run = write_artifacts(tmp_path / "run", seed_matrix(sweep=False))
    out = disk.root / "report"

    def report() -> tuple[int, str]:
        try:
            main(["report", str(run), "--out", str(out)])
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
        return code, capsys.readouterr().err

    code, err = report()
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    disk.fill()
    code, err = report()
    assert code == 1 and "cannot write: No space left on device" in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # whole, no temporary
    disk.free()
    code, err = report()
    assert code == 0, err
