"""The matrix poll (ansible/roles/benchmark/tasks/poll.yml) looks healthy while the job runs
(issue 29): one `ok: [host] => (item=matrix running for h:mm:ss)` line per poll, never
ansible-core's "FAILED - RETRYING" of an `until` loop; a job that fails still fails the task named
as the command was ("Run the benchmark matrix.", which FLEET.md names), with the job's own result.

The poll runs here against localhost (local connection) on a short `sh -c` job; the dropped
connection is the fresh-host tests' part (tests/e2e/test_ansible_fresh_host.py, test_matrix_poll_*).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from needs import missing_tool

REPO = Path(__file__).resolve().parents[2]
POLL = REPO / "ansible" / "roles" / "benchmark" / "tasks" / "poll.yml"
BIN = Path(sys.executable).parent

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    benchmark_poll_s: 1
    benchmark_timeout_s: 60
    benchmark_lost_after_s: 5
    benchmark_max_drops: 3
    benchmark_run_id: poll-test
  tasks:
    - name: Start the job.
      ansible.builtin.command:
        argv: [sh, -c, "{script}"]
      async: 60
      poll: 0
      register: benchmark_job
    - name: Poll it.
      ansible.builtin.include_tasks: {poll}
    - name: Show the result.
      ansible.builtin.debug:
        msg: "rc={{{{ benchmark_matrix.rc }}}} out={{{{ benchmark_matrix.stdout }}}}"
"""


def _play(tmp_path: Path, script: str, release_after_polls: int) -> tuple[int, str]:
    """Run the playbook; its job waits for a release file, created once the play's output has
    shown ``release_after_polls`` running polls (an event the test observes: on a loaded
    machine a job that only slept for a few seconds ended before the first poll). Returns the
    exit code and the output."""
    if not (BIN / "ansible-playbook").exists():
        missing_tool("ansible-playbook (in the venv)", "make setup")
    release = tmp_path / "release"
    wait = f"until [ -e {release} ]; do sleep 0.1; done; "
    book = tmp_path / "poll.yml"
    book.write_text(PLAYBOOK.format(script=wait + script, poll=POLL))
    env = {
        **os.environ,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_ASYNC_DIR": str(tmp_path / "async"),
        "ANSIBLE_CONFIG": str(REPO / "ansible" / "ansible.cfg"),
    }
    proc = subprocess.Popen(
        [BIN / "ansible-playbook", "-i", "localhost,", str(book),
         "-e", f"ansible_python_interpreter={sys.executable}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    out: list[str] = []
    with proc, proc.stdout:
        for line in proc.stdout:
            out.append(line)
            if not release.exists() and len(RUNNING.findall("".join(out))) >= release_after_polls:
                release.touch()
        release.touch()  # the play ended without the polls it was waited for: let the job go
        code = proc.wait(timeout=180)
    return code, "".join(out)


RUNNING = re.compile(r"^ok: \[localhost\] => \(item=matrix running for \d+:\d\d:\d\d\)$", re.M)
ENDED = re.compile(r"^ok: \[localhost\] => \(item=matrix ended for \d+:\d\d:\d\d\)$", re.M)


def test_a_healthy_poll_looks_healthy(tmp_path: Path) -> None:
    code, out = _play(tmp_path, "echo measured", release_after_polls=2)
    assert code == 0, out
    assert "RETRYING" not in out and "FAILED" not in out, out
    assert len(RUNNING.findall(out)) >= 2, out  # one line per poll while it runs
    assert len(ENDED.findall(out)) == 1, out
    assert "rc=0 out=measured" in out, out


def test_a_failed_matrix_fails_the_task_named_as_the_command(tmp_path: Path) -> None:
    code, out = _play(
        tmp_path, "echo '2 configuration(s) failed' >&2; exit 3", release_after_polls=1
    )
    assert code == 2, out
    assert "RETRYING" not in out, out
    assert RUNNING.search(out) and ENDED.search(out), out
    # the poll itself never fails; the job's result does, at "Run the benchmark matrix."
    task = out.split("TASK [Run the benchmark matrix.]", 1)[1]
    assert "fatal: [localhost]: FAILED!" in task and re.search(r"^ +rc: 3$", task, re.M), out
    assert "2 configuration(s) failed" in task, out
