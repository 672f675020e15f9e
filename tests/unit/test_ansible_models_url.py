"""Issue 48: the models stage fetches a file pinned by URL (the seed's GSM8K subset) next to the
weights and records it in the pins lock. The role's own templates (roles/models vars and
tasks/download.yml), rendered by Ansible's templar over what `specbench pins show --json` gives:
the fetch task's argv (with a mirror), and the `pins record --url` options made of the helper's
JSON answers, which `pins record` then writes into the lock (or refuses)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_ansible_models_dataset import _cli, _models_vars, _render

from bench.cli import main
from bench.engines import load_experiment
from bench.schema import EXPERIMENTS_DIR, lock_path_for

pytestmark = pytest.mark.unit

ANSIBLE = Path(__file__).resolve().parents[2] / "ansible"
SEED = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
SHA, OTHER = "c" * 64, "d" * 64


def _seed_source() -> tuple[str, str, str]:
    acc = load_experiment(SEED).workload.accuracy
    assert acc is not None and acc.source is not None
    return acc.name, acc.source.url, acc.source.sha256


@pytest.fixture
def exp_file(tmp_path: Path) -> Path:
    """The seed experiment with its GSM8K file's sha256 left to the first run."""
    doc: dict[str, Any] = yaml.safe_load(SEED.read_text())
    doc["workload"]["accuracy"]["source"]["sha256"] = "unresolved"
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _url_task() -> dict[str, Any]:
    tasks = yaml.safe_load((ANSIBLE / "roles/models/tasks/download.yml").read_text())
    found = [t for t in tasks if t.get("register") == "models_url_fetch"]
    assert len(found) == 1
    task: dict[str, Any] = found[0]
    return task


def _fails(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    assert done.value.code == 2
    return capsys.readouterr().err


def test_the_seeds_file_is_fetched_with_its_pin(capsys: pytest.CaptureFixture[str]) -> None:
    name, url, sha = _seed_source()
    shown = json.loads(_cli(capsys, "pins", "show", str(SEED), "--host", "h", "--json"))
    urls = _render(_models_vars()["models_urls"], {"pins_for_host": shown})
    assert urls == [{"key": name, "value": {"url": url, "sha256": sha}}]
    task = _url_task()
    assert task["loop"] == "{{ models_urls }}" and "async" in task and "poll" in task
    base = {"item": urls[0], "models_venv": "/v", "models_helper": "/h/fetch_model.py",
            "models_dir": "/m", "ansible_check_mode": False}  # fmt: skip
    argv = _render(task["ansible.builtin.command"]["argv"], {**base, "models_url_mirrors": {}})
    assert argv == ["/v/bin/python", "/h/fetch_model.py", "--url", url, "--sha256", sha,
                    "--dest", f"/m/datasets/{name}"]  # fmt: skip
    mirrors = {"https://raw.githubusercontent.com/": "http://mirror.lan/gh/"}
    argv = _render(
        task["ansible.builtin.command"]["argv"],
        {**base, "models_url_mirrors": mirrors, "ansible_check_mode": True},
    )
    assert argv[-2:] == ["--mirror=https://raw.githubusercontent.com/=http://mirror.lan/gh/",
                         "--check"]  # fmt: skip


def test_a_first_run_records_the_sha256_and_later_runs_are_pinned_to_it(
    exp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, url, _ = _seed_source()
    vars_ = _models_vars()
    shown = json.loads(_cli(capsys, "pins", "show", str(exp_file), "--host", "h", "--json"))
    item = _render(vars_["models_urls"], {"pins_for_host": shown})[0]
    assert item["value"] == {"url": url, "sha256": "unresolved"}
    # the helper's answers: fetched; a failure and a check-mode answer (no sha256) record nothing
    answer = {"changed": True, "url": url, "file": "test.jsonl", "sha256": SHA}
    results = [
        {"rc": 0, "stdout": json.dumps(answer), "item": item},
        {"rc": 1, "stdout": "", "item": item},
        {"rc": 0, "stdout": json.dumps({**answer, "sha256": None}), "item": item},
    ]
    args = _render(vars_["models_urls_record_args"], {"models_url_fetch": {"results": results}})
    assert args == [f"--url={name}={SHA}"]
    tasks = yaml.safe_load((ANSIBLE / "roles/models/tasks/download.yml").read_text())
    record = next(
        t for t in tasks if t.get("ansible.builtin.include_role", {}).get("name") == "pins"
    )
    known = {"models_resolved": {}, "models_datasets_record_args": [],
             "models_urls_record_args": args, "models_resolve_ref": "main"}  # fmt: skip
    assert _render("{{ " + record["when"] + " }}", known) is True  # only a URL: still recorded
    assert _render(record["vars"]["pins_record_args"], known) == [*args, "--resolved-from=main"]
    _cli(capsys, "pins", "record", str(exp_file), "--host", "h", *args)
    lock = yaml.safe_load(lock_path_for(exp_file).read_text())
    assert lock["urls"] == {name: {"url": url, "sha256": SHA}}
    # a later run fetches against the recorded sha256, and the experiment reads it as pinned
    shown = json.loads(_cli(capsys, "pins", "show", str(exp_file), "--host", "h", "--json"))
    assert shown["urls"] == {name: {"url": url, "sha256": SHA}}
    # the same answer again is fine; another file served is refused, naming the fix
    _cli(capsys, "pins", "record", str(exp_file), "--host", "h", *args)
    err = _fails(capsys, "pins", "record", str(exp_file), "--host", "h", f"--url={name}={OTHER}")
    assert "workload.accuracy.source.sha256" in err and SHA in err and OTHER in err
    assert f"specbench pins forget <experiment> --url {name}" in err
    # moved on purpose: forgotten, then the new one is recorded
    out = _cli(capsys, "pins", "forget", str(exp_file), "--url", name)
    assert f"forgot urls.{name}" in out
    assert "urls" not in yaml.safe_load(lock_path_for(exp_file).read_text())
    _cli(capsys, "pins", "record", str(exp_file), "--host", "h", f"--url={name}={OTHER}")
    assert yaml.safe_load(lock_path_for(exp_file).read_text())["urls"][name]["sha256"] == OTHER


def test_the_experiments_own_sha256_wins(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    name, _, sha = _seed_source()
    exp = tmp_path / "seed.yaml"
    exp.write_text(SEED.read_text())
    _cli(capsys, "pins", "record", str(exp), "--host", "h", f"--url={name}={sha}")
    assert not lock_path_for(exp).exists()  # nothing to keep: the experiment holds it
    err = _fails(capsys, "pins", "record", str(exp), "--host", "h", f"--url={name}={OTHER}")
    assert "workload.accuracy.source.sha256" in err and sha in err and OTHER in err
    err = _fails(capsys, "pins", "record", str(exp), "--host", "h", f"--url=other-task={SHA}")
    assert "--url" in err and "'other-task' is not an accuracy task pinned by URL" in err
    err = _fails(capsys, "pins", "forget", str(exp), "--url", name)
    assert "--url" in err and "the lock has no entry" in err


def test_no_url_no_fetch() -> None:
    shown = {"images": {}, "models": {}, "datasets": {}}
    assert _render(_models_vars()["models_urls"], {"pins_for_host": shown}) == []
    assert _render(_models_vars()["models_urls_record_args"], {}) == []
