"""The matrix on the emulator as local processes: artifacts, validity, kill + --resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.core import SIMULATED_BANNER, sha256_file
from bench.engines import ContainerSpec, get_engine, load_experiment
from bench.matrix import Artifacts, MatrixOptions, run_matrix
from bench.matrix._launch import ProcessLauncher, Server
from bench.schema import EXPERIMENTS_DIR, AdmissionCap, read_payload

DUMMY_TOKEN = "hf_dummyTOKENvalue0123456789"
TIME_SCALE = "0.01"


def small_experiment(tmp_path: Path, names: dict[str, list[int]]) -> Path:
    """The seed experiment cut to ``names`` (with their levels) and a small workload."""
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    data["configurations"] = [c for c in data["configurations"] if c["name"] in names]
    for c in data["configurations"]:
        c["concurrency"] = names[c["name"]]
    data["workload"].update(prompt_tokens=200, max_tokens=48, warmup=1, iterations=2)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_matrix_writes_valid_artifacts_and_flags_the_broken_draft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", DUMMY_TOKEN)
    exp_path = small_experiment(tmp_path, {"vllm-mtp": [1, 2], "sglang-mtp-stock": [1]})
    exp = load_experiment(exp_path)
    out = tmp_path / "out"
    opts = MatrixOptions(
        out=out, launcher="process", time_scale=float(TIME_SCALE), show_progress=False
    )
    result = run_matrix(exp, opts, experiment_path=exp_path)
    assert [o.status for o in result.outcomes] == ["done", "done"]
    arts = Artifacts(out)
    for p in (arts.lock, arts.hardware, arts.provenance, arts.sums):
        assert p.exists(), p
    good = [read_payload(arts.payload("vllm-mtp", k)) for k in (1, 2)]
    assert all(p.evidence.validity.valid and p.simulated for p in good)
    for p in good:  # every level's logprob probes, sent once the last level was measured
        probes = p.evidence.logprob_probes
        measured = [r.prompt_sha256 for it in p.evidence.iterations if not it.warmup
                    for r in it.requests]  # fmt: skip
        assert probes is not None and probes.note is None
        assert [r.prompt_sha256 for r in probes.requests] == measured
        assert all(len(r.tokens) == p.outputTokens for r in probes.requests)
    bad = read_payload(arts.payload("sglang-mtp-stock", 1))
    assert not bad.evidence.validity.valid
    codes = {r.code for r in bad.evidence.validity.reasons}
    assert {"draft_tensors_skipped", "zero_acceptance"} <= codes
    skipped = next(r for r in bad.evidence.validity.reasons if r.code == "draft_tensors_skipped")
    assert "7 distinct" in skipped.message
    for name in ("vllm-mtp", "sglang-mtp-stock"):
        assert arts.log(name).read_text().startswith(f"# {SIMULATED_BANNER}")
    # What was started is recorded when it ran: the report shows it, never rebuilds it.
    launch = good[0].evidence.launch
    assert launch is not None and good[1].evidence.launch == launch
    vllm_mtp = next(c for c in exp.configurations if c.name == "vllm-mtp")
    assert launch.server_argv == get_engine("vllm").server_argv(vllm_mtp, exp)
    assert (launch.launcher, launch.docker_run) == ("process", None)
    assert launch.argv[:4] == ["python", "-m", "bench.emulator", "vllm"]
    assert launch.admission == AdmissionCap(cap=4, source="flag --max-num-seqs")  # seed flag
    sglang = bad.evidence.launch
    assert sglang is not None and sglang.admission is not None
    line = sglang.admission.source.removeprefix("engine log: ")
    assert line != sglang.admission.source and line in arts.log("sglang-mtp-stock").read_text()
    assert f"max_running_requests={sglang.admission.cap}," in line
    # The tensor-parallel size is the engine's own start-up record (the emulator logs the
    # experiment's size as the engine would), with the line it came from.
    for p in (*good, bad):
        log_tp = p.evidence.server_log.tensor_parallel if p.evidence.server_log else None
        assert log_tp is not None and (log_tp.size, log_tp.configured) == (2, exp.tensor_parallel)
        assert p.engineFlags.tensorParallel == 2 and log_tp.line is not None
    assert "tensor_parallel_size=2" in good[0].evidence.server_log.tensor_parallel.line  # type: ignore[union-attr]
    assert arts.check_sums() == []
    for f in out.rglob("*"):
        if f.is_file():
            assert DUMMY_TOKEN not in f.read_text(errors="replace"), f


def test_killed_matrix_resumes_without_touching_finished_payloads(tmp_path: Path) -> None:
    # File order: vllm-mtp, vllm-baseline, sglang-baseline.
    exp_path = small_experiment(
        tmp_path, {"vllm-mtp": [1, 2], "vllm-baseline": [1, 2], "sglang-baseline": [1, 2, 4]}
    )
    out = tmp_path / "out"
    arts = Artifacts(out)
    argv = [sys.executable, "-m", "bench", "matrix", str(exp_path), "--out", str(out)]
    argv += ["--launcher", "process", "--time-scale", TIME_SCALE, "--no-progress"]
    console = tmp_path / "matrix.out"
    with console.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    first = [arts.payload("vllm-mtp", k) for k in (1, 2)]
    # The next configuration's log appears when its server starts: the first one is closed.
    while not (all(p.exists() for p in first) and arts.log("vllm-baseline").exists()):
        assert proc.poll() is None, console.read_text()
        assert time.monotonic() < deadline, "first configuration never finished"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout=60)
    assert rc != 0
    assert not arts.payload("sglang-baseline", 4).exists(), "the run was not interrupted"
    before = {p: sha256_file(p) for p in first}
    status = json.loads((out / "status.json").read_text())
    assert status["configurations"]["vllm-mtp"]["status"] == "done"

    exp = load_experiment(exp_path)
    opts = MatrixOptions(
        out=out,
        launcher="process",
        time_scale=float(TIME_SCALE),
        resume=True,
        show_progress=False,
    )
    result = run_matrix(exp, opts, experiment_path=exp_path)
    by_name = {o.name: o.status for o in result.outcomes}
    assert by_name["vllm-mtp"] == "skipped"
    assert by_name["sglang-baseline"] == "done"
    # a configuration the resume skipped keeps its payloads' verdict in status.json
    kept = json.loads((out / "status.json").read_text())["configurations"]["vllm-mtp"]
    assert (kept["status"], kept["valid"], kept["reasons"]) == ("skipped", True, [])
    assert {p: sha256_file(p) for p in first} == before
    for name, levels in (("vllm-baseline", [1, 2]), ("sglang-baseline", [1, 2, 4])):
        for k in levels:
            assert read_payload(arts.payload(name, k)).evidence.validity.valid
    assert arts.check_sums() == []


def test_server_that_crashes_at_start_fails_fast_with_its_log(tmp_path: Path) -> None:
    data = yaml.safe_load(small_experiment(tmp_path, {"vllm-baseline": [1]}).read_text())
    data["configurations"][0]["emulator"]["fail"] = ["crash_at_start"]
    path = tmp_path / "crash.yaml"
    path.write_text(yaml.safe_dump(data))
    opts = MatrixOptions(
        out=tmp_path / "o",
        launcher="process",
        show_progress=False,
        time_scale=float(TIME_SCALE),
        ready_timeout_s=60,
    )
    result = run_matrix(load_experiment(path), opts)
    (outcome,) = result.outcomes
    assert outcome.status == "failed"
    # fast: named as an exit before readiness, with its code; a launcher that missed the exit
    # would wait out ready_timeout_s and say "not ready after 60 s" instead
    reason = outcome.reasons[0]
    assert "server exited (code 1) before it was ready" in reason, reason
    assert "last log lines" in reason and "not ready after" not in reason
    assert Artifacts(tmp_path / "o").log("vllm-baseline").exists()


def test_resume_measures_only_the_missing_level_and_keeps_both_logs(tmp_path: Path) -> None:
    exp_path = small_experiment(tmp_path, {"vllm-mtp": [1, 2]})
    exp = load_experiment(exp_path)
    out = tmp_path / "out"
    opts = MatrixOptions(
        out=out, launcher="process", time_scale=float(TIME_SCALE), show_progress=False
    )
    run_matrix(exp, opts, experiment_path=exp_path)
    arts = Artifacts(out)
    kept = arts.payload("vllm-mtp", 1).read_bytes()
    arts.payload("vllm-mtp", 2).unlink()  # as if the run had stopped during the second level
    first_log = arts.log("vllm-mtp").read_text()
    resumed = run_matrix(exp, opts.model_copy(update={"resume": True}), experiment_path=exp_path)
    assert [o.status for o in resumed.outcomes] == ["done"]
    assert arts.payload("vllm-mtp", 1).read_bytes() == kept  # c1 not measured again
    assert read_payload(arts.payload("vllm-mtp", 2)).evidence.validity.valid
    log = arts.log("vllm-mtp").read_text()
    before, sep, after = log.partition("(--resume) ---")
    assert sep and before.startswith(first_log.rstrip())
    assert get_engine("vllm").version_from_log(after) is not None  # the restarted server


class RecordingLauncher(ProcessLauncher):
    """Records when each server was started and stopped (monotonic seconds)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def start(self, spec: ContainerSpec, log_path: Path) -> Server:
        server = super().start(spec, log_path)
        self.events.append(("start", log_path.name))
        stop = server.stop

        def stop_and_record() -> None:
            self.events.append(("stop", log_path.name))
            stop()

        server.stop = stop_and_record  # type: ignore[method-assign]
        return server


def test_prestart_starts_every_emulator_first_and_keeps_each_log(tmp_path: Path) -> None:
    """MatrixOptions.prestart (the demo): every emulator is started before the first one is
    measured and stopped; each configuration's log is its own server's, and no start-up log
    is left behind."""
    exp_path = small_experiment(
        tmp_path, {"vllm-mtp": [1], "sglang-mtp": [1], "vllm-baseline": [1]}
    )
    out = tmp_path / "out"
    opts = MatrixOptions(
        out=out, launcher="process", time_scale=float(TIME_SCALE), show_progress=False,
        prestart=True,
    )  # fmt: skip
    launcher = RecordingLauncher()
    result = run_matrix(load_experiment(exp_path), opts, launcher=launcher)
    assert [o.status for o in result.outcomes] == ["done", "done", "done"]
    kinds = [kind for kind, _ in launcher.events]
    assert kinds == ["start"] * 3 + ["stop"] * 3, launcher.events
    assert {name for _, name in launcher.events} == {
        "vllm-mtp.starting", "sglang-mtp.starting", "vllm-baseline.starting"
    }  # fmt: skip
    logs = Artifacts(out).root / "logs"
    assert sorted(p.name for p in logs.iterdir()) == [
        "sglang-mtp.log", "vllm-baseline.log", "vllm-mtp.log"
    ]  # fmt: skip
    assert "profile sglang-mtp" in (logs / "sglang-mtp.log").read_text()
    assert "profile vllm-baseline" in (logs / "vllm-baseline.log").read_text()
    for k in ("vllm-mtp", "sglang-mtp", "vllm-baseline"):
        p = read_payload(Artifacts(out).payload(k, 1))
        assert p.evidence.validity.valid, k
        # the launch record is the prestarted server's own: the port it was measured on
        launch = p.evidence.launch
        assert launch is not None, k
        port = launch.argv[launch.argv.index("--port") + 1]
        assert p.evidence.run.base_url.endswith(f":{port}"), (k, launch.argv)


def test_a_resume_with_only_keeps_the_status_of_the_configurations_it_does_not_run(
    tmp_path: Path,
) -> None:
    # Seen on the GPU (2026-12-06): the stock configuration ran first (--only), then the patched
    # ones (--resume --only ...), and status.json then listed the patched ones alone: the stock
    # run's failure and its reasons were gone from the run's record.
    exp_path = small_experiment(tmp_path, {"vllm-baseline": [1], "vllm-mtp": [1]})
    exp = load_experiment(exp_path)
    out = tmp_path / "out"
    opts = MatrixOptions(
        out=out, launcher="process", time_scale=float(TIME_SCALE), show_progress=False
    )
    run_matrix(exp, opts.model_copy(update={"only": ["vllm-mtp"]}), experiment_path=exp_path)
    first = json.loads(Artifacts(out).status.read_text())["configurations"]
    assert list(first) == ["vllm-mtp"]
    again = opts.model_copy(update={"only": ["vllm-baseline"], "resume": True})
    run_matrix(exp, again, experiment_path=exp_path)
    status = json.loads(Artifacts(out).status.read_text())["configurations"]
    order = [c.name for c in exp.configurations]
    assert list(status) == sorted(status, key=order.index)  # the experiment's order
    assert set(status) == {"vllm-baseline", "vllm-mtp"}
    assert status["vllm-mtp"] == first["vllm-mtp"]
    assert status["vllm-baseline"]["status"] == "done"
