"""Issue 37: what the models stage runs on the controller for a dataset prompt set:
`specbench pins show --json` gives the dataset as pinned (its 'datasets'), `pins record
--dataset NAME=REVISION:SHA256` writes what the host fetched into the lock, and `pins forget
--dataset NAME` moves it on purpose (the fix the refusals name)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.cli import main
from bench.schema import EXPERIMENTS_DIR, lock_path_for

REV, REV2 = "a" * 40, "b" * 40
SHA = "c" * 64
NAME = "speed-bench-coding"


def dataset_experiment(tmp_path: Path, name: str, file: str) -> Path:
    """The seed host's categories experiment with a dataset prompt set, unresolved."""
    doc: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090-categories.yaml").read_text()
    )
    doc["workload"]["prompt_set"] = {
        "name": name,
        "dataset": {"hf_id": "org/prompts", "revision": "unresolved", "file": file,
                    "sha256": "unresolved"},
    }  # fmt: skip
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def exp_file(tmp_path: Path) -> Path:
    return dataset_experiment(tmp_path, NAME, "code.jsonl")


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(["pins", *args])
    except SystemExit as done:
        code = int(done.code or 0)
    else:
        code = 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_record_show_forget_a_dataset(exp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "show", str(exp_file), "--host", "h", "--json")
    assert code == 0
    assert json.loads(out)["datasets"] == {
        NAME: {"hf_id": "org/prompts", "revision": "unresolved", "file": "code.jsonl",
               "sha256": "unresolved"}
    }  # fmt: skip
    code, out, err = _cli(capsys, "record", str(exp_file), "--host", "h",
                          "--dataset", f"{NAME}={REV}:{SHA}")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["changed"] is True
    lock = yaml.safe_load(lock_path_for(exp_file).read_text())
    assert lock["datasets"][NAME]["revision"] == REV and lock["datasets"][NAME]["sha256"] == SHA
    code, out, _ = _cli(capsys, "show", str(exp_file), "--host", "h", "--json")
    assert json.loads(out)["datasets"][NAME]["revision"] == REV
    assert json.loads(out)["datasets"][NAME]["sha256"] == SHA
    # a moved dataset is refused, naming the fix that exists
    code, _, err = _cli(capsys, "record", str(exp_file), "--host", "h",
                        "--dataset", f"{NAME}={REV2}:{SHA}")  # fmt: skip
    assert code == 2 and f"pins forget <experiment> --dataset {NAME}" in err
    code, out, _ = _cli(capsys, "forget", str(exp_file), "--dataset", NAME)
    assert code == 0 and f"forgot datasets.{NAME}" in out
    assert "datasets" not in yaml.safe_load(lock_path_for(exp_file).read_text())


def test_a_malformed_dataset_value_is_refused(
    exp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(
        capsys, "record", str(exp_file), "--host", "h", "--dataset", f"{NAME}={REV}"
    )
    assert code == 2 and "--dataset" in err and "REVISION:SHA256" in err
    assert not lock_path_for(exp_file).exists()
    code, _, err = _cli(capsys, "forget", str(exp_file), "--dataset", NAME)
    assert code == 2  # no lock yet


@pytest.mark.parametrize("file", ["../../etc/passwd", "/etc/passwd", "a//b.jsonl", "./x.jsonl"])
def test_a_dataset_file_outside_its_dataset_is_refused_wherever_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    """Issue 47, class 6: main 101bc6e refused it in the matrix only; plan, `pins show --json`
    (what the Ansible models stage reads to fetch it) and `pins record` passed it on."""
    exp = dataset_experiment(tmp_path, NAME, file)
    rev = f"{NAME}={'a' * 40}:{'b' * 64}"
    for argv in (
        ["pins", "show", str(exp), "--host", "h", "--json"],
        ["pins", "record", str(exp), "--host", "h", "--dataset", rev],
        ["plan", str(exp)],
        ["matrix", str(exp), "--out", str(tmp_path / "run"), "--emulate"],
    ):
        try:
            main(argv)
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert "workload.prompt_set.dataset.file" in err, err
        assert "must be a path inside the dataset" in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "e.lock.yaml").exists()


def test_a_lock_whose_dataset_file_leaves_the_dataset_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exp_file: Path
) -> None:
    lock = tmp_path / "e.lock.yaml"
    lock.write_text(
        yaml.safe_dump({"experiment": "qwen38-27b-gptq-2x3090-categories", "datasets": {NAME: {
            "hf_id": "org/prompts", "revision": "a" * 40, "file": "../x", "sha256": "b" * 64}}})
    )  # fmt: skip
    code, _, err = _cli(capsys, "show", str(exp_file), "--host", "h", "--json")
    assert code == 2 and "datasets" in err and "must be a path inside the dataset" in err
