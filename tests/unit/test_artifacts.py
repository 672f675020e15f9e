"""Artifacts layout: SHA256SUMS in sha256sum format, resume decisions, scrubbing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_validity import make_payload

from bench.matrix import Artifacts, scrub


def test_sums_cover_every_file_and_verify_with_sha256sum(tmp_path: Path) -> None:
    arts = Artifacts(tmp_path)
    arts.write_model(arts.lock, make_payload())  # any schema model: only the bytes matter here
    arts.write_payload("cfg", 1, make_payload())
    arts.log("cfg").parent.mkdir(parents=True)
    arts.log("cfg").write_text("log\n")
    arts.write_sums()
    names = [line.split("  ", 1)[1] for line in arts.sums.read_text().splitlines()]
    assert names == ["experiment.lock.json", "logs/cfg.log", "payloads/cfg-c1.json"]
    ok = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True)
    assert ok.returncode == 0, ok.stdout
    arts.log("cfg").write_text("changed\n")
    assert arts.check_sums() == ["logs/cfg.log: sha256 differs"]


def test_finished_needs_every_level_valid_unless_expected_invalid(tmp_path: Path) -> None:
    arts = Artifacts(tmp_path)
    arts.write_payload("cfg", 1, make_payload())
    assert arts.finished("cfg", [1], accept_invalid=False)
    assert not arts.finished("cfg", [1, 2], accept_invalid=False)
    from bench.measure import judge

    arts.write_payload("bad", 1, judge(make_payload(accepted=0), speculative=True, findings=[]))
    assert not arts.finished("bad", [1], accept_invalid=False)
    assert arts.finished("bad", [1], accept_invalid=True)
    arts.payload("torn", 1).write_text("{")
    assert not arts.finished("torn", [1], accept_invalid=True)


def test_scrub_removes_the_token() -> None:
    assert scrub("token=hf_abcdefgh end", ["hf_abcdefgh"]) == "token=*** end"
