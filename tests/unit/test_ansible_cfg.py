"""ansible/ansible.cfg's connection settings (issue 29): SSH keepalives for long silent tasks,
kept next to ssh's own multiplexing, as ansible-core itself reads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CFG = REPO / "ansible" / "ansible.cfg"
BIN = Path(sys.executable).parent


def _ssh_args() -> str:
    """ssh_args as ansible-core resolves it from ansible.cfg (ANSIBLE_CONFIG, as make does)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_CONFIG"] = str(CFG)
    r = subprocess.run(
        [BIN / "ansible-config", "dump", "--only-changed", "-t", "connection", "--format", "json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    ssh = next(p["ssh"] for p in json.loads(r.stdout) if "ssh" in p)
    (args,) = [s["value"] for s in ssh if s["name"] == "ssh_args"]
    return str(args)


def test_ssh_keepalives_with_multiplexing() -> None:
    args = _ssh_args().split()
    opts = dict(args[k + 1].split("=", 1) for k, a in enumerate(args) if a == "-o")
    assert opts["ControlMaster"] == "auto" and opts["ControlPersist"] == "60s", opts
    assert int(opts["ServerAliveInterval"]) <= 60, opts  # below the usual NAT idle timeouts
    assert int(opts["ServerAliveCountMax"]) >= 2, opts
    # a dead connection is noticed within minutes, well inside the 30 min of benchmark_lost_after_s
    assert int(opts["ServerAliveInterval"]) * int(opts["ServerAliveCountMax"]) <= 600, opts
