"""Issue 48, item 3: the seed's GSM8K subset. An accuracy task may be a file pinned by its https
URL and sha256 (``workload.accuracy.source``: GSM8K's test split at a commit of OpenAI's
grade-school-math; the hub's mirror holds only Parquet). A bad URL or sha256 is exit 2 naming the
field; the file is read from where the models stage fetched it, ``<model cache>/datasets/<name>/
<file name>``, its first ``limit`` questions, and refused missing, unpinned or changed (exit 2
with the fix) by the matrix before it writes anything; `specbench plan` shows the task, where it
is read from and its estimated time."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.cli import main
from bench.core import InputError
from bench.engines import load_experiment, load_pinned_experiment
from bench.matrix import MatrixOptions, render_plan, run_matrix
from bench.measure import accuracy_task_file, read_accuracy_task
from bench.schema import EXPERIMENTS_DIR

pytestmark = pytest.mark.unit

SEED = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
URL = f"https://raw.githubusercontent.com/org/math/{COMMIT}/data/test.jsonl"
NAME = "gsm8k-test"
LINES = [
    {"question": f"What is {i} + {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"}
    for i in range(1, 8)
]
TEXT = "".join(json.dumps(x) + "\n" for x in LINES)
SHA = hashlib.sha256(TEXT.encode()).hexdigest()


def _doc(**source: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SEED.read_text())
    doc["workload"]["accuracy"] = {
        "name": NAME,
        "source": {"url": URL, "sha256": SHA, **source},
        "scorer": "gsm8k",
        "max_tokens": 64,
        "limit": 3,
    }
    return doc


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_seed_asks_a_pinned_gsm8k_subset() -> None:
    acc = load_experiment(SEED).workload.accuracy
    assert acc is not None and acc.source is not None and acc.dataset is None
    # the raw file of a GitHub repository at a commit, and that file's sha256: fully pinned
    assert re.fullmatch(
        r"https://raw\.githubusercontent\.com/openai/grade-school-math/[0-9a-f]{40}/"
        r"grade_school_math/data/test\.jsonl",
        acc.source.url,
    )
    assert re.fullmatch(r"[0-9a-f]{64}", acc.source.sha256)
    assert acc.source.file == "test.jsonl"
    assert (acc.scorer, acc.max_tokens, acc.min_ratio) == ("gsm8k", 512, 0.97)
    assert acc.limit is not None and acc.limit >= 1


def test_plan_shows_the_task_where_it_is_read_and_its_time(tmp_path: Path) -> None:
    exp = load_experiment(SEED)
    acc = exp.workload.accuracy
    assert acc is not None and acc.source is not None
    cache = tmp_path / "cache"
    text = render_plan(exp, model_cache=str(cache))
    where = cache / "datasets" / acc.name / "test.jsonl"
    assert f"Accuracy task `{acc.name}` (`{acc.source.url}` sha256 {acc.source.sha256}" in text
    assert f"read from `{where}`): {acc.limit} questions, the first {acc.limit}" in text
    assert "scorer gsm8k, up to 512 tokens an answer" in text
    assert "at least 97% of its engine's baseline accuracy" in text
    total = text.split("Estimated wall time: ")[1].split("\n")[0]
    assert ", accuracy task " in total
    # each configuration's line carries its share of it
    assert len(re.findall(r"; estimated [^.]+ \(accuracy task \d", text)) == len(exp.configurations)
    without = exp.model_copy(
        update={"workload": exp.workload.model_copy(update={"accuracy": None})}
    )
    assert "accuracy task" not in render_plan(without, model_cache=str(cache))


@pytest.mark.parametrize(
    ("source", "field", "reason"),
    [
        ({"url": URL.replace("https:", "http:")}, "source.url", "must be an https URL"),
        ({"url": URL.replace(COMMIT, "main")}, "source.url", "at a 40-hex commit"),
        ({"url": URL.replace(COMMIT, COMMIT[:12])}, "source.url", "at a 40-hex commit"),
        (
            {"url": f"https://github.com/org/math/blob/{COMMIT}/data/test.jsonl"},
            "source.url",
            "at a 40-hex commit",
        ),
        ({"url": "https://u:hunter2@example.org/t.jsonl"}, "source.url", "credentials"),
        ({"url": "https://example.org/t.jsonl?token=hunter2"}, "source.url", "no query"),
        ({"url": "https://example.org/data/"}, "source.url", "ending in a file name"),
        ({"url": "https://example.org/a/../t.jsonl"}, "source.url", "no empty, '.' or '..'"),
        ({"sha256": "ABC"}, "source.sha256", "64 lowercase hex digits"),
        ({"sha256": SHA.upper()}, "source.sha256", "64 lowercase hex digits"),
    ],
)
def test_a_bad_pin_is_exit_2_naming_the_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: dict[str, str],
    field: str,
    reason: str,
) -> None:
    path = _write(tmp_path, _doc(**source))
    code, _, err = _cli(capsys, "plan", str(path))
    assert code == 2, err
    assert f"workload.accuracy.{field}" in err and reason in err, err
    assert "hunter2" not in err  # a secret in a refused URL is never echoed
    assert "Traceback" not in err


def test_a_github_raw_url_at_a_commit_and_other_https_files_are_accepted(tmp_path: Path) -> None:
    for url in (URL, f"https://github.com/org/math/raw/{COMMIT}/data/test.jsonl",
                "https://example.org:8443/sets/t.jsonl"):  # fmt: skip
        exp = load_experiment(_write(tmp_path, _doc(url=url)))
        assert exp.workload.accuracy is not None and exp.workload.accuracy.source is not None


def test_one_source_and_names_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc()
    doc["workload"]["accuracy"]["path"] = "task.jsonl"
    code, _, err = _cli(capsys, "plan", str(_write(tmp_path, doc)))
    assert code == 2 and "exactly one of 'path'" in err and "'source'" in err
    doc = _doc()
    doc["workload"]["prompt_set"] = {
        "name": NAME,
        "dataset": {"hf_id": "org/p", "revision": "a" * 40, "file": "p.jsonl", "sha256": SHA},
    }
    code, _, err = _cli(capsys, "plan", str(_write(tmp_path, doc)))
    assert code == 2 and "workload" in err and "name them apart" in err


def _fetched(cache: Path, text: str = TEXT) -> Path:
    f = cache / "datasets" / NAME / "test.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text(text, encoding="utf-8")
    return f


def test_the_fetched_file_is_read_to_its_limit(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    f = _fetched(cache)
    spec = load_experiment(_write(tmp_path, _doc())).workload.accuracy
    assert spec is not None and accuracy_task_file(spec, cache) == f
    task = read_accuracy_task(spec, cache)
    assert task is not None and task.source == URL and task.sha256 == SHA
    assert len(task.items) == 3 and [task.expected(n) for n in range(3)] == ["2", "4", "6"]


def test_a_missing_file_names_the_field_the_path_and_the_fix(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    spec = load_experiment(_write(tmp_path, _doc())).workload.accuracy
    with pytest.raises(InputError) as err:
        read_accuracy_task(spec, cache)
    assert err.value.where == "workload.accuracy.source"
    assert str(cache / "datasets" / NAME / "test.jsonl") in err.value.reason
    assert "make provision" in err.value.reason and "--model-cache" in err.value.reason
    # an emulated run, which no models stage serves, leaves it out instead
    assert read_accuracy_task(spec, cache, missing_ok=True) is None


def test_a_changed_file_is_refused_naming_both_hashes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    f = _fetched(cache, TEXT + json.dumps(LINES[0]) + "\n")
    spec = load_experiment(_write(tmp_path, _doc())).workload.accuracy
    with pytest.raises(InputError) as err:
        read_accuracy_task(spec, cache, missing_ok=True)  # there, so checked
    have = hashlib.sha256(f.read_bytes()).hexdigest()
    assert err.value.where == "workload.accuracy.source.sha256"
    assert have in err.value.reason and SHA in err.value.reason
    assert "run the models stage again" in err.value.reason


def test_an_unresolved_sha256_sends_you_to_the_models_stage(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _fetched(cache)
    exp = load_pinned_experiment(_write(tmp_path, _doc(sha256="unresolved")), "h").experiment
    assert f"workload.accuracy.source.sha256 ({URL})" in exp.unresolved_pins()
    with pytest.raises(InputError) as err:
        read_accuracy_task(exp.workload.accuracy, cache)
    assert err.value.where == "workload.accuracy.source.sha256"
    assert "make provision" in err.value.reason


@pytest.mark.parametrize("changed", [False, True])
def test_the_matrix_refuses_a_missing_or_changed_file_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changed: bool
) -> None:
    cache = tmp_path / "cache"
    if changed:
        _fetched(cache, TEXT.replace("What", "How much"))
    path = _write(tmp_path, _doc())
    out = tmp_path / "out"
    # the GPU host's run: Docker, the engines' images, the models stage's cache
    code, _, err = _cli(capsys, "matrix", str(path), "--out", str(out), "--allow-unpinned",
                        "--model-cache", str(cache))  # fmt: skip
    assert code == 2, err
    if changed:
        assert "workload.accuracy.source.sha256" in err and SHA in err
        assert "run the models stage again to fetch it" in err
    else:
        assert "workload.accuracy.source" in err and "make provision" in err
    assert "Traceback" not in err and not out.exists()


def test_an_emulated_matrix_still_refuses_a_file_that_is_there_and_bad(tmp_path: Path) -> None:
    """An emulated run (no models stage serves it) goes on without a task that is not there
    (tests/integration/test_accuracy_source_matrix.py); one that is there is checked."""
    exp = load_experiment(_write(tmp_path, _doc()))
    opts = MatrixOptions(out=tmp_path / "out", launcher="process", emulate=True,
                         show_progress=False, model_cache=str(tmp_path / "cache"))  # fmt: skip
    _fetched(tmp_path / "cache", TEXT.replace("What", "How much"))
    with pytest.raises(InputError) as err:
        run_matrix(exp, opts)
    assert err.value.where == "workload.accuracy.source.sha256"
    assert not (tmp_path / "out").exists()
