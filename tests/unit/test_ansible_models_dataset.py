"""Issue 37: the models stage fetches a dataset prompt set the way it fetches weights. Here the
role's own templates (roles/models vars and tasks/download.yml), rendered by Ansible's templar
over what `specbench pins show --json` gives: the fetch task's argv, and the `pins record`
options made of the helper's JSON answers, which `pins record` then writes into the lock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_pins_dataset_cli import dataset_experiment

from bench.cli import main
from bench.schema import lock_path_for

ANSIBLE = Path(__file__).resolve().parents[2] / "ansible"
NAME = "speed-bench-coding"
REV, SHA = "a" * 40, "c" * 64


def _render(expr: str, variables: dict[str, Any]) -> Any:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(expr))


def _models_vars() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ANSIBLE / "roles/models/vars/main.yml").read_text())
    return data


def _fetch_task() -> dict[str, Any]:
    tasks = yaml.safe_load((ANSIBLE / "roles/models/tasks/download.yml").read_text())
    found = [t for t in tasks if t.get("register") == "models_dataset_fetch"]
    assert len(found) == 1
    task: dict[str, Any] = found[0]
    return task


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    try:
        main(list(args))
    except SystemExit as done:
        assert not done.code, capsys.readouterr().err
    return capsys.readouterr().out


@pytest.fixture
def exp_file(tmp_path: Path) -> Path:
    return dataset_experiment(tmp_path, NAME, "data/code.jsonl")


def test_the_dataset_is_fetched_then_recorded(
    exp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = json.loads(_cli(capsys, "pins", "show", str(exp_file), "--host", "h", "--json"))
    vars_ = _models_vars()
    datasets = _render(vars_["models_datasets"], {"pins_for_host": shown})
    assert [d["key"] for d in datasets] == [NAME]
    task = _fetch_task()
    assert task["loop"] == "{{ models_datasets }}" and "async" in task and "poll" in task
    argv = _render(
        task["ansible.builtin.command"]["argv"],
        {"item": datasets[0], "models_venv": "/v", "models_helper": "/h/fetch_model.py",
         "models_dir": "/m", "models_resolve_ref": "main", "ansible_check_mode": False},
    )  # fmt: skip
    assert argv == [
        "/v/bin/python", "/h/fetch_model.py", "--repo-type", "dataset",
        "--repo-id", "org/prompts", "--revision", "unresolved", "--file", "data/code.jsonl",
        "--sha256", "unresolved", "--dest", f"/m/datasets/{NAME}", "--resolve-ref", "main",
    ]  # fmt: skip
    # the helper's answers: fetched; a failure and a check-mode answer record nothing
    answer = {"changed": True, "revision": REV, "file": "data/code.jsonl", "sha256": SHA}
    results = [
        {"rc": 0, "stdout": json.dumps(answer), "item": datasets[0]},
        {"rc": 1, "stdout": "", "item": datasets[0]},
        {"rc": 0, "stdout": json.dumps({**answer, "sha256": None}), "item": datasets[0]},
    ]
    args = _render(
        vars_["models_datasets_record_args"], {"models_dataset_fetch": {"results": results}}
    )
    assert args == [f"--dataset={NAME}={REV}:{SHA}"]
    tasks = yaml.safe_load((ANSIBLE / "roles/models/tasks/download.yml").read_text())
    record = next(
        t for t in tasks if t.get("ansible.builtin.include_role", {}).get("name") == "pins"
    )
    known = {
        "models_resolved": {},
        "models_datasets_record_args": args,
        "models_urls_record_args": [],
        "models_resolve_ref": "main",
    }
    assert (
        _render("{{ " + record["when"] + " }}", known) is True
    )  # no model resolved: still recorded
    assert _render(record["vars"]["pins_record_args"], known) == [*args, "--resolved-from=main"]
    _cli(capsys, "pins", "record", str(exp_file), "--host", "h", *args)
    lock = yaml.safe_load(lock_path_for(exp_file).read_text())
    assert lock["datasets"][NAME] == {
        "hf_id": "org/prompts", "revision": REV, "resolved_from": "main",
        "file": "data/code.jsonl", "sha256": SHA,
    }  # fmt: skip
    # a later run fetches exactly the recorded commit and checks the recorded sha256
    shown = json.loads(_cli(capsys, "pins", "show", str(exp_file), "--host", "h", "--json"))
    pinned = _render(vars_["models_datasets"], {"pins_for_host": shown})[0]["value"]
    assert (pinned["revision"], pinned["sha256"]) == (REV, SHA)


def test_no_dataset_no_fetch() -> None:
    shown = {"images": {}, "models": {}, "datasets": {}}
    assert _render(_models_vars()["models_datasets"], {"pins_for_host": shown}) == []
    assert _render(_models_vars()["models_datasets_record_args"], {}) == []
