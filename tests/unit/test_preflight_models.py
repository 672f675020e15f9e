"""Gated or misspelled models (issue 29): preflight asks the hub for each model repository of the
experiment with the run's token before any image is pulled, and tells a missing or invalid token
(401), a gated repository whose licence the token's account has not accepted (403, or the hub's
X-Error-Code GatedRepo) and a repository that does not exist or that the token cannot see (404,
or RepoNotFound) apart. Here: the role's own tasks (roles/preflight/tasks/models.yml) run by
ansible-playbook on localhost against a local HTTP server that answers like the hub; the token
must reach the server in the Authorization header and never appear in Ansible's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

REPO = Path(__file__).resolve().parents[2]
TOKEN = "hf_sbansSECRETtoken0123456789"  # a made-up token, looked for in every output

# hf_id -> (status, X-Error-Code) the stand-in hub answers for a file of the repository
ANSWERS: dict[str, tuple[int, str]] = {
    "ok/model": (200, ""),
    "ok/redirected": (302, ""),
    "ok/no-config": (404, "EntryNotFound"),
    "needs/token": (401, ""),
    "gated/model": (403, "GatedRepo"),
    "gated/no-token": (401, "GatedRepo"),
    "missing/model": (404, "RepoNotFound"),
    "missing/no-token": (401, "RepoNotFound"),
}


class Hub(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str]]] = []

    def do_HEAD(self) -> None:
        Hub.seen.append((self.path, self.headers.get("Authorization", "")))
        repo = "/".join(self.path.strip("/").split("/")[:2])
        status, code = ANSWERS.get(repo, (404, "RepoNotFound"))
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        if status == 302:
            self.send_header("Location", "http://127.0.0.1:1/cdn")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def hub() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The preflight role's model check.
      ansible.builtin.include_role:
        name: preflight
        tasks_from: models.yml
"""


def _run(tmp: Path, hub: str, ids: list[str], token: str) -> subprocess.CompletedProcess[str]:
    models = {f"m{k}": {"hf_id": i, "revision": "unresolved"} for k, i in enumerate(ids)}
    models["m0"]["revision"] = "a" * 40  # a pinned one is asked at its commit
    (tmp / "play.yml").write_text(PLAY)
    (tmp / "vars.json").write_text(json.dumps({
        "bench_backend": "real", "hf_token": token, "preflight_hub_url": hub,
        "experiment": {"models": models}, "specbench_experiment": "exp.yaml",
    }))  # fmt: skip
    bindir = Path(sys.executable).parent
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(REPO / "ansible" / "roles"),
           "ANSIBLE_CONFIG": str(REPO / "ansible" / "ansible.cfg"),
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
           "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}  # fmt: skip
    return subprocess.run(
        [str(bindir / "ansible-playbook"), "-v", "-e", f"@{tmp / 'vars.json'}",
         str(tmp / "play.yml")],
        capture_output=True, text=True, env=env, cwd=tmp, timeout=300,
    )  # fmt: skip


def test_each_refusal_is_told_apart_and_the_token_never_shows(hub: str, tmp_path: Path) -> None:
    Hub.seen.clear()
    r = _run(tmp_path, hub, list(ANSWERS), TOKEN)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert TOKEN not in out
    assert "The hub (" + hub + ") refuses 5 model repositories of exp.yaml" in out, out
    msg = out[out.index("refuses 5") :]
    assert "needs/token (HTTP 401): token missing or invalid (hf_token is set" in msg
    assert f"gated/model (HTTP 403): gated: accept the licence at {hub}/gated/model with the" in msg
    assert "gated/no-token (HTTP 401): gated: accept the licence" in msg
    assert "missing/model (HTTP 404): no such repository (misspelled, or private and the" in msg
    assert "missing/no-token (HTTP 401): no such repository" in msg
    assert "ok/" not in msg and "Nothing has been downloaded yet" in msg
    # the token went to the hub, in the header only; the pinned commit was asked for
    assert {auth for _, auth in Hub.seen} == {f"Bearer {TOKEN}"}
    assert f"/ok/model/resolve/{'a' * 40}/config.json" in [p for p, _ in Hub.seen]
    assert "/needs/token/resolve/main/config.json" in [p for p, _ in Hub.seen]


def test_readable_repositories_pass_and_no_token_sends_no_header(hub: str, tmp_path: Path) -> None:
    Hub.seen.clear()
    r = _run(tmp_path, hub, ["ok/model", "ok/redirected", "ok/no-config"], "")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(Hub.seen) == 3 and {auth for _, auth in Hub.seen} == {""}
    r = _run(tmp_path, hub, ["gated/no-token"], "")
    assert r.returncode != 0
    assert "with the account of the token, and set hf_token (none is set)" in r.stdout + r.stderr
