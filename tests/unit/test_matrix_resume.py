"""Resume with the settings the run began with (issue 39 class 7), one matrix per folder (issue
38 fault 9), and payloads edited by hand between runs never kept (issue 38 fault 10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_validity import make_payload

from bench.core import InputError
from bench.engines import load_experiment
from bench.matrix import Artifacts, MatrixOptions, run_matrix
from bench.matrix._resume import check_resume, hold_folder, interrupted_message, resume_command
from bench.schema import (
    EXPERIMENTS_DIR,
    ConfigurationStatus,
    Experiment,
    RunLock,
    RunOverrides,
    RunStatus,
)


def started(tmp_path: Path, **overrides: float) -> tuple[Experiment, Path]:
    """An out folder holding the lock of an emulated run begun with ``overrides``."""
    exp = load_experiment(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml")
    out = tmp_path / "out"
    out.mkdir()
    lock = RunLock(
        run_id="r1", created_at="2026-12-06T00:00:00Z", simulated=True, launcher="process",
        overrides=RunOverrides(**overrides), prompt_seed=1, experiment=exp,  # type: ignore[arg-type]
    )  # fmt: skip
    Artifacts(out).write_model(Artifacts(out).lock, lock)
    return exp, out


def test_a_resume_with_other_iterations_is_refused_before_anything_runs(tmp_path: Path) -> None:
    exp, out = started(tmp_path, warmup=1, iterations=2, time_scale=0.01)
    before = sorted(p.name for p in out.iterdir())
    opts = MatrixOptions(out=out, launcher="process", resume=True, iterations=3, warmup=1)
    with pytest.raises(InputError) as err:
        run_matrix(exp, opts)
    msg = err.value.reason
    assert err.value.where == "--resume"
    assert "--iterations 3, but the run was started with --iterations 2" in msg
    assert "Resume with --launcher process --warmup 1 --iterations 2 --time-scale 0.01" in msg
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written


def test_a_resume_that_leaves_an_override_out_takes_the_locks() -> None:
    exp = load_experiment(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml")
    lock = RunLock(
        run_id="r1", created_at="x", simulated=True, launcher="process", prompt_seed=1,
        overrides=RunOverrides(iterations=2, time_scale=0.5), experiment=exp,
    )  # fmt: skip
    opts = MatrixOptions(out=Path("o"), launcher="process", resume=True)
    got = check_resume(lock, exp, opts)
    assert (got.warmup, got.iterations, got.time_scale) == (None, 2, 0.5)
    # the experiment's own value, given explicitly, is the same workload
    same = opts.model_copy(update={"warmup": exp.workload.warmup})
    assert check_resume(lock, exp, same).warmup == exp.workload.warmup
    other = opts.model_copy(update={"warmup": exp.workload.warmup + 1, "launcher": "docker"})
    with pytest.raises(InputError) as err:
        check_resume(lock, exp, other)
    assert f"was started without --warmup (the experiment's, {exp.workload.warmup})" in str(
        err.value
    )
    assert "--launcher docker, but the run was started with --launcher process" in str(err.value)


def test_a_second_matrix_on_a_held_folder_is_refused(tmp_path: Path) -> None:
    exp, out = started(tmp_path)
    opts = MatrixOptions(out=out, launcher="process", resume=True)
    with hold_folder(out), pytest.raises(InputError, match="being written by another specbench"):
        run_matrix(exp, opts)
    with hold_folder(out):  # released when the holder ends
        pass


def test_the_interrupted_message_says_what_was_kept_and_how_to_resume(tmp_path: Path) -> None:
    status = RunStatus(
        run_id="r1", simulated=True, written_at="x",
        configurations={
            "a": ConfigurationStatus(status="done", payloads=["a-c1.json", "a-c2.json"]),
            "b": ConfigurationStatus(status="interrupted", payloads=["b-c1.json"]),
        },
    )  # fmt: skip
    msg = interrupted_message(status, ["a", "b", "c"], tmp_path)
    assert f"Kept in {tmp_path}: a (2 payload(s))" in msg
    assert "b stopped mid-way (its 1 finished level(s) kept" in msg and "not started: c" in msg
    assert msg.endswith("--resume")
    argv = ["matrix", "e.yaml", "--out", "o x", "--iterations", "2"]
    assert resume_command(Path("o x"), argv) == (
        "specbench matrix e.yaml --out 'o x' --iterations 2 --resume"
    )


def test_a_payload_edited_after_the_run_is_not_kept(tmp_path: Path) -> None:
    arts = Artifacts(tmp_path)
    arts.write_payload("cfg", 1, make_payload())
    arts.write_payload("cfg", 2, make_payload())
    assert arts.finished("cfg", [1, 2], accept_invalid=False)
    assert arts.distrusted("cfg", [1, 2]) == []
    # edited by hand: still a valid payload, but not the bytes the run wrote
    path = arts.payload("cfg", 2)
    data = json.loads(path.read_text())
    data["tokSOut"] *= 2
    path.write_text(json.dumps(data, indent=2))
    assert not arts.finished("cfg", [1, 2], accept_invalid=False)
    assert arts.finished("cfg", [1], accept_invalid=False)
    (why,) = arts.distrusted("cfg", [1, 2])
    assert why.startswith("payloads/cfg-c2.json differs from its SHA256SUMS entry")
    # truncated, or added by hand without the run vouching for it
    path.write_text(path.read_text()[:50])
    assert not arts.finished("cfg", [2], accept_invalid=True)
    arts.payload("other", 1).write_text(arts.payload("cfg", 1).read_text())
    assert not arts.finished("other", [1], accept_invalid=False)
    assert "is not in SHA256SUMS" in arts.distrusted("other", [1])[0]
