"""Issue 48: the seed's accuracy task, a GSM8K file pinned by URL, through the matrix on the
emulator. The file lies where the Ansible models stage fetches it (``<model cache>/datasets/
<name>/<file name>``), its sha256 in the pins lock as the stage records it when the experiment
leaves it 'unresolved'; each configuration answers the pinned file's first ``limit`` questions
and its payload names the URL and the sha256. An emulated run without the file goes on without
the task and says so. The file is a small one written here in GSM8K's format: no test fetches
the real one."""

from __future__ import annotations

import hashlib
import json
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

pytestmark = pytest.mark.integration

SEED = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
ONLY = "vllm-baseline"
TEXT = "".join(
    json.dumps({"question": f"What is {i} + {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"})
    + "\n"
    for i in range(1, 6)
)
SHA = hashlib.sha256(TEXT.encode()).hexdigest()


def _experiment(tmp_path: Path) -> tuple[Path, str, str]:
    """The seed, one configuration, a short workload, the GSM8K sha256 left to the first run;
    and the task's name and URL."""
    data: dict[str, Any] = yaml.safe_load(SEED.read_text())
    data["configurations"] = [c for c in data["configurations"] if c["name"] == ONLY]
    without_load_time(data["configurations"][0], tmp_path)
    data["workload"].update(max_tokens=8, warmup=0, iterations=1, concurrency=[1])
    acc = data["workload"]["accuracy"]
    acc.update(max_tokens=8, limit=3)
    acc["source"]["sha256"] = "unresolved"
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, acc["name"], acc["source"]["url"]


def test_the_fetched_subset_is_asked_and_recorded(tmp_path: Path) -> None:
    exp_path, name, url = _experiment(tmp_path)
    # what the models stage leaves: the file under the cache, its sha256 in the lock
    cache = tmp_path / "models"
    f = cache / "datasets" / name / url.rsplit("/", 1)[-1]
    f.parent.mkdir(parents=True)
    f.write_text(TEXT, encoding="utf-8")
    exp = load_pinned_experiment(exp_path, "h").experiment
    lock = record_pins(
        exp, PinsLock(experiment=exp.name), "h", Resolved(urls={name: SHA}), lock_path_for(exp_path)
    )
    write_lock(lock_path_for(exp_path), lock)
    pinned = load_pinned_experiment(exp_path, "h")
    assert [(p.kind, p.value, p.source) for p in pinned.pins if p.kind == "url"] == [
        ("url", SHA, "lock")
    ]
    out = tmp_path / "out"
    opts = MatrixOptions(out=out, launcher="process", time_scale=0.05, show_progress=False,
                         model_cache=str(cache))  # fmt: skip
    result = run_matrix(pinned.experiment, opts, experiment_path=exp_path, pinned=pinned)
    assert [o.status for o in result.outcomes] == ["done"]
    rec = read_payload(Artifacts(out).payload(ONLY, 1)).evidence.accuracy
    assert rec is not None
    assert (rec.task, rec.source, rec.sha256, rec.scorer) == (name, url, SHA, "gsm8k")
    # the first `limit` questions of the pinned bytes, their final numbers expected
    assert [i.expected for i in rec.items] == ["2", "4", "6"]


def test_an_emulated_run_without_the_file_goes_on_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp_path, name, _ = _experiment(tmp_path)
    pinned = load_pinned_experiment(exp_path, "h")
    out = tmp_path / "out"
    opts = MatrixOptions(out=out, launcher="process", time_scale=0.05, show_progress=True,
                         model_cache=str(tmp_path / "empty"))  # fmt: skip
    result = run_matrix(pinned.experiment, opts, experiment_path=exp_path, pinned=pinned)
    assert [o.status for o in result.outcomes] == ["done"]
    assert read_payload(Artifacts(out).payload(ONLY, 1)).evidence.accuracy is None
    said = capsys.readouterr()
    assert f"SIMULATED run: the accuracy task {name} is not asked" in said.out + said.err
