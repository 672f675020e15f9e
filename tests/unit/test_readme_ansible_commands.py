"""Every `ansible-playbook` command the READMEs show reads ansible/ansible.cfg (issue 29).

Run from the repository root, a bare `ansible-playbook -i inventory.yml ansible/site.yml` reads
no ansible.cfg (Ansible looks in the current folder, not the playbook's), so the SSH retries and
keepalives, the roles path and the result format are silently lost. So each command shown in
README.md or ansible/README.md (code blocks, and inline code that runs the playbook) either goes
through `make provision` (which sets ANSIBLE_CONFIG, checked with `make -n`) or sets
ANSIBLE_CONFIG=ansible/ansible.cfg itself; and ansible/README.md's `--check` comes after the
prerequisites stage, which a fresh host needs first.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = (REPO / "README.md", REPO / "ansible" / "README.md")
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")


def _shown_commands(doc: Path) -> list[str]:
    text = doc.read_text()
    lines = [ln for block in FENCE.findall(text) for ln in block.splitlines()]
    prose = FENCE.sub("", text)
    lines += [span for span in INLINE.findall(prose) if len(span.split()) > 1]
    out = []
    for line in lines:
        try:
            words = shlex.split(line, comments=True)  # a comment shows no command
        except ValueError:
            continue
        if words:
            out.append(shlex.join(words))
    return out


def _runs_the_playbook(words: list[str]) -> int | None:
    for k, w in enumerate(words):
        if w.rsplit("/", 1)[-1] == "ansible-playbook":
            return k
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_playbook_command_shown_reads_ansible_cfg(doc: Path) -> None:
    commands = _shown_commands(doc)
    assert commands, doc
    for cmd in commands:
        words = shlex.split(cmd)
        at = _runs_the_playbook(words)
        if words[:2] == ["make", "provision"]:
            continue  # the Makefile sets ANSIBLE_CONFIG (next test)
        if at is None:
            continue
        env = dict(w.split("=", 1) for w in words[:at] if "=" in w)
        assert env.get("ANSIBLE_CONFIG") == "ansible/ansible.cfg", (
            f"{doc.name} shows `{cmd}`: run it through `make provision` or with "
            "ANSIBLE_CONFIG=ansible/ansible.cfg (from the root no ansible.cfg is read)"
        )


def test_make_provision_sets_ansible_config() -> None:
    r = subprocess.run(
        ["make", "-n", "--no-print-directory", "provision", "INVENTORY=inv.yml", "ARGS=--check",
         "UV=true"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if "ansible-playbook" in ln]
    words = shlex.split(line)
    assert words[0] == "ANSIBLE_CONFIG=ansible/ansible.cfg", line
    assert words[1].endswith("/ansible-playbook") and words[2:] == [
        "-i", "inv.yml", "ansible/site.yml", "--check"
    ], line  # fmt: skip


def test_ansible_readme_runs_prerequisites_before_check() -> None:
    first = FENCE.findall((REPO / "ansible" / "README.md").read_text())[0]
    cmds = [shlex.split(ln, comments=True) for ln in first.splitlines()]
    cmds = [c for c in cmds if c[:2] == ["make", "provision"]]
    args = [next((w for w in c if w.startswith("ARGS=")), "") for c in cmds]
    assert args[:2] == ["ARGS=--tags prerequisites", "ARGS=--check"], args
    assert (REPO / "ansible" / "ansible.cfg").is_file()
