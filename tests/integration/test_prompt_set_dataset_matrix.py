"""Issue 37: a dataset prompt set through the matrix on the emulator. The file lies where the
Ansible models stage fetches it (``<model cache>/datasets/<name>/<file>``), its commit and
sha256 in the pins lock as the stage records them; the payload names the dataset and its
pinned sha256, and every category is measured as its own windows."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from emulator_profiles import without_load_time

from bench.engines import load_pinned_experiment
from bench.matrix import Artifacts, MatrixOptions, run_matrix
from bench.schema import (
    EXPERIMENTS_DIR,
    PinsLock,
    Resolved,
    lock_path_for,
    read_payload,
    record_pins,
    write_lock,
)

EXP = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090-categories.yaml"
PROMPTS = EXPERIMENTS_DIR.parent / "prompts" / "categories-small.jsonl"
NAME, FILE, REV = "categories-hub", "sets/categories.jsonl", "a" * 40


def test_a_dataset_prompt_set_runs_from_the_model_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_dummyTOKENvalue0123456789")
    data: dict[str, Any] = yaml.safe_load(EXP.read_text())
    data["configurations"] = [c for c in data["configurations"] if c["name"] == "vllm-mtp"]
    cfg = data["configurations"][0]
    without_load_time(cfg, tmp_path)
    data["workload"].update(max_tokens=8, warmup=0, iterations=1, concurrency=[1])
    data["workload"]["prompt_set"] = {
        "name": NAME,
        "dataset": {"hf_id": "org/prompts", "revision": "unresolved", "file": FILE,
                    "sha256": "unresolved"},
    }  # fmt: skip
    exp_path = tmp_path / "e.yaml"
    exp_path.write_text(yaml.safe_dump(data, sort_keys=False))
    # what the models stage leaves: the file under the cache, its pins in the lock
    cache = tmp_path / "models"
    (cache / "datasets" / NAME / FILE).parent.mkdir(parents=True)
    shutil.copy(PROMPTS, cache / "datasets" / NAME / FILE)
    sha = hashlib.sha256(PROMPTS.read_bytes()).hexdigest()
    exp = load_pinned_experiment(exp_path, "h").experiment
    found = Resolved(datasets={NAME: (REV, sha)})
    lock = record_pins(exp, PinsLock(experiment=exp.name), "h", found, lock_path_for(exp_path))
    write_lock(lock_path_for(exp_path), lock)
    pinned = load_pinned_experiment(exp_path, "h")
    out = tmp_path / "out"
    opts = MatrixOptions(out=out, launcher="process", time_scale=0.05, show_progress=False,
                         model_cache=str(cache))  # fmt: skip
    result = run_matrix(pinned.experiment, opts, experiment_path=exp_path, pinned=pinned)
    assert [o.status for o in result.outcomes] == ["done"]
    ev = read_payload(Artifacts(out).payload("vllm-mtp", 1)).evidence
    assert [c.category for c in ev.categories] == ["code", "factual", "prose"]
    ps = ev.workload.prompt_set
    assert ps is not None and ps.name == NAME and ps.sha256 == sha
    assert ps.source == f"org/prompts@{REV} {FILE}"
