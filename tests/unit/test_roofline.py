"""The bandwidth roofline and the bandwidth probe's no-torch path; the H200 probe replayed."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from bench.cli import main
from bench.core import InputError
from bench.machine import (
    BandwidthProbe,
    build_hardware,
    card_bandwidth,
    ceiling,
    cpu_only,
    efficiency,
    kv_bytes_per_token,
    mean_decode_context,
    probe_bandwidth,
    read_dump,
    weight_bytes_from_files,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "hardware"
GB = 10**9


def test_two_3090s_without_kv() -> None:
    r = ceiling(936.0, 2, 14 * GB)
    # bandwidth x cards / bytes read per token
    assert r.ceilingTokS == pytest.approx(936 * 2 / 14, rel=1e-6)
    assert r.bytesPerStepPerRank == 7 * GB


def test_kv_concurrency_and_acceptance() -> None:
    kv = kv_bytes_per_token(layers=16, kv_heads=4, head_dim=256, dtype_bytes=2)
    assert kv == 2 * 16 * 4 * 256 * 2
    ctx = mean_decode_context(1024, 512)
    assert ctx == 1280
    base = ceiling(936.0, 2, 14 * GB, kv_bytes_per_token=kv, context_tokens=ctx)
    assert base.ceilingTokS == pytest.approx(936e9 * 2 / (14 * GB + kv * ctx), rel=1e-6)
    four = ceiling(936.0, 2, 14 * GB, kv_bytes_per_token=kv, context_tokens=ctx, concurrency=4)
    assert four.ceilingTokS < base.ceilingTokS  # each stream's KV adds to every step
    assert four.aggregateCeilingTokS == pytest.approx(4 * four.ceilingTokS, rel=1e-6)
    spec = ceiling(936.0, 2, 14 * GB, tokens_per_step=3.2, draft_bytes_per_step=GB)
    assert spec.ceilingTokS == pytest.approx(3.2 * 936 * 2 / 15, rel=1e-6)


def test_efficiency_and_above_ceiling_flag() -> None:
    r = ceiling(936.0, 2, 14 * GB)
    e = efficiency(100.0, r)
    assert e.fraction == pytest.approx(100 / r.ceilingTokS, abs=1e-4) and not e.aboveCeiling
    assert efficiency(1.2 * r.ceilingTokS, r).aboveCeiling
    assert not efficiency(1.1 * r.ceilingTokS, r).aboveCeiling


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bandwidth_gbs": 0.0, "cards": 1, "weight_bytes": GB},
        {"bandwidth_gbs": 936.0, "cards": 0, "weight_bytes": GB},
        {"bandwidth_gbs": 936.0, "cards": 1, "weight_bytes": 0},
    ],
)
def test_bad_inputs_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ceiling(**kwargs)  # type: ignore[arg-type]


def test_card_bandwidth_prefers_measured_then_datasheet() -> None:
    hw = build_hardware(read_dump(FIX / "dual-3090-nvml-dump.json"))
    assert card_bandwidth(hw, 870.0) == (870.0, "measured")
    assert card_bandwidth(hw) == (936.0, "datasheet")
    ext = hw.extended
    assert ext is not None
    unknown = [g.model_copy(update={"datasheetBandwidthGBs": None}) for g in ext.gpus]
    hw2 = hw.model_copy(update={"extended": ext.model_copy(update={"gpus": unknown})})
    assert card_bandwidth(hw2) == (936.1, "derived")
    assert card_bandwidth(cpu_only()) is None


def test_weight_bytes_from_files(tmp_path: Path) -> None:
    (tmp_path / "a.safetensors").write_bytes(b"x" * 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.safetensors").write_bytes(b"x" * 50)
    (tmp_path / "config.json").write_text("{}")
    assert weight_bytes_from_files([tmp_path]) == 150


def test_h200_probe_replayed_against_its_roofline() -> None:
    probe = BandwidthProbe.model_validate_json((FIX / "h200-bandwidth.json").read_text())
    d = probe.devices[0]
    assert d.bandwidthGBs == pytest.approx(statistics.median(d.samplesGBs), abs=0.1)
    assert d.datasheetGBs == 4800.0
    assert 0.7 < d.bandwidthGBs / 4800.0 <= 1.0  # a copy never beats the datasheet
    hw = build_hardware(read_dump(FIX / "h200-nvml-dump.json"))
    bw, src = card_bandwidth(hw, d.bandwidthGBs) or (0.0, "given")
    assert src == "measured"
    r = ceiling(bw, 1, 14 * GB, bandwidth_source=src)
    assert r.ceilingTokS == pytest.approx(d.bandwidthGBs / 14, rel=1e-4)


def test_probe_without_torch_is_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(InputError, match="torch is not installed") as err:
        probe_bandwidth()
    assert err.value.exit_code == 2
    with pytest.raises(SystemExit) as ex:
        main(["probe", "bandwidth"])
    assert ex.value.code == 2
    with pytest.raises(InputError, match="positive"):
        probe_bandwidth(size_mib=0)


def test_roofline_cli_from_hardware(capsys: pytest.CaptureFixture[str]) -> None:
    hw_json = FIX / "h200-hardware.json"
    with pytest.raises(SystemExit) as ex:
        main(["roofline", "--hardware", str(hw_json), "--weights-gb", "14", "--measured", "200"])
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert '"bandwidthSource": "datasheet"' in out and '"aboveCeiling": false' in out
