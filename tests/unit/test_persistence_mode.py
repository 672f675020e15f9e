"""Persistence mode for real (issue 29). Ubuntu's nvidia-persistenced unit starts the daemon
with --no-persistence-mode, so enabling the unit left it off. The driver role adds a drop-in that
asks the daemon for it (`nvidia-smi -pm 1`) at every start, turns it on now where it is off, and
checks `nvidia-smi -q` says "Persistence Mode : Enabled" for every GPU; so does tests/infra.
Here: the drop-in as the role writes it, the role's own check rendered with Ansible's templar over
`nvidia-smi -q` output, and the testinfra check over the same output."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "ansible" / "roles" / "nvidia_driver"


def _query(*modes: str) -> str:
    gpus = "".join(
        f"GPU 00000000:0{k + 1}:00.0\n"
        "    Product Name                          : NVIDIA GeForce RTX 3090\n"
        "    Display Mode                          : Disabled\n"
        f"    Persistence Mode                      : {mode}\n"
        "    Addressing Mode                       : None\n"
        for k, mode in enumerate(modes)
    )
    return (
        "==============NVSMI LOG==============\n\n"
        "Driver Version                            : 580.95.05\n"
        f"Attached GPUs                             : {len(modes)}\n" + gpus
    )


def _role_vars() -> dict[str, Any]:
    return dict(yaml.safe_load((ROLE / "vars" / "main.yml").read_text()))


def test_the_dropin_asks_the_daemon_for_persistence_mode() -> None:
    v = _role_vars()
    assert v["nvidia_driver_persistence_dropin"] == (
        "/etc/systemd/system/nvidia-persistenced.service.d/specbench-persistence-mode.conf"
    )
    lines = [ln for ln in v["nvidia_driver_persistence_dropin_content"].splitlines()
             if ln and not ln.startswith("#")]  # fmt: skip
    # Ubuntu's own ExecStart (its user, its flags) stays; only the request is added
    assert lines == ["[Service]", "ExecStartPost=-/usr/bin/nvidia-smi -pm 1"]
    tasks = yaml.safe_load((ROLE / "tasks" / "setup-Ubuntu.yml").read_text())
    (copy,) = [t for t in tasks if t.get("notify") == "Restart nvidia-persistenced"]
    assert copy["ansible.builtin.copy"]["dest"] == "{{ nvidia_driver_persistence_dropin }}"
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    assert "Restart nvidia-persistenced" in [h["name"] for h in handlers]


def _role_check(stdout: str) -> bool:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    tasks = yaml.safe_load((ROLE / "tasks" / "verify.yml").read_text())
    (check,) = [t for t in tasks if t["name"] == "Check that persistence mode is on for every GPU."]
    variables = {**_role_vars(), "nvidia_driver_query_after": {"stdout": stdout, "rc": 0}}
    templar = Templar(loader=DataLoader(), variables=variables)
    return all(
        templar.template(trust_as_template("{{ (" + cond + ") | bool }}"))
        for cond in check["ansible.builtin.assert"]["that"]
    )


@pytest.mark.parametrize(
    ("modes", "ok"),
    [(("Enabled", "Enabled"), True), (("Enabled", "Disabled"), False), (("Disabled",), False)],
)
def test_the_roles_check_reads_nvidia_smi_q(modes: tuple[str, ...], ok: bool) -> None:
    assert _role_check(_query(*modes)) is ok
    assert _role_check("no GPU section at all") is False


def _infra_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "infra_test_host", REPO / "tests/infra/test_host.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("infra_test_host", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    ("modes", "ok"), [(("Enabled", "Enabled"), True), (("Enabled", "Disabled"), False)]
)
def test_the_testinfra_check_reads_nvidia_smi_q(modes: tuple[str, ...], ok: bool) -> None:
    check = _infra_module().test_persistence_mode_enabled
    host = SimpleNamespace(
        check_output=lambda cmd: _query(*modes) if cmd == "nvidia-smi -q" else ""
    )
    if ok:
        check(host, {"gpu_count": 2})
    else:
        with pytest.raises(AssertionError):
            check(host, {"gpu_count": 2})
