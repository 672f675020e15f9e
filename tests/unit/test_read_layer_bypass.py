"""Readers that bypassed the reading layer (issue 47, class 1), each now through it: a file that
is binary, a folder, a FIFO or nested past the bound is exit 2 naming the file (or, for a
command whose contract is to list problems, a listed problem); never an internal error, a
RecursionError or a hang. And the inputs that were read as something else: a named pins lock
that is missing or empty, an empty host, a model folder '..'."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from report_factory import seed_matrix, write_artifacts

from bench.cli import main
from bench.core import InputError, read_text, sha256_file
from bench.emulator.profile import ProfileError, load_profile
from bench.matrix import Artifacts
from bench.matrix._checkpoint_files import read_config_json
from bench.measure import find_cached_tokenizer
from bench.schema import EXPERIMENTS_DIR

pytestmark = pytest.mark.unit

DEEP = "[" * 5000 + "]" * 5000


def cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    text = out.getvalue() + err.getvalue()
    assert "internal error" not in text and "Traceback" not in text, text
    return code, text


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "payload.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_text(fifo)  # main 101bc6e: read_bytes() on a FIFO waits for a writer forever
    with pytest.raises(InputError, match="not a regular file"):
        sha256_file(fifo)


def test_a_binary_sha256sums_is_exit_2_in_report(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", seed_matrix(sweep=False))
    (art / "SHA256SUMS").write_bytes(b"\xff\xfe binary\x00")
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 2 and "SHA256SUMS" in text and "not UTF-8" in text


def test_a_malformed_sha256sums_line_is_named(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", seed_matrix(sweep=False))
    with (art / "SHA256SUMS").open("a") as fh:
        fh.write("not a checksum line\n")
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 2 and "SHA256SUMS: line" in text and "not '<sha256>  <file>'" in text


def test_a_binary_sha256sums_on_resume_is_exit_2_naming_it(tmp_path: Path) -> None:
    arts = Artifacts(tmp_path)
    (tmp_path / "SHA256SUMS").write_bytes(b"\x80\x81")
    with pytest.raises(InputError) as err:
        arts.check_sums()
    assert err.value.where.endswith("SHA256SUMS")


def test_a_binary_report_in_a_bundle_is_a_listed_problem(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "REPORT.md").write_bytes(b"\xff\xfe\x00 not text")
    sums = f"{sha256_file(bundle / 'REPORT.md')}  REPORT.md\n"
    (bundle / "SHA256SUMS").write_text(sums)
    code, text = cli("verify-bundle", str(bundle))
    assert code == 1 and "FAIL REPORT.md: cannot read the REPORT.md: not UTF-8" in text


def test_a_deep_emulator_profile_is_a_profile_error(tmp_path: Path) -> None:
    prof = tmp_path / "deep.yaml"
    prof.write_text("a: " + DEEP + "\n")
    with pytest.raises(ProfileError, match="nested deeper than 64"):
        load_profile(prof)  # main 101bc6e: RecursionError out of yaml.safe_load
    assert load_profile("vllm-dflash").engine == "vllm"  # a shipped one still reads


def test_a_deep_checkpoint_config_is_an_input_error(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text('{"a": ' + DEEP + "}")
    with pytest.raises(InputError, match="nested deeper than 64"):
        read_config_json(cfg)  # main 101bc6e: RecursionError out of json.loads


def test_the_suite_record_named_by_the_environment_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.matrix._run import _copy_suite_record

    exp = yaml.safe_load((EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text())
    from bench.engines import parse_experiment

    experiment = parse_experiment(exp, "seed")
    record = tmp_path / "suite.json"
    record.write_bytes(b"\xff\xfe")
    monkeypatch.setenv("SPECBENCH_SGLANG_SUITE_RECORD", str(record))
    arts = Artifacts(tmp_path / "run")
    with pytest.raises(InputError) as err:
        _copy_suite_record(experiment, arts)  # main 101bc6e: UnicodeDecodeError
    assert "SPECBENCH_SGLANG_SUITE_RECORD" in err.value.where
    record.unlink()
    record.mkdir()  # a folder: main 101bc6e skipped it silently
    with pytest.raises(InputError, match="not a regular file"):
        _copy_suite_record(experiment, arts)
    assert not (tmp_path / "run" / "upstream").exists()


def test_a_hf_cache_ref_that_is_not_a_commit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    refs = tmp_path / "models--o--m" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("../../../../etc\n")
    with pytest.raises(InputError, match="not a commit"):
        find_cached_tokenizer("o/m")
    (refs / "main").write_bytes(b"\xff" * 40)
    with pytest.raises(InputError, match="not UTF-8"):
        find_cached_tokenizer("o/m")
    (refs / "main").write_text("a" * 40 + "\n")
    assert find_cached_tokenizer("o/m") is None  # a commit, not in the cache: not there


def test_a_hardware_json_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", seed_matrix(sweep=False))
    (art / "hardware.json").unlink()
    (art / "hardware.json").mkdir()
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 2 and "hardware.json" in text and "not a regular file" in text


@pytest.fixture
def exp_file(tmp_path: Path) -> Path:
    path = tmp_path / "exp.yaml"
    shutil.copy(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml", path)
    return path


def test_a_named_lock_that_is_missing_or_empty_is_refused(exp_file: Path) -> None:
    missing = exp_file.parent / "typo.lock.yaml"
    code, text = cli("pins", "show", str(exp_file), "--host", "h", "--lock", str(missing))
    assert code == 2 and "--lock: no such file" in text  # main 101bc6e: exit 0, all unpinned
    empty = exp_file.parent / "empty.lock.yaml"
    empty.write_text("")
    code, text = cli("pins", "show", str(exp_file), "--host", "h", "--lock", str(empty))
    assert code == 2 and "an empty file, not a pins lock" in text
    code, text = cli("pins", "record", str(exp_file), "--host", "h", "--lock", str(empty))
    assert code == 2 and "an empty file, not a pins lock" in text
    # the first provision: the role says the lock may not exist yet
    code, text = cli(
        "pins", "show", str(exp_file), "--host", "h", "--lock", str(missing),
        "--lock-may-be-new", "--json",
    )  # fmt: skip
    assert code == 0 and json.loads(text)["unpinned"]


@pytest.mark.parametrize("host", ["", " ", "a b", "gpu1\nimages:", "x" * 300])
def test_a_host_that_names_no_host_is_refused(exp_file: Path, host: str) -> None:
    lock = exp_file.parent / "exp.lock.yaml"
    args = ("--model-revision", "target=" + "a" * 40)
    code, text = cli("pins", "record", str(exp_file), "--host", host, *args)
    assert code == 2 and "--host" in text and "not a host name" in text
    assert not lock.exists()
    code, text = cli("pins", "show", str(exp_file), "--host", host)
    assert code == 2 and "not a host name" in text


@pytest.mark.parametrize("path", ["/models/..", "/models/."])
def test_a_model_path_that_is_not_a_folder_below_models_is_refused(
    exp_file: Path, path: str
) -> None:
    doc = yaml.safe_load(exp_file.read_text())
    doc["models"]["target"]["path"] = path
    exp_file.write_text(yaml.safe_dump(doc))
    code, text = cli("plan", str(exp_file))
    assert code == 2 and "models.target.path" in text and "inside /models" in text
