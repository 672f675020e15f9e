"""A real run whose models are not on the host is refused before anything is written
(bench/matrix/_models_present.py): on the H100, a carry without the tiny models started five
servers that each exited at once, and left two run folders behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from bench.core import InputError
from bench.engines import load_experiment
from bench.matrix._models_present import check_models_present
from bench.tinymodel import make_tiny_models

pytestmark = pytest.mark.unit

EXP = "bench/experiments/tiny-vllm-cpu.yaml"


def test_a_missing_model_folder_is_exit_2_naming_it_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache, out = tmp_path / "models", tmp_path / "out"
    cache.mkdir()
    (cache / "target").mkdir()  # the target is there, the draft is not
    argv = ["matrix", EXP, "--out", str(out), "--launcher", "docker", "--allow-unpinned",
            "--model-cache", str(cache), "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--model-cache" in err and f"{cache}/draft (models.draft, for partial-draft)" in err
    assert f"{cache}/target" not in err and "Traceback" not in err
    assert not out.exists()


def test_every_model_present_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = make_tiny_models(tmp_path / "models", seed=0)
    exp = load_experiment(EXP)
    check_models_present(exp, exp.configurations, str(made.target.path.parent), False)
    # --only the configurations whose models are there: a draft missing elsewhere is no matter
    (tmp_path / "only-target" / "target").mkdir(parents=True)
    only = [c for c in exp.configurations if c.name in ("baseline", "self-draft", "ngram")]
    check_models_present(exp, only, str(tmp_path / "only-target"), False)
    with pytest.raises(InputError, match="--local-engine"):  # /models/... is not on this host
        check_models_present(exp, exp.configurations, str(made.target.path.parent), True)
