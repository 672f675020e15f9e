"""Telemetry: the sampler thread with an injected reader, window and summary arithmetic, the
throttle warnings, and the H200 recording replayed."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from bench.machine import Sampler, summarize, summarize_sampler
from bench.measure import throttle_warnings
from bench.schema import Evidence, GpuSample, TelemetryRecording, decode_reasons

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "hardware"


def _rec(samples: list[GpuSample]) -> Sampler:
    return Sampler.from_recording(TelemetryRecording(source="test", intervalS=0.1, samples=samples))


def _steps(power: list[float], dt: float = 0.1, energy: bool = True, mask: int = 0) -> Sampler:
    """One GPU, power[i] watts held from t=i*dt; the counter integrates it exactly."""
    out, e = [], 0.0
    for i, p in enumerate(power):
        out.append(
            GpuSample(
                t=i * dt, gpu=0, powerW=p, energyMj=round(e) if energy else None,
                smClockMhz=1500, throttleReasons=mask, utilGpuPct=90,
            )
        )  # fmt: skip
        e += p * dt * 1000
    return _rec(out)


def _until(done: threading.Event) -> None:
    """Wait for an event the reader sets (a hang guard, not a timing bound)."""
    assert done.wait(60), "the sampler thread never read enough samples"


def test_sampler_thread_keeps_its_schedule_and_stops() -> None:
    """The sampler never samples faster than its interval (a fixed schedule: a late read is
    not followed by a burst past it), and stops with the context. How close to the interval it
    keeps on a loaded machine is tests/bench_sampler.py's figure, not this test's."""
    calls: list[float] = []
    enough = threading.Event()

    def reader(t: float) -> list[GpuSample]:
        calls.append(t)
        if len(calls) >= 20:
            enough.set()
        return [GpuSample(t=t, gpu=g, powerW=100.0 + g) for g in (0, 1)]

    with Sampler(interval_s=0.01, reader=reader) as s:
        _until(enough)
    n = len(calls)
    assert n >= 20
    # stopped: the context joined the thread; nothing is read after it
    assert s._thread is not None and not s._thread.is_alive()
    assert len(calls) == n and len(s.samples) == 2 * n
    assert all(b >= a for a, b in itertools.pairwise(calls))
    # read k comes k intervals after the schedule's start, which is one clock read before
    # read 0 (one interval of slack for that gap): never ahead of schedule, however loaded
    assert all(t - calls[0] >= (k - 1) * 0.01 for k, t in enumerate(calls)), calls
    rate = s.rate_hz()
    assert rate is not None and rate <= 1 / 0.01 * (n - 1) / (n - 2)


def test_reader_errors_are_kept_and_sampling_goes_on() -> None:
    count = {"n": 0}
    enough = threading.Event()

    def flaky(t: float) -> list[GpuSample]:
        count["n"] += 1
        if count["n"] >= 6:
            enough.set()
        if count["n"] % 2:
            raise OSError("NVML hiccup")
        return [GpuSample(t=t, gpu=0, powerW=1.0)]

    with Sampler(interval_s=0.01, reader=flaky) as s:
        _until(enough)
    assert s.errors and "NVML hiccup" in s.errors[0]
    assert len(s.errors) == (count["n"] + 1) // 2 and len(s.samples) == count["n"] // 2 >= 3


def test_window_energy_from_the_counter_and_from_power() -> None:
    power = [100.0] * 10 + [300.0] * 10  # 0..1 s at 100 W, 1..2 s at 300 W
    for energy in (True, False):
        w = _steps(power, energy=energy).window(1.0, 1.9).gpus[0]
        assert w.energySource == ("counter" if energy else "integrated")
        assert w.powerMeanW == pytest.approx(300.0, rel=0.01)
        assert w.energyJ == pytest.approx(300.0 * 0.9, rel=0.01)
    whole = _steps(power).window(0.0, 1.95).gpus[0]
    assert whole.powerMeanW == pytest.approx((100 * 10 + 300 * 9) / 19, rel=0.01)


def test_short_window_borrows_its_neighbours() -> None:
    w = _steps([100.0, 200.0, 300.0]).window(0.12, 0.15)
    assert w.sampleCount == 0
    assert w.gpus[0].samples == 2 and w.gpus[0].energyJ == pytest.approx(200 * 0.03, rel=0.01)
    with pytest.raises(ValueError, match="before"):
        _steps([1.0, 2.0]).window(1.0, 0.5)


def test_summary_energy_per_token_and_throttle_warning() -> None:
    s = _steps([250.0] * 30, mask=0x4 | 0x1)
    summ = summarize_sampler(s, [(0.0, 1.0), (1.5, 2.5)], output_tokens=500)
    g = summ.gpus[0]
    assert summ.windowCount == 2 and summ.measuredSeconds == pytest.approx(2.0)
    assert g.powerMeanW == pytest.approx(250.0, rel=0.01)
    assert summ.totalEnergyJ == pytest.approx(500.0, rel=0.01)
    assert summ.energyPerOutputTokenJ == pytest.approx(1.0, rel=0.01)
    assert summ.throttled and summ.throttleReasons == ["sw_power_cap"]
    (warn,) = throttle_warnings(summ)
    assert warn.severity == "warning" and warn.code == "gpu_throttled"
    assert "sw_power_cap" in warn.message and "100%" in warn.message


def test_idle_and_sync_boost_are_not_throttling() -> None:
    summ = summarize_sampler(_steps([50.0] * 5, mask=0x1 | 0x10), [(0.0, 0.4)])
    assert not summ.throttled and throttle_warnings(summ) == []
    assert decode_reasons(0x1 | 0x40) == ["hw_thermal_slowdown"]


def test_summary_fits_the_payload_evidence() -> None:
    summ = summarize_sampler(_steps([100.0] * 5), [(0.0, 0.4)], output_tokens=10)
    field = Evidence.model_fields["telemetry"]
    from pydantic import TypeAdapter

    back = TypeAdapter(field.annotation).validate_python(summ.model_dump(mode="json"))
    assert back == summ


def test_h200_recording_replayed() -> None:
    rec = TelemetryRecording.model_validate_json((FIX / "h200-telemetry.json").read_text())
    m = rec.marks
    assert rec.rateHz is not None and 9.0 <= rec.rateHz <= 10.5  # the 10 Hz target, achieved
    s = Sampler.from_recording(rec)
    idle = s.window(m["idle_start"], m["load_start"]).gpus[0]
    load = s.window(m["load_start"], m["load_end"]).gpus[0]
    assert idle.samples >= 15 and load.samples >= 50
    assert idle.energySource == load.energySource == "counter"
    assert load.powerMeanW is not None and idle.powerMeanW is not None
    assert load.powerMeanW > 3 * idle.powerMeanW
    assert load.smClockMaxMhz is not None and idle.smClockMaxMhz is not None
    assert load.smClockMaxMhz > idle.smClockMaxMhz
    # counter-derived mean power agrees with the sampled power readings
    sampled = [
        x.powerW for x in rec.samples if m["load_start"] <= x.t <= m["load_end"] and x.powerW
    ]
    assert load.powerMeanW == pytest.approx(sum(sampled) / len(sampled), rel=0.1)
    summ = summarize([s.window(m["load_start"], m["load_end"])], output_tokens=1000)
    assert summ.energyPerOutputTokenJ == pytest.approx(load.energyJ / 1000, rel=1e-3)  # type: ignore[operator]
