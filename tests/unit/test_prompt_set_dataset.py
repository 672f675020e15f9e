"""Issue 37: a dataset prompt set (``workload.prompt_set.dataset``) is read from where the Ansible
models stage fetched it, ``<model cache>/datasets/<name>/<file>``, and checked against its
sha256 pin (the experiment's, or the pins lock's once applied). Missing, unpinned or changed, it
is exit 2 naming the field, the path and the fix; the matrix refuses it before it writes
anything, and `specbench plan` counts its categories once it is there."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.core import InputError
from bench.engines import load_pinned_experiment
from bench.matrix import MatrixOptions, render_plan, run_matrix
from bench.matrix._plan import categories
from bench.measure import experiment_prompt_set
from bench.schema import EXPERIMENTS_DIR, PinsLock, Resolved, lock_path_for, record_pins, write_lock

NAME = "speed-bench-coding"
FILE = "data/code.jsonl"
REV = "a" * 40
TEXT = (
    '{"category": "code", "prompt": "Write Python."}\n'
    '{"category": "prose", "prompt": "A poem."}\n'
    '{"category": "code", "prompt": "Fix this loop."}\n'
)
SHA = hashlib.sha256(TEXT.encode()).hexdigest()


def _experiment_file(tmp_path: Path, sha256: str = "unresolved") -> Path:
    doc: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090-categories.yaml").read_text()
    )
    doc["workload"]["prompt_set"] = {
        "name": NAME,
        "dataset": {"hf_id": "org/prompts", "revision": REV, "file": FILE, "sha256": sha256},
    }
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _fetched(cache: Path, text: str = TEXT) -> Path:
    f = cache / "datasets" / NAME / FILE
    f.parent.mkdir(parents=True)
    f.write_text(text, encoding="utf-8")
    return f


def _with_lock(path: Path) -> Any:
    """The experiment with the pins lock the models stage writes (its sha256 recorded)."""
    exp = load_pinned_experiment(path, "h").experiment
    lock = record_pins(exp, PinsLock(experiment=exp.name), "h",
                       Resolved(datasets={NAME: (REV, SHA)}), lock_path_for(path))  # fmt: skip
    write_lock(lock_path_for(path), lock)
    return load_pinned_experiment(path, "h").experiment


def test_a_fetched_dataset_is_read_and_checked_against_the_locks_sha256(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _fetched(cache)
    exp = _with_lock(_experiment_file(tmp_path))
    ps = experiment_prompt_set(exp.workload.prompt_set, cache)
    assert ps is not None and ps.categories() == ["code", "prose"]
    assert ps.sha256 == SHA and ps.record().source == f"org/prompts@{REV} {FILE}"
    # the experiment's own pin is enough too (no lock)
    (tmp_path / "fixed").mkdir()
    fixed = load_pinned_experiment(_experiment_file(tmp_path / "fixed", SHA), "h").experiment
    assert experiment_prompt_set(fixed.workload.prompt_set, cache) is not None


def test_a_dataset_not_fetched_names_the_field_and_the_path(tmp_path: Path) -> None:
    exp = _with_lock(_experiment_file(tmp_path))
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as err:
        experiment_prompt_set(exp.workload.prompt_set, cache)
    assert err.value.where == "workload.prompt_set.dataset"
    assert str(cache / "datasets" / NAME / FILE) in err.value.reason
    assert "make provision" in err.value.reason


def test_an_unpinned_sha256_sends_you_to_the_models_stage(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _fetched(cache)
    exp = load_pinned_experiment(_experiment_file(tmp_path), "h").experiment  # no lock
    with pytest.raises(InputError) as err:
        experiment_prompt_set(exp.workload.prompt_set, cache)
    assert err.value.where == "workload.prompt_set.dataset.sha256"
    assert "make provision" in err.value.reason


def test_a_changed_file_is_refused_naming_both_hashes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    f = _fetched(cache, TEXT + '{"category": "code", "prompt": "x"}\n')
    exp = _with_lock(_experiment_file(tmp_path))
    with pytest.raises(InputError) as err:
        experiment_prompt_set(exp.workload.prompt_set, cache)
    have = hashlib.sha256(f.read_bytes()).hexdigest()
    assert err.value.where == "workload.prompt_set.dataset.sha256"
    assert have in err.value.reason and SHA in err.value.reason


def test_the_matrix_refuses_a_missing_dataset_before_writing_anything(tmp_path: Path) -> None:
    exp = _with_lock(_experiment_file(tmp_path))
    out = tmp_path / "out"
    opts = MatrixOptions(out=out, launcher="process", emulate=True, show_progress=False,
                         model_cache=str(tmp_path / "cache"))  # fmt: skip
    with pytest.raises(InputError) as err:
        run_matrix(exp, opts)
    assert err.value.where == "workload.prompt_set.dataset"
    assert not out.exists()


def test_plan_counts_the_categories_once_the_dataset_is_fetched(tmp_path: Path) -> None:
    exp = _with_lock(_experiment_file(tmp_path))
    cache = tmp_path / "cache"
    assert categories(exp, str(cache)) == []
    before = render_plan(exp, model_cache=str(cache))
    assert f"read from `{cache / 'datasets' / NAME / FILE}`" in before  # a path, in code
    assert "until the models stage" in before
    _fetched(cache)
    assert categories(exp, str(cache)) == ["code", "prose"]
    assert "2 categories (code, prose)" in render_plan(exp, model_cache=str(cache))
