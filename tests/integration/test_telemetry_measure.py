"""GPU telemetry through the real measurement path: ``bench.measure.measure`` and the matrix
against the in-thread emulator, with NVML answered by the fake two-3090 ``pynvml``
(tests/unit/fake_nvml.py), which reports a software power cap on every read."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.emulator import serve_in_thread
from bench.emulator.runner import EmulatorHandle
from bench.engines import ContainerSpec, load_experiment
from bench.machine import SamplerStart
from bench.matrix import MatrixOptions, run_matrix
from bench.measure import RunSpec, measure
from bench.schema import Hardware, Payload, TelemetrySummary, read_payload

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
import fake_nvml
from test_matrix_process import small_experiment

from bench.machine import open_sampler

HW = Hardware(
    hwClass="DISCRETE_GPU",
    gpuName="NVIDIA GeForce RTX 3090",
    gpuCount=2,
    vramGb=48.0,
    cpu="test",
    ramGb=64.0,
    os="Linux",
)
INTERVAL_S = 0.01


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> object:
    fake = fake_nvml.make()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorHandle]:
    handle = serve_in_thread("vllm", "vllm-mtp", time_scale=0.01, served_model="m")
    assert handle.wait_ready(30)
    yield handle
    handle.stop()


def _check_summary(p: Payload) -> TelemetrySummary:
    summ = p.evidence.telemetry
    assert isinstance(summ, TelemetrySummary), summ
    measured = [it for it in p.evidence.iterations if not it.warmup]
    assert summ.windowCount == len(measured) == p.evidence.workload.iterations
    assert [(w.start, w.end) for w in summ.windows] == [
        (it.window_start, it.window_end) for it in measured
    ]
    assert [g.gpu for g in summ.gpus] == [0, 1]
    tokens = sum(r.completion_tokens or 0 for it in measured for r in it.requests)
    assert summ.outputTokens == tokens > 0
    assert summ.totalEnergyJ is not None and summ.totalEnergyJ > 0
    assert summ.energyPerOutputTokenJ == pytest.approx(summ.totalEnergyJ / tokens, rel=1e-3)
    warn = [r for r in p.evidence.validity.reasons if r.code == "gpu_throttled"]
    assert {w.severity for w in warn} == {"warning"} and len(warn) == 2
    assert "sw_power_cap" in warn[0].message
    assert p.evidence.validity.valid  # throttling warns, it never invalidates
    return summ


def test_measure_cuts_one_sampler_to_each_measured_iteration(
    nvml: object, emulator: EmulatorHandle
) -> None:
    started = open_sampler(interval_s=INTERVAL_S)
    assert started.sampler is not None, started.reason
    spec = RunSpec(
        engine="vllm",
        base_url=emulator.base_url,
        hf_id="org/model",
        served_model="m",
        quantization="GPTQ-4bit",
        hardware=HW,
        spec_method="MTP",
        spec_num_tokens=3,
        prompt_tokens=64,
        max_tokens=24,
        concurrency=2,
        warmup=1,
        iterations=3,
    )
    try:
        p = measure(spec, telemetry=started.sampler)
    finally:
        started.sampler.stop()
    summ = _check_summary(p)
    assert summ.source == "nvml" and summ.throttleReasons == ["sw_power_cap"]


def test_measure_without_nvml_says_so_and_invents_nothing(
    monkeypatch: pytest.MonkeyPatch, emulator: EmulatorHandle
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails, as on a GPU-less host
    started = open_sampler()
    assert started.sampler is None and started.reason and "NVML unusable" in started.reason
    spec = RunSpec(
        engine="vllm",
        base_url=emulator.base_url,
        hf_id="org/model",
        served_model="m",
        quantization="q",
        hardware=HW,
        prompt_tokens=64,
        max_tokens=8,
        warmup=0,
        iterations=1,
    )
    p = measure(spec, no_telemetry_reason=started.reason)
    assert p.evidence.telemetry is None
    assert any(
        w.startswith("no GPU telemetry recorded: NVML unusable") for w in p.evidence.warnings
    )
    assert not any(r.code == "gpu_throttled" for r in p.evidence.validity.reasons)


class _ThreadServer:
    def __init__(self, handle: EmulatorHandle) -> None:
        self.handle = handle
        self.base_url = handle.base_url

    def alive(self) -> bool:
        return self.handle.exit_code is None

    def exit_code(self) -> int | None:
        return self.handle.exit_code

    def restarts(self) -> int:
        return 0

    def log_text(self) -> str:
        return "\n".join(self.handle.log_lines)

    def stop(self) -> None:
        self.handle.stop()


class ThreadLauncher:
    """Runs the emulator argv the matrix builds in this process (bench.emulator thread)."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def start(self, spec: ContainerSpec, log_path: Path) -> _ThreadServer:
        argv = [*spec.entrypoint, *spec.command]
        self.argvs.append(argv)
        if "bench.emulator" in argv:  # the image's entrypoint is the emulator itself
            argv = argv[argv.index("bench.emulator") + 1 :]
        engine = argv[0]

        def opt(name: str) -> str | None:
            return argv[argv.index(name) + 1] if name in argv else None

        scale = opt("--time-scale")
        handle = serve_in_thread(
            engine,
            opt("--profile"),
            port=spec.host_port,
            served_model=opt("--served-model"),
            time_scale=float(scale) if scale else None,
        )
        return _ThreadServer(handle)


def test_matrix_runs_one_sampler_per_configuration(nvml: object, tmp_path: Path) -> None:
    exp_path = small_experiment(tmp_path, {"vllm-mtp": [1, 2]})
    exp = load_experiment(exp_path)
    opts = MatrixOptions(out=tmp_path / "out", launcher="process", time_scale=0.01)
    opts = opts.model_copy(update={"show_progress": False})
    samplers: list[SamplerStart] = []

    def factory() -> SamplerStart:
        samplers.append(open_sampler(interval_s=INTERVAL_S))
        return samplers[-1]

    launcher = ThreadLauncher()
    result = run_matrix(exp, opts, launcher=launcher, hardware=HW, telemetry=factory)
    assert [o.status for o in result.outcomes] == ["done"], shlex.join(launcher.argvs[0])
    assert len(samplers) == 1  # one sampler for the whole configuration, stopped after it
    sampler = samplers[0].sampler
    assert sampler is not None and sampler._thread is not None
    assert not sampler._thread.is_alive()
    payloads = [read_payload(opts.out / "payloads" / f"vllm-mtp-c{k}.json") for k in (1, 2)]
    for p in payloads:
        _check_summary(p)
    # Both levels cut the same sampler: the second level's windows start after the first's.
    first, second = (p.evidence.telemetry for p in payloads)
    assert isinstance(first, TelemetrySummary) and isinstance(second, TelemetrySummary)
    assert second.windows[0].start > first.windows[-1].end


def test_emulated_matrix_records_no_telemetry_by_default(nvml: object, tmp_path: Path) -> None:
    exp = load_experiment(small_experiment(tmp_path, {"vllm-mtp": [1]}))
    opts = MatrixOptions(out=tmp_path / "out", launcher="process", time_scale=0.01)
    opts = opts.model_copy(update={"show_progress": False})
    run_matrix(exp, opts, launcher=ThreadLauncher(), hardware=HW)
    p = read_payload(opts.out / "payloads" / "vllm-mtp-c1.json")
    assert p.evidence.telemetry is None
    assert any("emulated run" in w for w in p.evidence.warnings)
