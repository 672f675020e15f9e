"""A matrix meets faults one configuration at a time (issue 38, fault 7 and the server faults at
the matrix level): an engine that dies at start-up of a known cause, its line quoted, and one
whose server misbehaves mid-run, judged invalid; each time the next configuration runs and is
valid. The emulator as local processes, through `specbench matrix` itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.cli import main
from bench.engines import ContainerSpec, load_experiment
from bench.matrix import Artifacts, MatrixOptions, run_matrix
from bench.matrix import _run as matrix_run
from bench.matrix._launch import ProcessLauncher, Server
from bench.schema import EXPERIMENTS_DIR, read_payload

pytestmark = pytest.mark.integration

#: the known lines the emulator prints for its fatal start-up modes (bench/emulator/server.py)
OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
WEIGHTS_LINE = "RuntimeError: Cannot find any model weights with `/models/"


def experiment(tmp_path: Path, faults: dict[str, list[str]]) -> Path:
    """The seed experiment cut to the configurations of ``faults`` (in that order), each at
    concurrency 1 with its emulator failure modes, and a small workload."""
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    by_name = {c["name"]: c for c in data["configurations"]}
    data["configurations"] = [by_name[n] for n in faults]
    for c in data["configurations"]:
        c["concurrency"] = [1]
        c["emulator"]["fail"] = faults[c["name"]]
    data["workload"].update(prompt_tokens=200, max_tokens=48, warmup=1, iterations=2)
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class OomKilledLauncher(ProcessLauncher):
    """The vllm-baseline emulator exits with 137, the code of a process the kernel's OOM killer
    ended (SIGKILL: 128 + 9), as Docker reports an OOM-killed container."""

    def start(self, spec: ContainerSpec, log_path: Path) -> Server:
        if spec.name is not None and spec.name.endswith("-vllm-baseline"):
            spec = ContainerSpec(
                **{**spec.__dict__, "command": [*spec.command, "--exit-code", "137"]}
            )
        return super().start(spec, log_path)


def test_known_fatal_causes_are_quoted_and_the_matrix_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fault 7 (CUDA out of memory at start-up, exit 137; weights missing) and a server fault
    mid-run (the engine restarting inside a measured window) in one matrix: the first two fail
    with the engine's own line quoted (it sits above a 49-line traceback, out of the failure's
    last 40 log lines), the third is judged invalid with the reason, and the configuration
    after each runs and is valid."""
    path = experiment(
        tmp_path,
        {
            "vllm-baseline": ["cuda_oom_at_start"],
            "sglang-baseline": ["weights_missing"],
            "vllm-mtp": ["engine_restart"],
            "sglang-mtp": [],
        },
    )
    monkeypatch.setattr(matrix_run, "ProcessLauncher", OomKilledLauncher)
    out = tmp_path / "out"
    argv = ["matrix", str(path), "--out", str(out), "--launcher", "process", "--emulate"]
    argv += ["--time-scale", "0.01", "--no-progress", "--ready-timeout", "60"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    printed = capsys.readouterr()
    assert exc.value.code == 1, printed  # configurations failed: exit 1, never a traceback
    assert "Traceback" not in printed.err and "internal error" not in printed.err, printed.err
    assert "2 configuration(s) failed" in printed.err
    # what the user reads names each cause in the first lines printed for it
    oom, weights = printed.out.split("vllm-baseline: failed")[1].split("sglang-baseline: failed")
    assert "cuda_out_of_memory" in oom and OOM_LINE in oom and "exit code 137" in oom, oom
    assert "weights_missing" in weights.split("vllm-mtp:")[0] and WEIGHTS_LINE in weights

    status = json.loads(Artifacts(out).status.read_text())["configurations"]
    assert [status[n]["status"] for n in status] == ["failed", "failed", "done", "done"], status
    assert status["vllm-baseline"]["reasons"][0].startswith(
        "vllm-baseline: server exited (code 137) before it was ready"
    )
    # the quoted line is not in the failure's tail: without the quote the cause was lost
    assert OOM_LINE not in status["vllm-baseline"]["reasons"][0]
    assert any(
        r.startswith("the server log names the cause: cuda_out_of_memory: ") and OOM_LINE in r
        for r in status["vllm-baseline"]["reasons"]
    ), status["vllm-baseline"]["reasons"]
    assert any("SIGKILL" in r for r in status["vllm-baseline"]["reasons"])
    assert any(
        r.startswith("the server log names the cause: weights_missing: ") and WEIGHTS_LINE in r
        for r in status["sglang-baseline"]["reasons"]
    ), status["sglang-baseline"]["reasons"]
    assert not any("SIGKILL" in r for r in status["sglang-baseline"]["reasons"])  # exit 1
    # each failed configuration's log is kept whole, the quoted line in it
    assert OOM_LINE in Artifacts(out).log("vllm-baseline").read_text()

    # the server fault mid-run: the payload is written, invalid, with the reason
    restarted = read_payload(Artifacts(out).payload("vllm-mtp", 1))
    assert not restarted.evidence.validity.valid
    assert "metrics_counters_reset" in {r.code for r in restarted.evidence.validity.reasons}
    assert status["vllm-mtp"]["valid"] is False
    # ... and the configuration after it ran, valid
    after = read_payload(Artifacts(out).payload("sglang-mtp", 1))
    assert after.evidence.validity.valid, after.evidence.validity.reasons
    assert status["sglang-mtp"]["valid"] is True
    assert Artifacts(out).check_sums() == []


class LateExitServer:
    """A process server whose exit is reported late, as Docker reports a killed container's
    (its port proxy accepting connections and closing them meanwhile): the first LAG_LOOKS
    looks after the process died still find it alive. Counted in looks, not seconds, so the
    lag is the same however loaded the machine (a lag in seconds raced the matrix's watch)."""

    LAG_LOOKS = 3

    def __init__(self, inner: Server) -> None:
        self.inner, self.base_url = inner, inner.base_url
        self.looks_since_death = 0

    def alive(self) -> bool:
        if self.inner.alive():
            return True
        self.looks_since_death += 1
        return self.looks_since_death <= self.LAG_LOOKS

    def exit_code(self) -> int | None:
        return None if self.alive() else self.inner.exit_code()

    def restarts(self) -> int:
        return 0

    def log_text(self) -> str:
        return self.inner.log_text()

    def stop(self) -> None:
        self.inner.stop()


class LateExitLauncher(ProcessLauncher):
    def __init__(self) -> None:
        super().__init__()
        self.servers: list[LateExitServer] = []

    def start(self, spec: ContainerSpec, log_path: Path) -> Server:
        server = LateExitServer(super().start(spec, log_path))
        self.servers.append(server)
        return server


def test_a_server_that_dies_inside_a_level_is_named_as_exited(tmp_path: Path) -> None:
    """Fault 6's shape on the emulator: the server exits in the middle of a measured iteration
    (exit_mid_run) and its exit shows a second later. The configuration fails naming the exit
    and its code at that level, not the next level's refused connection (or nothing: a last
    level was 'done'); the configuration after it runs, valid."""
    path = experiment(tmp_path, {"vllm-baseline": ["exit_mid_run"], "sglang-baseline": []})
    data = yaml.safe_load(path.read_text())
    data["configurations"][0]["concurrency"] = [1, 2]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    opts = MatrixOptions(
        out=tmp_path / "out", launcher="process", time_scale=0.01, show_progress=False
    )
    launcher = LateExitLauncher()
    result = run_matrix(load_experiment(path), opts, launcher=launcher)
    # the exit was hidden from the matrix's first looks, and it looked again until it saw it
    dead = launcher.servers[0]
    assert dead.looks_since_death > LateExitServer.LAG_LOOKS, dead.looks_since_death
    assert [o.status for o in result.outcomes] == ["failed", "done"], result.outcomes
    reasons = result.outcomes[0].reasons
    assert reasons[-1] == "vllm-baseline: server exited (code 1) during the sweep (c=1)", reasons
    assert reasons[0].startswith("c=1 invalid_iteration: ")  # the cut streams, named
    after = read_payload(Artifacts(tmp_path / "out").payload("sglang-baseline", 1))
    assert after.evidence.validity.valid, after.evidence.validity.reasons
