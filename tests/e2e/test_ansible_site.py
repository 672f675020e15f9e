"""site.yml for real against localhost with the emulated backend, driven by ansible-runner.

One provisioning + benchmark + report run, then the provisioning roles again (changed=0),
then the whole playbook in --check. The HF token given to the runs (a random dummy) must appear
in no output, log or artifact: only in the host's 0600 token file.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.schema import LOCK_FILE, RunLock, read_payload

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "ansible"
CONFIGS = ["vllm-dflash", "sglang-mtp"]
PROVISION_TAGS = "provision,images,models"


class Site:
    """The three runs and where they wrote."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "host"
        self.reports = tmp / "controller-reports"
        self.stage = tmp / "stage"
        self.token = "hf_e2e" + secrets.token_hex(16)
        self.secret_file = tmp / "secret.yml"
        self.secret_file.write_text(yaml.safe_dump({"hf_token": self.token}))
        self.secret_file.chmod(0o600)
        # the inventory's host vars in a vault-encrypted file, as for the example's hf_token:
        # the verify role's testinfra must not need the vault secret (issue #21: its
        # ansible-inventory stopped with "Attempting to decrypt but no vault secrets found")
        self.vault_password = tmp / "vault-password"
        self.vault_password.write_text(secrets.token_hex(16))
        self.vault_password.chmod(0o600)
        plain = tmp / "host-vars.yml"
        plain.write_text("specbench_e2e_vaulted: not a secret\n")
        subprocess.run(
            [str(Path(sys.executable).parent / "ansible-vault"), "encrypt",
             "--vault-password-file", str(self.vault_password), str(plain)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        self.host_vars = plain.read_text()
        assert self.host_vars.startswith("$ANSIBLE_VAULT;")
        self.runs: dict[str, Any] = {}

    def extravars(self) -> dict[str, Any]:
        return {
            "bench_backend": "emulated",
            "specbench_home": str(self.home),
            "report_controller_dir": str(self.reports),
            "bundle_stage_dir": str(self.stage),
            "report_stage_dir": str(self.stage),
            "verify_expect_file": str(self.stage / "infra-expect.json"),
            "benchmark_only": CONFIGS,
            "benchmark_iterations": 1,
            "benchmark_warmup": 0,
            "benchmark_run_id": "e2e",
        }

    def run(self, name: str, cmdline: str = "") -> Any:
        import ansible_runner

        bindir = str(Path(sys.executable).parent)
        private = self.tmp / "runner" / name
        (private / "inventory" / "host_vars").mkdir(parents=True)
        (private / "inventory" / "host_vars" / "localhost.yml").write_text(self.host_vars)
        r = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(ANSIBLE),
            playbook="site.yml",
            inventory={
                "all": {
                    "hosts": {
                        "localhost": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                        }
                    }
                }
            },
            extravars=self.extravars(),
            # the token travels in a vars file, like a vault: never on a command line
            cmdline=(
                f"-e @{self.secret_file} --vault-password-file {self.vault_password} {cmdline}"
            ).strip(),
            envvars={
                "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
                "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg"),
            },
            quiet=True,
            timeout=900,
        )
        self.runs[name] = r
        return r


def _stdout_tail(r: Any) -> str:
    return (Path(r.config.artifact_dir) / "stdout").read_text()[-4000:]


def _failures(r: Any) -> list[str]:
    out = []
    for e in r.events:
        if e.get("event") == "runner_on_failed" and not e["event_data"].get("ignore_errors"):
            d = e["event_data"]
            out.append(f"{d.get('task')}: {json.dumps(d.get('res', {}))[:1500]}")
    return out


@pytest.fixture(scope="module")
def site(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    s = Site(tmp_path_factory.mktemp("ansible-site"))
    first = s.run("full")
    assert first.rc == 0, "\n".join(_failures(first)) or _stdout_tail(first)
    yield s


def test_report_is_fetched_to_the_controller(site: Site) -> None:
    # reports/<run id>/<inventory_hostname>/, and the fleet summary next to it
    run_dir = site.reports / "e2e" / "localhost"
    report = (run_dir / "REPORT.md").read_text()
    assert "SIMULATED" in report
    for cfg in CONFIGS:
        assert cfg in report
        assert (run_dir / "artifacts" / "logs" / f"{cfg}.log").is_file()
        assert sorted((run_dir / "artifacts" / "payloads").glob(f"{cfg}-c*.json"))
    assert sorted(run_dir.glob("*.svg")), "charts missing"
    status = json.loads((run_dir / "artifacts" / "status.json").read_text())
    assert status, "empty status.json"
    # the fetched copy is the host's run, byte for byte
    sums = (run_dir / "artifacts" / "SHA256SUMS").read_bytes()
    assert sums == (site.home / "reports" / "e2e" / "artifacts" / "SHA256SUMS").read_bytes()
    fleet = json.loads((site.reports / "e2e" / "fleet.json").read_text())
    assert fleet["hosts"] == [
        {
            "host": "localhost",
            "status": "ok",
            "run": "e2e",
            "task": "",
            "report": str(run_dir / "REPORT.md"),
            "why": "",
        }
    ]


def test_emulator_ran_in_containers(site: Site, docker_client: Any) -> None:
    expect = json.loads((site.stage / "infra-expect.json").read_text())
    assert docker_client.images.get(expect["emulator_image"])
    log_dir = site.reports / "e2e" / "localhost" / "artifacts" / "logs"
    log = (log_dir / f"{CONFIGS[0]}.log").read_text()
    assert log.strip(), "the container's log is empty"
    # The run itself says it used containers: the lock's launcher and each payload's launch.
    arts = log_dir.parent
    lock = RunLock.model_validate_json((arts / LOCK_FILE).read_text())
    assert (lock.launcher, lock.simulated) == ("docker", True)
    payloads = sorted((arts / "payloads").glob("*.json"))
    assert {p.name.rsplit("-c", 1)[0] for p in payloads} == set(CONFIGS)
    for path in payloads:
        launch = read_payload(path).evidence.launch
        assert launch is not None and launch.launcher == "docker", path.name
        assert launch.image == expect["emulator_image"], path.name
        assert launch.docker_run is not None and launch.docker_run.startswith("docker run ")


def test_second_provisioning_run_changes_nothing(site: Site) -> None:
    r = site.run("idempotence", f"--tags {PROVISION_TAGS}")
    assert r.rc == 0, "\n".join(_failures(r))
    changed = {
        e["event_data"]["task"]
        for e in r.events
        if e.get("event") == "runner_on_ok" and e["event_data"].get("res", {}).get("changed")
    }
    assert r.stats["changed"] == {}, f"changed on the second run: {sorted(changed)}"


def test_check_mode_completes_without_failures(site: Site) -> None:
    r = site.run("check", "--check")
    assert r.rc == 0, "\n".join(_failures(r))
    assert r.stats["failures"] == {}


def test_hf_token_appears_nowhere_but_its_private_file(site: Site) -> None:
    token_file = site.home / "secrets" / "hf_token"
    assert token_file.read_text() == site.token, "the token did not reach the host"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    leaks: list[str] = []
    stdouts = [Path(r.config.artifact_dir) / "stdout" for r in site.runs.values()]
    assert all(p.is_file() and p.stat().st_size > 0 for p in stdouts), "runner output missing"
    # the runner artifacts (stdout, job events, command) are scanned with everything else
    roots = [site.tmp / "runner", site.home, site.reports, site.stage]
    for root in roots:
        for p in root.rglob("*"):
            if p == token_file or not p.is_file() or p.is_symlink():
                continue
            if site.token.encode() in p.read_bytes():
                leaks.append(str(p))
    assert leaks == []
