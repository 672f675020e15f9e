"""The engine tier's one matrix run (conftest.py's ``tiny_run``):
bench/experiments/tiny-vllm-cpu.yaml through ``specbench matrix --launcher docker``, the baseline
killed in the middle of a measured iteration of its second level (c=2: its streams under way,
as the engine's own token counter shows) and resumed, the resumed baseline probed before it
stops, then ``specbench report``."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import engine_server as es
import pytest

from bench.core import sha256_file
from bench.engines import ContainerSpec, load_experiment
from bench.matrix import DockerLauncher, MatrixOptions, MatrixResult, run_matrix
from bench.matrix import _configuration as configuration
from bench.matrix._launch import DockerServer, Server
from bench.measure import Measured, RunSpec
from bench.measure._loop import ProgressSink
from bench.report import render_report
from bench.schema import IterationRecord, Payload, read_payload
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


#: the level whose first measured iteration the kill lands in (the baseline's second level)
#: the configuration killed, and its levels the killer watches in turn (c=4 only when a
#: loaded machine let every iteration of c=2 pass before a look could land in it)
KILLED_CONFIG, KILLED_LEVELS = "baseline", (2, 4)
#: vLLM's own count of the tokens it generated (vllm/v1/metrics/loggers.py)
GENERATED = re.compile(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)$", re.MULTILINE)


#: vLLM's gauge of the requests in its running batch (vllm/v1/metrics/loggers.py)
RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", re.MULTILINE)


def engine_counts(base_url: str) -> tuple[float, float]:
    """(tokens the engine generated so far, requests in its running batch now)."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=5) as r:
        text = r.read().decode()
    running = sum(float(v) for v in RUNNING.findall(text))
    return sum(float(v) for v in GENERATED.findall(text)), running


@dataclass
class Kill:
    """What the mid-iteration kill saw (the tests check it landed inside the streams)."""

    iteration: int | None = None  # the measured iteration whose streams it cut
    level: int | None = None  # the concurrency level that iteration was of
    generated_before: float | None = None  # the engine's generated tokens as that one began
    generated_at_kill: float | None = None  # ... at the look that fired the kill
    passed: list[tuple[int, int]] = field(default_factory=list)  # (level, iteration) let go
    error: str | None = None


class EngineTierLauncher(DockerLauncher):
    """Kills the baseline's first container in the middle of a measured iteration (the engine
    'crashes' while streams are under way; every other configuration runs untouched), and
    probes the resumed baseline's server before it stops.

    The kill is pinned to what the engine itself reports, never to a moment predicted: the
    measurement's progress hook says when each measured iteration of the baseline's c=2 level
    (then c=4, if every one of c=2 went by too fast to be seen) begins (before its streams are
    sent) and ends, and the engine's generated-token counter is
    read then. A killer thread watches the counter and kills the container (SIGKILL to its init
    process, at once: no Docker API call between the look and the kill) at the first look that
    shows every stream of the iteration under way (all of them in the engine's running batch,
    2 tokens each generated) with at least half of the iteration's tokens still to come. A
    look that comes later than that (a loaded machine can delay it past the iteration's end)
    lets the iteration go, and the next one is watched: the kill never lands in an iteration
    other than the one it names."""

    def __init__(self, models: Path, work: Path) -> None:
        super().__init__()
        self.models, self.work = models, work
        self.baseline_starts = 0
        self.probe = BaselineProbe()
        self.kill = Kill()
        self.first_baseline: DockerServer | None = None
        #: (level's spec, index, generated tokens as it began) of the iteration under way
        self.under_way: tuple[RunSpec, int, float] | None = None
        self.killer: threading.Thread | None = None

    def start(self, spec: ContainerSpec, log_path: Path) -> Server:
        server = super().start(spec, log_path)
        if spec.name is None or not spec.name.endswith("-baseline"):
            return server
        self.baseline_starts += 1
        if self.baseline_starts > 1:
            return ProbedServer(server, self.probe, self.models, self.work)
        assert isinstance(server, DockerServer)
        self.first_baseline = server
        return server

    def iteration_began(self, spec: RunSpec, index: int) -> None:
        server = self.first_baseline
        if server is None or self.kill.iteration is not None or self.baseline_starts > 1:
            return
        try:
            before, _ = engine_counts(spec.base_url)
        except OSError as err:
            self.kill.error = f"metrics as iteration {index} began: {err}"
            return
        self.under_way = (spec, index, before)
        if self.killer is None:
            self.killer = threading.Thread(
                target=self.kill_mid_iteration, args=(server,), daemon=True
            )
            self.killer.start()

    def iteration_ended(self, index: int) -> None:
        if self.under_way is not None and self.under_way[1] == index:
            self.under_way = None

    def kill_mid_iteration(self, server: DockerServer) -> None:
        deadline = time.monotonic() + 900  # a hang guard, not a timing bound
        server.container.reload()
        pid = int(server.container.attrs["State"]["Pid"])  # the host's pid of its init
        if pid <= 0:
            self.kill.error = f"no pid for the container: {server.container.attrs['State']}"
            return
        try:
            while time.monotonic() < deadline and self.kill.error is None:
                looked_at = self.under_way
                if looked_at is None:
                    time.sleep(0.005)
                    continue
                spec, index, before = looked_at
                first_tokens = 2 * spec.concurrency  # a couple of tokens for each stream
                half = spec.concurrency * spec.max_tokens / 2
                now, running = engine_counts(spec.base_url)
                # every stream in the engine's batch at once: under load one request can reach
                # the engine only after the other has finished (2026-12-07: one stream whole,
                # the other not yet answered when the kill came), so the token count alone
                # does not show each one under way
                if now < before + first_tokens or (
                    running < spec.concurrency and now <= before + half
                ):
                    time.sleep(0.005)
                    continue
                if now > before + half or self.under_way != looked_at:
                    # seen too late: the next one is watched
                    self.kill.passed.append((spec.concurrency, index))
                    while self.under_way == looked_at and time.monotonic() < deadline:
                        time.sleep(0.005)
                    continue
                self.kill.iteration, self.kill.generated_before = index, before
                self.kill.level = spec.concurrency
                self.kill.generated_at_kill = now
                # SIGKILL straight to the container's init process: through the Docker API the
                # kill of a loaded run (two burners, 2026-12-07) landed only after the rest of
                # the iteration's 299 tokens were out, and cut nothing
                os.kill(pid, signal.SIGKILL)
                return
            self.kill.error = self.kill.error or "no look found a measured iteration under way"
        except OSError as err:
            self.kill.error = f"metrics while waiting for the streams: {err}"


class ArmingSink:
    """The measurement's progress sink, passed through, that tells the launcher when each
    measured iteration of the killed level begins and ends."""

    def __init__(self, inner: ProgressSink | None, spec: RunSpec, launcher: EngineTierLauncher):
        self.inner, self.spec, self.launcher = inner, spec, launcher

    def iteration_started(self, index: int, total: int, warmup: bool) -> None:
        if self.inner is not None:
            self.inner.iteration_started(index, total, warmup)
        if not warmup:
            self.launcher.iteration_began(self.spec, index)

    def iteration_finished(self, record: IterationRecord) -> None:
        self.launcher.iteration_ended(record.index)
        if self.inner is not None:
            self.inner.iteration_finished(record)


def run_with_a_mid_iteration_kill(
    out: Path, models: Path, launcher: EngineTierLauncher
) -> MatrixResult:
    """The first matrix run, the kill armed through the measurement's progress hook."""
    real = configuration.measure_level

    def measure_level(spec: RunSpec, progress: ProgressSink | None = None, **kw: Any) -> Measured:
        if spec.config_name == KILLED_CONFIG and spec.concurrency in KILLED_LEVELS:
            progress = ArmingSink(progress, spec, launcher)
        return real(spec, progress, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(configuration, "measure_level", measure_level)
        return run_tiny(out, models, [], launcher=launcher)


class TinyRun(NamedTuple):
    out: Path
    first: MatrixResult  # the run whose baseline container was killed mid-iteration
    first_valid_sha256: dict[str, str]  # each valid payload the first run wrote, by name
    killed: Payload | None  # the killed level's payload as the killed run wrote it
    kill: Kill
    resumed: MatrixResult
    probe: BaselineProbe  # the resumed baseline server, probed before it stopped
    image_kernels: dict[str, Any]  # `vllm kernels` in a fresh container of the image


def make_tiny_run(
    vllm_cpu_image: str, tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory
) -> TinyRun:
    """The whole experiment, its baseline killed while the first measured iteration of c=2
    streams, then --resume: the oracles below read the resumed artifacts (baseline c1 from the
    first run, c2 and c4 from the second; the prompt seed makes them the same prompts either
    way)."""
    out = tmp_path_factory.mktemp("tiny-matrix") / "run"
    models = tiny_models.target.path.parent
    launcher = EngineTierLauncher(models, tmp_path_factory.mktemp("probe"))
    started = time.monotonic()
    first = run_with_a_mid_iteration_kill(out, models, launcher)
    shas = {  # resume measures an invalid level again: only the valid ones must stay
        p.name: sha256_file(p)
        for p in sorted((out / "payloads").glob("*.json"))
        if read_payload(p).evidence.validity.valid
    }
    cut = out / "payloads" / f"{KILLED_CONFIG}-c{launcher.kill.level}.json"
    killed = read_payload(cut) if launcher.kill.level is not None and cut.exists() else None
    resumed = run_tiny(out, models, [], launcher=launcher, resume=True)
    took = time.monotonic() - started
    print(f"\ntiny matrix with a baseline killed mid-iteration and a resume: {took:.0f} s")
    k = launcher.kill
    print(
        f"the kill: iteration {k.iteration} at c={k.level}, engine tokens {k.generated_before}"
        f" -> {k.generated_at_kill}; let go first: {k.passed or 'none'}; error: {k.error}"
    )
    render_report(out, out / "report")
    raw = launcher.client.containers.run(
        vllm_cpu_image, entrypoint=["vllm"], command=["kernels"], remove=True, stderr=False
    )
    kernels = json.loads(raw.decode().strip().splitlines()[-1])
    return TinyRun(out, first, shas, killed, launcher.kill, resumed, launcher.probe, kernels)
