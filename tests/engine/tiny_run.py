"""The engine tier's one matrix run (conftest.py's ``tiny_run``):
bench/experiments/tiny-vllm-cpu.yaml through ``specbench matrix --launcher docker``, the baseline
killed after its first level and resumed, the resumed baseline probed before it stops, then
``specbench report``."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import engine_server as es
import pytest

from bench.core import sha256_file
from bench.engines import ContainerSpec, load_experiment
from bench.matrix import DockerLauncher, MatrixOptions, MatrixResult, run_matrix
from bench.matrix._launch import DockerServer, Server
from bench.report import render_report
from bench.tinymodel import TinyModels

EXPERIMENT = "bench/experiments/tiny-vllm-cpu.yaml"


def run_tiny(
    out: Path, models: Path, only: list[str], launcher: DockerLauncher | None = None, **kw: Any
) -> MatrixResult:
    opts = MatrixOptions(
        out=out, only=only, launcher="docker", model_cache=str(models), allow_unpinned=True,
        show_progress=False, **kw,
    )  # fmt: skip
    return run_matrix(load_experiment(EXPERIMENT), opts, launcher=launcher)


@dataclass
class BaselineProbe:
    """What the resumed baseline server answered before it was stopped (test_vllm_cpu.py)."""

    argv: list[str] = field(default_factory=list)  # the container's entrypoint + command
    version: dict[str, Any] = field(default_factory=dict)  # GET /version
    greedy: list[es.Completion] = field(default_factory=list)
    cli_payload: dict[str, Any] = field(default_factory=dict)  # the seed's `specbench run`
    error: str | None = None


class ProbedServer:
    """A matrix server whose stop() first runs the baseline probe (the matrix has finished
    measuring it by then, so the probe disturbs no measured window)."""

    def __init__(self, inner: DockerServer, probe: BaselineProbe, models: Path, work: Path):
        self.inner, self.probe, self.models, self.work = inner, probe, models, work
        self.base_url = inner.base_url

    def alive(self) -> bool:
        return self.inner.alive()

    def exit_code(self) -> int | None:
        return self.inner.exit_code()

    def restarts(self) -> int:
        return self.inner.restarts()

    def log_text(self) -> str:
        return self.inner.log_text()

    def stop(self) -> None:
        if not self.probe.argv and self.inner.alive():
            try:
                config = self.inner.container.attrs["Config"]
                self.probe.argv = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
                self.probe.version = es.version(self.base_url)
                self.probe.greedy = [
                    es.chat_stream(self.base_url, p, es.GREEDY_TOKENS) for p in es.GREEDY_PROMPTS
                ]
                self.probe.cli_payload = es.specbench_run(
                    self.base_url, "baseline", self.models, self.work
                )
            except Exception as err:  # reported by the tests that read the probe
                self.probe.error = f"{type(err).__name__}: {err}"
        self.inner.stop()


class EngineTierLauncher(DockerLauncher):
    """Kills the baseline's first container once its first level's payload is on disk (the
    engine 'crashes' mid-sweep; every other configuration runs untouched), and probes the
    resumed baseline's server before it stops."""

    def __init__(self, payload: Path, models: Path, work: Path) -> None:
        super().__init__()
        self.payload, self.models, self.work = payload, models, work
        self.baseline_starts = 0
        self.probe = BaselineProbe()

    def start(self, spec: ContainerSpec, log_path: Path) -> Server:
        server = super().start(spec, log_path)
        if spec.name is None or not spec.name.endswith("-baseline"):
            return server
        self.baseline_starts += 1
        if self.baseline_starts > 1:
            return ProbedServer(server, self.probe, self.models, self.work)

        def kill() -> None:
            deadline = time.monotonic() + 900
            while not self.payload.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            server.container.kill()

        threading.Thread(target=kill, daemon=True).start()
        return server


class TinyRun(NamedTuple):
    out: Path
    first: MatrixResult  # the run whose baseline container was killed after c1
    first_c1_sha256: str
    resumed: MatrixResult
    probe: BaselineProbe  # the resumed baseline server, probed before it stopped
    image_kernels: dict[str, Any]  # `vllm kernels` in a fresh container of the image


def make_tiny_run(
    vllm_cpu_image: str, tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory
) -> TinyRun:
    """The whole experiment, its baseline killed after c1, then --resume: the oracles below read
    the resumed artifacts (baseline c1 from the first run, c2 and c4 from the second; the prompt
    seed makes them the same prompts either way)."""
    out = tmp_path_factory.mktemp("tiny-matrix") / "run"
    models = tiny_models.target.path.parent
    c1 = out / "payloads" / "baseline-c1.json"
    launcher = EngineTierLauncher(c1, models, tmp_path_factory.mktemp("probe"))
    started = time.monotonic()
    first = run_tiny(out, models, [], launcher=launcher)
    sha = sha256_file(c1) if c1.exists() else ""
    resumed = run_tiny(out, models, [], launcher=launcher, resume=True)
    took = time.monotonic() - started
    print(f"\ntiny matrix with a killed baseline and a resume: {took:.0f} s")
    render_report(out, out / "report")
    raw = launcher.client.containers.run(
        vllm_cpu_image, entrypoint=["vllm"], command=["kernels"], remove=True, stderr=False
    )
    kernels = json.loads(raw.decode().strip().splitlines()[-1])
    return TinyRun(out, first, sha, resumed, launcher.probe, kernels)
