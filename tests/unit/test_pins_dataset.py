"""Issue 37: a dataset prompt set is pinned like weights: the pins lock records its commit and
its file's sha256 where the experiment leaves them 'unresolved', a later run is pinned to them,
and a moved dataset is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.core import InputError
from bench.engines import load_experiment
from bench.schema import EXPERIMENTS_DIR, PinsLock, Resolved, apply_lock, record_pins

REV, REV2 = "a" * 40, "b" * 40
SHA, SHA2 = "c" * 64, "d" * 64


def experiment(tmp_path: Path, revision: str = "unresolved") -> Any:
    doc: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090-categories.yaml").read_text()
    )
    doc["workload"]["prompt_set"] = {
        "name": "speed-bench-coding",
        "dataset": {"hf_id": "org/prompts", "revision": revision, "file": "code.jsonl",
                    "sha256": "unresolved"},
    }  # fmt: skip
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_experiment(path)


def test_a_dataset_is_recorded_then_pinned(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    lock_path = tmp_path / "e.lock.yaml"
    assert "workload.prompt_set.dataset.revision (org/prompts)" in exp.unresolved_pins()
    empty = PinsLock(experiment=exp.name)
    before = apply_lock(exp, empty, "h", lock_path)
    assert [(p.field, p.source) for p in before.pins if p.kind == "dataset"] == [
        ("revision", "unpinned"),
        ("sha256", "unpinned"),
    ]
    lock = record_pins(exp, empty, "h", Resolved(datasets={"speed-bench-coding": (REV, SHA)}),
                       lock_path)  # fmt: skip
    assert lock.datasets["speed-bench-coding"].revision == REV
    after = apply_lock(exp, lock, "h", lock_path)
    ds = after.experiment.workload.prompt_set
    assert ds is not None and ds.dataset is not None
    assert (ds.dataset.revision, ds.dataset.sha256) == (REV, SHA)
    assert not [u for u in after.experiment.unresolved_pins() if "dataset" in u]
    assert {p.source for p in after.pins if p.kind == "dataset"} == {"lock"}
    # the same values again change nothing; a moved dataset is refused with the fix
    assert record_pins(exp, lock, "h", Resolved(datasets={"speed-bench-coding": (REV, SHA)}),
                       lock_path) == lock  # fmt: skip
    with pytest.raises(InputError, match="has moved"):
        record_pins(exp, lock, "h", Resolved(datasets={"speed-bench-coding": (REV2, SHA)}),
                    lock_path)  # fmt: skip
    with pytest.raises(InputError, match="not a dataset prompt set"):
        record_pins(exp, lock, "h", Resolved(datasets={"other": (REV, SHA)}), lock_path)
    # a lock without datasets is written as before (no empty 'datasets' key)
    assert "datasets" not in empty.model_dump(mode="json", by_alias=True)


def test_a_value_the_experiment_fixes_wins_and_a_contradicting_lock_is_refused(
    tmp_path: Path,
) -> None:
    exp = experiment(tmp_path, revision=REV2)
    lock_path = tmp_path / "e.lock.yaml"
    lock = PinsLock.model_validate(
        {"schema": "specbench.pins/1", "experiment": exp.name,
         "datasets": {"speed-bench-coding": {"hf_id": "org/prompts", "file": "code.jsonl",
                                             "revision": REV, "sha256": SHA}}}
    )  # fmt: skip
    with pytest.raises(InputError) as err:
        apply_lock(exp, lock, "h", lock_path)
    assert "workload.prompt_set.dataset.revision" in err.value.where
    with pytest.raises(ValueError, match="40-hex"):
        PinsLock.model_validate(
            {"schema": "specbench.pins/1", "experiment": "x",
             "datasets": {"s": {"hf_id": "a/b", "file": "f", "revision": "main",
                                "sha256": SHA}}}
        )  # fmt: skip
