"""site.yml's fleet summary (FLEET.md rows) over the facts each host left behind.

A host the controller loses mid-run (SSH drops past its retries) leaves the first play with
neither `rescue` nor `always`: it has no fleet_result and never reaches the last task of the
block. Issue #21: the summary called such a host ok ("no benchmark in this run").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SITE = Path(__file__).resolve().parents[2] / "ansible" / "site.yml"


def _rows(hostvars: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    def trusted(v: Any) -> Any:  # as Ansible marks what it loads from a playbook
        if isinstance(v, dict):
            return {k: trusted(x) for k, x in v.items()}
        return trust_as_template(v) if isinstance(v, str) else v

    play_vars = trusted(yaml.safe_load(SITE.read_text())[1]["vars"])
    variables = {
        **play_vars,
        "fleet_hosts": list(hostvars),
        "hostvars": hostvars,
        "report_controller_dir": "/r",
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    rows: list[dict[str, Any]] = templar.template(trust_as_template("{{ fleet_rows }}"))
    return rows


def test_a_host_lost_mid_run_is_failed_with_the_reason() -> None:
    rows = _rows(
        {
            "a": {"fleet_member": True, "benchmark_run_id": "exp-1", "fleet_done": True,
                  "benchmark_run": "exp-1"},
            "b": {"fleet_member": True, "benchmark_run_id": "exp-1"},
        }
    )  # fmt: skip
    by_host = {r["host"]: r for r in rows}
    assert by_host["a"]["status"] == "ok"
    assert by_host["b"]["status"] == "failed"
    assert "lost the host mid-run" in by_host["b"]["why"]
    assert "-e benchmark_run_id=exp-1" in by_host["b"]["why"]


def test_a_host_that_ran_no_benchmark_stage_is_still_ok() -> None:
    rows = _rows({"a": {"fleet_member": True, "benchmark_run_id": "exp-1", "fleet_done": True}})
    assert rows[0]["status"] == "ok" and "no benchmark in this run" in rows[0]["why"]


def test_a_rescued_failure_keeps_its_own_reason() -> None:
    failed = {"status": "failed", "task": "Preflight", "why": "too little disk"}
    rows = _rows({"a": {"fleet_member": True, "benchmark_run_id": "x", "fleet_result": failed}})
    assert rows[0]["status"] == "failed" and rows[0]["why"] == "too little disk"
