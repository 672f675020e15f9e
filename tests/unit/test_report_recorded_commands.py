"""The report shows the commands a run used, as its artifacts recorded them, and never rebuilds
them with the engine adapters of the day it renders (issue 22, item 8)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from report_factory import Spec, seed_matrix, write_artifacts

from bench.engines import load_experiment, plan_entries
from bench.report import load_artifacts, render_report
from bench.schema import AdmissionCap, LaunchRecord

SEED = "bench/experiments/qwen38-27b-gptq-2x3090.yaml"
# A server argv an older specbench might have built: a flag today's adapter does not emit.
OLD_ARGV = [
    "vllm",
    "serve",
    "/models/Qwen3.8-27B-GPTQ-4bit",
    "--max-num-seqs",
    "16",
    "--flag-of-an-older-specbench",
    "on",
    "--port",
    "8000",
]
OLD_DOCKER_RUN = (
    "docker run --rm -d --name specbench-20260101-vllm-dflash --gpus all --ipc=host "
    "-p 127.0.0.1:41234:8000 -v /srv/models:/models:ro -e HF_TOKEN "
    "--entrypoint vllm vllm/vllm-openai:v0.0-old serve /models/Qwen3.8-27B-GPTQ-4bit "
    "--flag-of-an-older-specbench on"
)


def _todays_docker_runs() -> list[str]:
    return [e.docker_run for e in plan_entries(load_experiment(SEED))]


def _single(specs: list[Spec]) -> list[Spec]:
    return [s for s in specs if s.concurrency == 1]


def test_recorded_launch_is_shown_not_todays_plan(tmp_path: Path) -> None:
    specs = _single(seed_matrix())
    old = LaunchRecord(
        launcher="docker",
        image="vllm/vllm-openai:v0.0-old",
        server_argv=OLD_ARGV,
        argv=OLD_ARGV,
        docker_run=OLD_DOCKER_RUN,
        admission=AdmissionCap(cap=3, source="engine log: max_num_seqs resolved to 3"),
    )
    specs = [dataclasses.replace(s, launch=old) if s.config == "vllm-dflash" else s for s in specs]
    art = write_artifacts(tmp_path / "art", specs)
    text = render_report(art, tmp_path / "out").read_text(encoding="utf-8")
    section = text.split("## Reproduction commands")[1].split("## Artifacts")[0]
    assert OLD_DOCKER_RUN in section
    assert "--flag-of-an-older-specbench on" in section
    vllm_today = next(e for e in plan_entries(load_experiment(SEED)) if e.name == "vllm-dflash")
    assert "--flag-of-an-older-specbench" not in vllm_today.command  # the recording is not today's
    assert vllm_today.docker_run not in section
    assert "recorded in the payloads when the matrix started each server" in section
    info = load_artifacts(art).config_info("vllm-dflash")
    assert info is not None
    assert (info.admission_cap, info.admission_source) == (
        3,
        "engine log: max_num_seqs resolved to 3",
    )  # the recorded cap, not the lock's --max-num-seqs 16


def test_old_run_without_launch_records_shows_the_argv_it_recorded(tmp_path: Path) -> None:
    """Artifacts written before launch records: the payloads' ``evidence.run.command`` (the
    server argv the matrix recorded) is shown, and no docker run line is made up."""
    specs = [dataclasses.replace(s, command=OLD_ARGV) for s in _single(seed_matrix())]
    art = write_artifacts(tmp_path / "art", specs, record_launch=False)
    text = render_report(art, tmp_path / "out").read_text(encoding="utf-8")
    section = text.split("## Reproduction commands")[1].split("## Artifacts")[0]
    assert section.count("--flag-of-an-older-specbench") == 4  # one server command per config
    assert "docker run" not in section.replace("no docker run line was recorded", "")
    assert "predate the launch record" in section
    for line in _todays_docker_runs():
        assert line not in section


def test_simulated_run_shows_what_ran_in_the_servers_place(tmp_path: Path) -> None:
    """An emulated run records both the server argv it stood for and the emulator it started."""
    emulator = ["python", "-m", "bench.emulator", "vllm", "--port", "8000"]
    launch = LaunchRecord(launcher="process", server_argv=OLD_ARGV, argv=emulator)
    specs = [dataclasses.replace(s, launch=launch) for s in _single(seed_matrix())]
    text = render_report(write_artifacts(tmp_path / "art", specs), tmp_path / "out").read_text()
    assert "vllm-dflash: started in its place (process)" in text
    assert "python -m bench.emulator vllm" in text


def test_payloads_of_specbench_run_show_their_measurement_command(tmp_path: Path) -> None:
    """No lock, no launch record: ``specbench run`` measured a server it did not start."""
    art = write_artifacts(tmp_path / "art", _single(seed_matrix()), record_launch=False)
    (art / "experiment.lock.json").unlink()
    text = render_report(art, tmp_path / "out").read_text(encoding="utf-8")
    section = text.split("## Reproduction commands")[1].split("## Artifacts")[0]
    assert "vllm-dflash: measurement command" in section
    assert "server command" not in section.replace("no server command was recorded", "")
