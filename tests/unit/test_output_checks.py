"""Output paths checked before the first write, values checked before they are written (issue
42 class 2, issue 39 classes 2 and 3): publish into its own run or onto a folder, matrix into
a folder of other files, pins record of a value of the wrong kind. Each is refused with exit 2
naming the option and the path, and leaves nothing behind."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import yaml
from report_factory import seed_matrix, write_artifacts

from bench.cli import main
from bench.core import InputError
from bench.engines import load_experiment
from bench.matrix import MatrixOptions, run_matrix
from bench.schema import EXPERIMENTS_DIR, lock_path_for, read_lock

pytestmark = pytest.mark.unit

SEED = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
DIGEST = "sha256:" + "a" * 64
COMMIT = "1" * 40


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``specbench ARGV`` in this process: the exit code and stderr."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err


def _tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


# -- publish ---------------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real run's artifacts; the report rendering is stubbed (its templates are tested
    elsewhere): these tests are about where publish writes."""

    def render(artifacts: Path, out: Path) -> Path:
        (out / "REPORT.md").write_text("# report\n")
        return out / "REPORT.md"

    monkeypatch.setattr("bench.report._bundle.render_report", render)
    return write_artifacts(tmp_path / "run", seed_matrix(simulated=False, sweep=False))


def test_publish_into_its_own_run_is_refused(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _tree(run)
    code, err = _cli(capsys, "publish", str(run), "--out", str(run / "bundle"))
    assert code == 2 and f"--out: {run / 'bundle'} is inside the input {run}" in err
    assert _tree(run) == before


def test_publish_tarball_onto_a_folder_is_refused_before_the_bundle_is_built(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "b.tar.gz").mkdir()
    code, err = _cli(capsys, "publish", str(run), "--out", str(tmp_path / "b"), "--tarball")
    assert code == 2 and f"--tarball: {tmp_path / 'b.tar.gz'} is a folder" in err
    assert not (tmp_path / "b").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.tar.gz", "run"]


def test_a_failed_publish_leaves_nothing_behind(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while the tarball is written: exit 1 naming the file and the cause, and
    neither the bundle, nor a part of the tarball, nor the folders made for them remain."""
    real = os.write

    def write(fd: int, data: bytes | memoryview) -> int:
        if "b.tar.gz" in os.readlink(f"/proc/self/fd/{fd}"):
            real(fd, bytes(data[:10]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    out = tmp_path / "new" / "b"
    code, err = _cli(capsys, "publish", str(run), "--out", str(out), "--tarball")
    assert code == 1 and "b.tar.gz: cannot write: No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # not even new/


def test_publish_still_writes_the_bundle_and_its_tarball(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _cli(capsys, "publish", str(run), "--out", str(tmp_path / "b"), "--tarball")
    assert code == 0, err
    assert (tmp_path / "b" / "SHA256SUMS").is_file() and (tmp_path / "b.tar.gz").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# -- matrix ----------------------------------------------------------------------------------


def test_matrix_refuses_a_folder_of_other_files_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("not a run")
    opts = MatrixOptions(out=out, launcher="process", emulate=True, show_progress=False)
    exp = load_experiment(EXPERIMENTS_DIR / "tiny-vllm-cpu.yaml")

    class NoServers:
        def start(self, spec: object, log_path: Path) -> object:
            raise AssertionError("started a server")

    with pytest.raises(InputError) as caught:
        run_matrix(exp, opts, launcher=NoServers(), hardware=None)  # type: ignore[arg-type]
    assert caught.value.where == "--out" and "thesis.tex" in caught.value.reason
    assert _tree(out) == ["thesis.tex"]  # no lock, no SHA256SUMS vouching for the thesis


def test_resume_refuses_a_run_folder_holding_a_link(tmp_path: Path) -> None:
    """A link planted in a run folder (a log pointing at another file) is neither read into
    the run nor written through on --resume."""
    from report_factory import HARDWARE

    from bench.core import RunError

    class FailingServers:
        def start(self, spec: object, log_path: Path) -> object:
            raise RunError("no server here")

    exp = load_experiment(EXPERIMENTS_DIR / "tiny-vllm-cpu.yaml")
    opts = MatrixOptions(out=tmp_path / "out", launcher="process", show_progress=False)
    run_matrix(exp, opts, launcher=FailingServers(), hardware=HARDWARE)  # type: ignore[arg-type]
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    name = exp.configurations[0].name
    (opts.out / "logs").mkdir(exist_ok=True)
    (opts.out / "logs" / f"{name}.log").symlink_to(victim)
    resume = opts.model_copy(update={"resume": True})
    with pytest.raises(InputError, match="is a symbolic link") as caught:
        run_matrix(exp, resume, launcher=FailingServers(), hardware=HARDWARE)  # type: ignore[arg-type]
    assert caught.value.where == "--out"
    assert victim.read_text() == "precious"


def test_publish_refuses_a_link_in_the_run(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for publication")
    (run / "logs" / "notes.log").symlink_to(secret)
    code, err = _cli(capsys, "publish", str(run), "--out", str(tmp_path / "b"))
    assert code == 2 and "notes.log: refusing to publish: a symbolic link" in err
    assert not (tmp_path / "b").exists()


# -- pins record -----------------------------------------------------------------------------


@pytest.fixture
def exp_file(tmp_path: Path) -> Path:
    dest = tmp_path / "exps" / "seed.yaml"
    dest.parent.mkdir()
    dest.write_text(SEED.read_text())
    return dest


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--image-digest", f"vllm={COMMIT}", "--image-digest vllm"),  # exit 0 before
        ("--image-id", f"sglang={COMMIT}", "--image-id sglang"),
        ("--model-revision", f"target={DIGEST}", "--model-revision target"),  # internal error
    ],
)
def test_pins_record_refuses_a_value_of_the_wrong_kind_and_writes_nothing(
    exp_file: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
    named: str,
) -> None:
    code, err = _cli(capsys, "pins", "record", str(exp_file), "--host", "h", option, value)
    assert code == 2 and f"{named}: " in err
    assert _tree(exp_file.parent) == ["seed.yaml"]  # no lock, no guard file


def test_a_refused_record_with_a_named_lock_creates_no_folder(
    exp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / "locks" / "seed.lock.yaml"
    argv = ["pins", "record", str(exp_file), "--host", "h", "--lock", str(lock)]
    code, err = _cli(capsys, *argv, "--image-digest", f"vllm={COMMIT}")
    assert code == 2 and not (tmp_path / "locks").exists()
    code, err = _cli(capsys, *argv, "--image-digest", f"vllm={DIGEST}")
    assert code == 2 and f"--lock: no such folder: {lock.parent}" in err
    assert not (tmp_path / "locks").exists()


def test_every_lock_record_writes_reads_back(
    exp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _cli(
        capsys, "pins", "record", str(exp_file), "--host", "h",
        "--image-digest", f"vllm={DIGEST}", "--model-revision", f"target={COMMIT}",
    )  # fmt: skip
    assert code == 0, err
    lock = read_lock(lock_path_for(exp_file), "qwen38-27b-gptq-2x3090")
    assert lock.images["vllm"].digest == DIGEST and lock.models["target"].revision == COMMIT
    assert _tree(exp_file.parent) == ["seed.lock.yaml", "seed.yaml"]
    code, err = _cli(capsys, "pins", "show", str(exp_file), "--host", "h", "--json")
    assert code == 0 and json.loads(capsys.readouterr().out or "{}") is not None


def test_pins_forget_needs_a_named_lock_to_exist(
    exp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = exp_file.parent / "typo.lock.yaml"
    code, err = _cli(capsys, "pins", "forget", str(exp_file), "--model", "target",
                     "--lock", str(missing))  # fmt: skip
    assert code == 2 and f"--lock: no such file: {missing}" in err
    assert yaml.safe_load(exp_file.read_text())["name"]
    assert _tree(exp_file.parent) == ["seed.yaml"]


def test_compare_does_not_write_into_a_run(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = write_artifacts(tmp_path / "other", seed_matrix(simulated=False, sweep=False))
    before = _tree(run)
    code, err = _cli(capsys, "compare", str(run), str(other), "--out", str(run / "cmp"))
    assert code == 2 and f"--out: {run / 'cmp'} is inside the input {run}" in err
    assert _tree(run) == before


def test_demo_never_deletes_a_folder_it_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "precious.csv").write_text("mine")
    code, err = _cli(capsys, "demo", "--out", str(tmp_path), "--no-progress")
    assert code == 2 and f"--out: {tmp_path} holds files that are not an earlier demo's" in err
    assert _tree(tmp_path) == ["artifacts", "artifacts/precious.csv"]


def test_tiny_model_never_replaces_a_folder_it_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "draft").mkdir()
    (tmp_path / "draft" / "weights.bin").write_bytes(b"someone's model")
    code, err = _cli(capsys, "tiny-model", str(tmp_path))
    assert code == 2 and f"{tmp_path / 'draft'}: exists and is not a model" in err
    assert _tree(tmp_path) == ["draft", "draft/weights.bin"]  # refused before any model


def test_report_is_not_written_into_the_run_folder_itself(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _tree(run)
    code, err = _cli(capsys, "report", str(run), "--out", str(run))
    assert code == 2 and f"--out: {run} is the input {run}" in err
    assert _tree(run) == before


def test_a_named_reference_must_exist(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = run.parent / "typo"
    code, err = _cli(capsys, "report", str(run), "--reference", str(missing))
    assert code == 2 and f"--reference: no such folder: {missing}" in err
    assert not (run / "report").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["probe", "bandwidth"],
        ["telemetry-sample", "--seconds", "0.1"],
        ["hardware", "--allow-no-gpu", "--dump", "{tmp}/dump.json"],
    ],
)
def test_an_output_option_is_checked_before_anything_is_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    (tmp_path / "adir").mkdir()
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, err = _cli(capsys, *args, "--out", str(tmp_path / "adir"))
    assert code == 2 and f"--out: {tmp_path / 'adir'} is a folder, not a file" in err
    assert _tree(tmp_path) == ["adir"]


def test_a_full_disk_while_the_run_is_copied_is_named_and_cleaned_up(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    real = shutil.copy2

    def copy2(src: str, dst: str) -> object:
        if src.endswith("hardware.json"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst)

    monkeypatch.setattr(shutil, "copy2", copy2)
    code, err = _cli(capsys, "publish", str(run), "--out", str(tmp_path / "new" / "b"))
    assert code == 1 and "hardware.json: cannot write: No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
