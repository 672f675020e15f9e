"""GPU telemetry: an NVML sampler on its own thread (10 Hz by default), cut to measured windows.

Per GPU and sample: power, the cumulative energy counter, SM and memory clocks, temperature,
memory used, utilisation and the clock-event (throttle) reasons. ``Sampler.window(start, end)``
summarises the samples of one measured window; ``summarize(windows, output_tokens)`` gives the
payload's ``evidence.telemetry`` (mean power per GPU, energy per output token); and
``throttle_warnings`` turns throttling into validity warnings.

Times are ``time.monotonic()`` seconds (on Linux the same clock as ``time.perf_counter()``), so
the window bounds the measurement code records can be passed straight in.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

from bench.schema import (
    THROTTLE_MASK,
    GpuSample,
    GpuWindowStats,
    TelemetryRecording,
    TelemetrySummary,
    TelemetryWindow,
    decode_reasons,
)

if TYPE_CHECKING:
    from bench.schema import IterationRecord

DEFAULT_INTERVAL_S: Final = 0.1

Reader = Callable[[float], list[GpuSample]]


class NvmlReader:
    """Reads every GPU through NVML. ``open()`` raises the NVML error if NVML is unusable."""

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self._nvml: Any = None

    def open(self) -> NvmlReader:
        # optional: NVML exists only on a GPU host; without it capture records why
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handles = [
            pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
        ]
        return self

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None

    def __call__(self, t: float) -> list[GpuSample]:
        nv = self._nvml
        if nv is None:
            raise RuntimeError("NvmlReader used before open()")

        def ask(fn: Callable[..., Any], *args: Any) -> Any:
            try:
                return fn(*args)
            except nv.NVMLError:
                return None

        out: list[GpuSample] = []
        for i, h in enumerate(self._handles):
            power = ask(nv.nvmlDeviceGetPowerUsage, h)
            mem = ask(nv.nvmlDeviceGetMemoryInfo, h)
            util = ask(nv.nvmlDeviceGetUtilizationRates, h)
            reasons = ask(nv.nvmlDeviceGetCurrentClocksEventReasons, h)
            out.append(
                GpuSample(
                    t=t,
                    gpu=i,
                    powerW=power / 1000 if power is not None else None,
                    energyMj=ask(nv.nvmlDeviceGetTotalEnergyConsumption, h),
                    smClockMhz=ask(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                    memClockMhz=ask(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                    temperatureC=ask(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                    memoryUsedBytes=int(mem.used) if mem is not None else None,
                    utilGpuPct=int(util.gpu) if util is not None else None,
                    utilMemPct=int(util.memory) if util is not None else None,
                    throttleReasons=int(reasons) if reasons is not None else None,
                )
            )
        return out


class Sampler:
    """Samples on a daemon thread every ``interval_s`` until stopped; a context manager.

    ``reader`` defaults to NVML; tests inject one. A reader error is counted and sampling goes on
    (telemetry must never break a measurement)."""

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        reader: Reader | None = None,
        clock: Callable[[], float] = time.monotonic,
        source: str = "nvml",
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        self.source = source
        self._reader = reader
        self._nvml: NvmlReader | None = None
        self._clock = clock
        self._samples: list[GpuSample] = []
        self._ticks: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    @classmethod
    def from_recording(cls, rec: TelemetryRecording) -> Sampler:
        """A stopped sampler holding recorded samples, so windows can be cut offline."""
        s = cls(interval_s=rec.intervalS, reader=lambda t: [], source="replay")
        s._samples = sorted(rec.samples, key=lambda x: (x.t, x.gpu))
        s._ticks = sorted({x.t for x in rec.samples})
        return s

    def start(self) -> Sampler:
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        if self._reader is None:
            self._nvml = NvmlReader().open()
            self._reader = self._nvml
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="specbench-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None
            self._reader = None

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        reader = self._reader
        assert reader is not None
        next_t = self._clock()
        while not self._stop.is_set():
            t = self._clock()
            try:
                got = reader(t)
            except Exception as err:  # keep sampling: one failed read must not end telemetry
                if len(self.errors) < 20:
                    self.errors.append(f"{type(err).__name__}: {err}")
                got = []
            with self._lock:
                self._samples.extend(got)
                self._ticks.append(t)
            next_t += self.interval_s
            # Fixed schedule, not sleep(interval): a slow read does not drift the rate.
            self._stop.wait(max(0.0, next_t - self._clock()))

    # ------------------------------------------------------------ results

    @property
    def samples(self) -> list[GpuSample]:
        with self._lock:
            return list(self._samples)

    def rate_hz(self) -> float | None:
        """Achieved rate: sampling rounds per second over the whole run."""
        with self._lock:
            ticks = list(self._ticks)
        if len(ticks) < 2 or ticks[-1] <= ticks[0]:
            return None
        return (len(ticks) - 1) / (ticks[-1] - ticks[0])

    def recording(
        self, marks: dict[str, float] | None = None, note: str | None = None
    ) -> TelemetryRecording:
        return TelemetryRecording(
            source=self.source,
            intervalS=self.interval_s,
            rateHz=self.rate_hz(),
            marks=marks or {},
            samples=self.samples,
            note=note,
        )

    def window(self, start: float, end: float) -> TelemetryWindow:
        """Summarise the samples inside [start, end]. A window shorter than two samples borrows
        the nearest sample on each side, so short windows still get a power figure."""
        if end < start:
            raise ValueError(f"window end {end} is before its start {start}")
        samples = self.samples
        by_gpu: dict[int, list[GpuSample]] = {}
        for s in samples:
            by_gpu.setdefault(s.gpu, []).append(s)
        stats = [
            _gpu_stats(gpu, _cut(rows, start, end), end - start)
            for gpu, rows in sorted(by_gpu.items())
        ]
        inside = sum(1 for s in samples if start <= s.t <= end)
        return TelemetryWindow(
            start=start, end=end, durationS=end - start, sampleCount=inside, gpus=stats
        )


def _cut(rows: list[GpuSample], start: float, end: float) -> list[GpuSample]:
    inside = [s for s in rows if start <= s.t <= end]
    if len(inside) >= 2:
        return inside
    before = [s for s in rows if s.t < start][-1:]
    after = [s for s in rows if s.t > end][:1]
    return before + inside + after


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _integrated_mean_power(rows: list[GpuSample]) -> float | None:
    """Time-weighted mean power (trapezoids); a plain mean when the samples share one instant."""
    pts = [(s.t, s.powerW) for s in rows if s.powerW is not None]
    if not pts:
        return None
    span = pts[-1][0] - pts[0][0]
    if len(pts) < 2 or span <= 0:
        return _mean([p for _, p in pts])
    area = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(pts))
    return area / span


def _gpu_stats(gpu: int, rows: list[GpuSample], duration: float) -> GpuWindowStats:
    powers = [s.powerW for s in rows if s.powerW is not None]
    sm = [s.smClockMhz for s in rows if s.smClockMhz is not None]
    memc = [s.memClockMhz for s in rows if s.memClockMhz is not None]
    temps = [s.temperatureC for s in rows if s.temperatureC is not None]
    used = [s.memoryUsedBytes for s in rows if s.memoryUsedBytes is not None]
    util = [float(s.utilGpuPct) for s in rows if s.utilGpuPct is not None]
    masks = [s.throttleReasons for s in rows if s.throttleReasons is not None]
    energy: float | None = None
    source: Literal["counter", "integrated", "none"] = "none"
    counters = [(s.t, s.energyMj) for s in rows if s.energyMj is not None]
    mean_power = _integrated_mean_power(rows)
    if (
        len(counters) >= 2
        and counters[-1][0] > counters[0][0]
        and counters[-1][1] >= counters[0][1]
    ):
        # Counter slope (mJ/s) scaled to the window: exact energy, not sampled power.
        slope_w = (counters[-1][1] - counters[0][1]) / 1000 / (counters[-1][0] - counters[0][0])
        energy, source = slope_w * duration, "counter"
        mean_power = slope_w
    elif mean_power is not None:
        energy, source = mean_power * duration, "integrated"
    union = 0
    for m in masks:
        union |= m
    throttled = sum(1 for m in masks if m & THROTTLE_MASK)
    return GpuWindowStats(
        gpu=gpu,
        samples=len(rows),
        powerMeanW=round(mean_power, 2) if mean_power is not None else None,
        powerMaxW=max(powers) if powers else None,
        energyJ=round(energy, 3) if energy is not None else None,
        energySource=source,
        smClockMinMhz=min(sm) if sm else None,
        smClockMeanMhz=round(sum(sm) / len(sm), 1) if sm else None,
        smClockMaxMhz=max(sm) if sm else None,
        memClockMinMhz=min(memc) if memc else None,
        memClockMaxMhz=max(memc) if memc else None,
        temperatureMaxC=max(temps) if temps else None,
        memoryUsedMaxBytes=max(used) if used else None,
        utilGpuMeanPct=round(sum(util) / len(util), 1) if util else None,
        throttleReasons=decode_reasons(union),
        throttledFraction=throttled / len(masks) if masks else 0.0,
    )


def summarize(
    windows: Sequence[TelemetryWindow],
    output_tokens: int | None = None,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    rate_hz: float | None = None,
    source: str = "nvml",
    errors: Sequence[str] = (),
) -> TelemetrySummary:
    """Combine the measured windows of one configuration: duration-weighted mean power per GPU,
    summed energy, energy per output token (all GPUs together) and the throttling seen."""
    total_s = sum(w.durationS for w in windows)
    per_gpu: dict[int, list[tuple[TelemetryWindow, GpuWindowStats]]] = {}
    for w in windows:
        for g in w.gpus:
            per_gpu.setdefault(g.gpu, []).append((w, g))
    gpus: list[GpuWindowStats] = []
    for gpu, items in sorted(per_gpu.items()):
        stats = [g for _, g in items]
        energies = [g.energyJ for g in stats if g.energyJ is not None]
        energy = sum(energies) if len(energies) == len(stats) else None
        dur = sum(w.durationS for w, g in items if g.energyJ is not None)
        n = sum(g.samples for g in stats)

        def pick(vals: list[Any], fn: Callable[[list[Any]], Any]) -> Any:
            vals = [v for v in vals if v is not None]
            return fn(vals) if vals else None

        sources = {g.energySource for g in stats}
        gpus.append(
            GpuWindowStats(
                gpu=gpu,
                samples=n,
                powerMeanW=round(energy / dur, 2) if energy is not None and dur > 0 else None,
                powerMaxW=pick([g.powerMaxW for g in stats], max),
                energyJ=round(energy, 3) if energy is not None else None,
                energySource=sources.pop() if len(sources) == 1 else "integrated",
                smClockMinMhz=pick([g.smClockMinMhz for g in stats], min),
                smClockMeanMhz=pick(
                    [g.smClockMeanMhz for g in stats], lambda v: round(sum(v) / len(v), 1)
                ),
                smClockMaxMhz=pick([g.smClockMaxMhz for g in stats], max),
                memClockMinMhz=pick([g.memClockMinMhz for g in stats], min),
                memClockMaxMhz=pick([g.memClockMaxMhz for g in stats], max),
                temperatureMaxC=pick([g.temperatureMaxC for g in stats], max),
                memoryUsedMaxBytes=pick([g.memoryUsedMaxBytes for g in stats], max),
                utilGpuMeanPct=pick(
                    [g.utilGpuMeanPct for g in stats], lambda v: round(sum(v) / len(v), 1)
                ),
                throttleReasons=sorted({r for g in stats for r in g.throttleReasons}),
                throttledFraction=(
                    sum(g.throttledFraction * g.samples for g in stats) / n if n else 0.0
                ),
            )
        )
    gpu_energy = [g.energyJ for g in gpus]
    total_energy = (
        sum(e for e in gpu_energy if e is not None) if gpus and None not in gpu_energy else None
    )
    powers = [g.powerMeanW for g in gpus]
    total_power = sum(p for p in powers if p is not None) if gpus and None not in powers else None
    per_token = (
        total_energy / output_tokens
        if total_energy is not None and output_tokens and output_tokens > 0
        else None
    )
    reasons = sorted({r for g in gpus for r in g.throttleReasons})
    return TelemetrySummary(
        source=source,
        intervalS=interval_s,
        rateHz=round(rate_hz, 2) if rate_hz is not None else None,
        windowCount=len(windows),
        measuredSeconds=round(total_s, 4),
        gpus=gpus,
        totalPowerMeanW=round(total_power, 2) if total_power is not None else None,
        totalEnergyJ=round(total_energy, 3) if total_energy is not None else None,
        outputTokens=output_tokens,
        energyPerOutputTokenJ=round(per_token, 5) if per_token is not None else None,
        throttled=bool(reasons),
        throttleReasons=reasons,
        windows=list(windows),
        errors=list(errors)[:20],
    )


def summarize_sampler(
    sampler: Sampler, spans: Sequence[tuple[float, float]], output_tokens: int | None = None
) -> TelemetrySummary:
    """``summarize`` over the sampler's windows for the given (start, end) spans."""
    return summarize(
        [sampler.window(a, b) for a, b in spans],
        output_tokens,
        interval_s=sampler.interval_s,
        rate_hz=sampler.rate_hz(),
        source=sampler.source,
        errors=sampler.errors,
    )


class SamplerStart:
    """The outcome of trying to start NVML telemetry: a sampler, or why there is none."""

    def __init__(self, sampler: Sampler | None, reason: str | None) -> None:
        self.sampler = sampler
        self.reason = reason


def open_sampler(interval_s: float = DEFAULT_INTERVAL_S) -> SamplerStart:
    """Start an NVML sampler on ``time.perf_counter`` (the clock of the iteration windows
    bench.measure records), or say why NVML is unusable. Never raises."""
    try:
        return SamplerStart(Sampler(interval_s=interval_s, clock=time.perf_counter).start(), None)
    except Exception as err:  # NVMLError_LibraryNotFound / DriverNotLoaded / ImportError
        return SamplerStart(None, f"NVML unusable here ({type(err).__name__}: {err})")


def no_telemetry_note(reason: str) -> str:
    """The payload warning that says telemetry is absent (never replaced by made-up numbers)."""
    return f"no GPU telemetry recorded: {reason}"


def measured_summary(sampler: Sampler, iterations: Sequence[IterationRecord]) -> TelemetrySummary:
    """One configuration's telemetry cut to its measured (non-warmup) iteration windows, with
    the output tokens of those iterations for energy per output token."""
    measured = [it for it in iterations if not it.warmup]
    spans = [(it.window_start, max(it.window_end, it.window_start)) for it in measured]
    tokens = sum(r.completion_tokens or 0 for it in measured for r in it.requests)
    return summarize_sampler(sampler, spans, output_tokens=tokens)
