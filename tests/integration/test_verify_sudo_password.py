"""The verify role's testinfra checks on a host whose sudo needs a password (issue 29): a server
installed from the ISO has one, and testinfra's own SSH connection runs a bare `sudo`.

The role then runs pytest through `verify_sudo_argv` (roles/verify/vars/main.yml): the password
arrives on stdin, stays in pytest's environment, and testinfra runs each command through Ansible
(--force-ansible), whose become plugin reads it from files/become_password.sh. Here that argv runs
as the role renders it, against localhost through Ansible's local connection with a fake `sudo`
(ansible_become_exe) that asks for the password as sudo -S does and answers only the right one.
The password must reach sudo and appear in no file, argv or output.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from needs import missing_tool

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "ansible" / "roles" / "verify"
BIN = Path(sys.executable).parent

FAKE_SUDO = """#!{python}
# sudo as Ansible's become plugin calls it: sudo -H -S [-n] [-p PROMPT] -u root /bin/sh -c CMD
import os, sys
args = sys.argv[1:]
prompt = args[args.index("-p") + 1] if "-p" in args else None
if prompt is None:
    print("sudo: a password is required", file=sys.stderr)
    sys.exit(1)
sys.stderr.write(prompt)
sys.stderr.flush()
given = sys.stdin.readline().rstrip("\\n")
if given != open({expected!r}).read():
    print("Sorry, try again.", file=sys.stderr)
    sys.exit(1)
with open({log!r}, "a") as f:
    f.write("answered\\n")
cmd = args[args.index("-u") + 2:]
os.execvp(cmd[0], cmd)
"""

CHECK = """
def test_a_command_through_sudo(host):
    assert host.run("echo through-sudo").stdout.strip() == "through-sudo"
"""


def _render(value: Any, variables: dict[str, Any]) -> Any:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(value))


def _setup(tmp_path: Path, password: str) -> tuple[list[str], dict[str, str], Path]:
    if not (BIN / "ansible").exists():
        missing_tool("ansible (in the venv)", "make setup")
    repo = tmp_path / "repo"
    (repo / "tests" / "infra").mkdir(parents=True)
    (repo / "tests" / "infra" / "test_sudo.py").write_text(CHECK)
    secret_dir = tmp_path / "secret"  # the fake sudo's own copy of the right password
    secret_dir.mkdir()
    (secret_dir / "expected").write_text(password)
    log = tmp_path / "sudo.log"
    sudo = tmp_path / "fake-sudo"
    sudo.write_text(
        FAKE_SUDO.format(python=sys.executable, expected=str(secret_dir / "expected"), log=str(log))
    )
    sudo.chmod(0o755)
    inventory = tmp_path / "infra-inventory-box.json"
    host = {
        "ansible_connection": "local",
        "ansible_become": True,
        "ansible_become_exe": str(sudo),
        "ansible_python_interpreter": sys.executable,
    }
    inventory.write_text(json.dumps({"all": {"hosts": {"box": host}}}))
    variables = {
        "verify_pytest": str(BIN / "pytest"),
        "verify_repo_dir": str(repo),
        "inventory_hostname": "box",
        "verify_inventory_file": str(inventory),
    }
    raw = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["verify_sudo_argv"]
    argv = [str(_render(a, variables)) for a in raw]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTEST_"))}
    env.update(
        PATH=f"{BIN}:{env['PATH']}",
        ANSIBLE_BECOME_PASSWORD_FILE=str(ROLE / "files" / "become_password.sh"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"),
        ANSIBLE_REMOTE_TEMP=str(tmp_path / "ansible-remote"),
        HOME=str(tmp_path / "home"),
        # become root as root (this test's user may be root): Ansible would skip the become
        ANSIBLE_BECOME_ALLOW_SAME_USER="True",
    )
    return argv, env, log


def _files_holding(root: Path, needle: str) -> list[Path]:
    out = []
    for p in root.rglob("*"):
        if p.is_file() and p.name != "expected" and needle.encode() in p.read_bytes():
            out.append(p)
    return out


def test_the_checks_get_the_become_password_without_writing_it(tmp_path: Path) -> None:
    password = "pw-" + secrets.token_hex(8)
    argv, env, log = _setup(tmp_path, password)
    assert password not in " ".join(argv)
    r = subprocess.run(
        argv, input=password + "\n", cwd=tmp_path / "repo", env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "1 passed" in r.stdout, out[-4000:]
    assert log.read_text().count("answered") >= 1  # sudo asked, and got the right password
    assert password not in out
    assert _files_holding(tmp_path, password) == []


def test_a_wrong_become_password_fails_the_checks(tmp_path: Path) -> None:
    argv, env, log = _setup(tmp_path, "the-right-one")
    r = subprocess.run(
        argv, input="a-wrong-one\n", cwd=tmp_path / "repo", env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode != 0, r.stdout[-4000:]
    assert not log.exists()


def test_the_password_task_is_no_log_and_the_inventory_has_no_password() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    (task,) = [t for t in tasks if t["name"].endswith("(sudo with a password).") and
               "ansible.builtin.command" in t]  # fmt: skip
    assert task["no_log"] is True
    assert task["ansible.builtin.command"]["stdin"] == "{{ verify_become_password }}"
    assert task["vars"]["ansible_pipelining"] is True
    env = task["environment"]
    assert env["ANSIBLE_BECOME_PASSWORD_FILE"].endswith("/files/become_password.sh")
    assert not [k for k in env if "password" in str(env[k]).lower() and "FILE" not in k]
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert not [v for v in defaults["verify_connection_vars"] if "pass" in v]
