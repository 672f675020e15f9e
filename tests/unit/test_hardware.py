"""Hardware capture: recorded NVML dumps -> Hardware, the NVML recorder against a stand-in
pynvml, the nvidia-smi fallback and the no-GPU paths."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import fake_nvml
import pytest

from bench.cli import main
from bench.core import InputError
from bench.machine import (
    build_hardware,
    capture_hardware,
    hash_uuid,
    lmx_gpu_name,
    parse_nvidia_smi,
    read_dump,
    record_nvml,
)
from bench.schema import Hardware

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "hardware"


def _no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = types.ModuleType("pynvml")

    def fail() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    broken.nvmlInit = fail  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", broken)


def test_dual_3090_fixture_builds_the_lmx_shape() -> None:
    dump = read_dump(FIX / "dual-3090-nvml-dump.json")
    hw = build_hardware(dump)
    assert (hw.hwClass, hw.gpuName, hw.gpuCount) == ("DISCRETE_GPU", "RTX 3090", 2)
    assert [g.name for g in hw.gpus] == ["RTX 3090", "RTX 3090"]
    assert hw.vramGb == pytest.approx(2 * 24.0)
    assert hw.ramGb == pytest.approx(62.8)
    ext = hw.extended
    assert ext is not None and ext.source == "fixture"
    assert any("hand-written" in n for n in ext.notes)
    assert [g.datasheetBandwidthGBs for g in ext.gpus] == [936.0, 936.0]
    # 9751 MHz x 2 x 384 bit / 8 reproduces the datasheet 936 GB/s
    assert ext.gpus[0].derivedBandwidthGBs == pytest.approx(936.0, abs=0.5)
    assert ext.gpus[1].pcieWidthCurrent == 8 and ext.gpus[1].pcieWidthMax == 16
    assert ext.p2p["0-1.read"] == "NOT_SUPPORTED"
    assert ext.nvlink == {}
    assert ext.topologyPairs == {"0-1": "HOSTBRIDGE"}
    assert ext.gpus[0].powerLimitW == 350.0


def test_h200_recorded_dump_rebuilds_the_recorded_hardware() -> None:
    dump = read_dump(FIX / "h200-nvml-dump.json")
    assert dump.source == "nvml" and not dump.handWritten
    rebuilt = build_hardware(dump)
    recorded = Hardware.model_validate_json((FIX / "h200-hardware.json").read_text())
    assert rebuilt == recorded
    assert rebuilt.gpuName.startswith("H200") and rebuilt.gpuCount >= 1
    g = rebuilt.extended.gpus[0]  # type: ignore[union-attr]
    assert g.computeCapability == "9.0"
    assert g.datasheetBandwidthGBs == 4800.0
    assert g.derivedBandwidthGBs is not None
    assert abs(g.derivedBandwidthGBs / 4800.0 - 1) < 0.1
    assert rebuilt.vramGb > 139


def test_recorded_files_hold_no_raw_gpu_uuid() -> None:
    for f in FIX.glob("*.json"):
        text = f.read_text()
        for uuid in __import__("re").findall(r"GPU-[0-9a-fA-F-]{36}", text):
            assert uuid == "GPU-00000000-0000-0000-0000-000000000000", f.name


def test_record_nvml_against_a_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_nvml.make()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    dump = record_nvml()
    assert fake.state["init"] == 0, "nvmlInit and nvmlShutdown must balance"
    assert len(dump.gpus) == 2 and dump.cudaDriverVersion == "13.0"
    g = dump.gpus[0]
    assert g.uuidSha256 == hash_uuid("GPU-00000000-aaaa-bbbb-cccc-dddddddddddd")
    assert "GPU-" not in dump.model_dump_json()
    assert g.nvlinkActiveLinks is None and "nvlinkState" in g.errors
    assert dump.p2p["0-1.read"] == "GPU_NOT_SUPPORTED"
    assert dump.topologyPairs == {"0-1": "HOSTBRIDGE"}
    # the stand-in holds the same facts as the hand-written fixture
    hand = build_hardware(read_dump(FIX / "dual-3090-nvml-dump.json"))
    live = build_hardware(dump)
    assert (live.gpuName, live.gpuCount, live.vramGb) == (hand.gpuName, hand.gpuCount, hand.vramGb)


def test_no_gpu_is_exit_2_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_nvml(monkeypatch)
    with pytest.raises(InputError) as err:
        capture_hardware(allow_no_gpu=False, run=lambda argv: None)
    assert err.value.exit_code == 2 and "--allow-no-gpu" in str(err.value)
    hw = capture_hardware(allow_no_gpu=True, run=lambda argv: None)
    assert (hw.hwClass, hw.gpuCount, hw.gpus) == ("CPU_ONLY", 0, [])
    assert hw.extended is not None and hw.extended.source == "none"
    assert "NVML Shared Library Not Found" in hw.extended.notes[0]


def test_cli_exit_codes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_nvml(monkeypatch)
    monkeypatch.setattr("bench.machine._smi.run_command", lambda argv: None)
    with pytest.raises(SystemExit) as ex:
        main(["hardware", "--out", str(tmp_path / "hw.json")])
    assert ex.value.code == 2 and not (tmp_path / "hw.json").exists()
    with pytest.raises(SystemExit) as ex:
        main(["hardware", "--allow-no-gpu", "--out", str(tmp_path / "hw.json")])
    assert ex.value.code == 0
    assert Hardware.model_validate_json((tmp_path / "hw.json").read_text()).hwClass == "CPU_ONLY"
    with pytest.raises(SystemExit):
        main(
            [
                "hardware",
                "--from-dump",
                str(FIX / "dual-3090-nvml-dump.json"),
                "--out",
                str(tmp_path / "d.json"),
            ]
        )
    assert Hardware.model_validate_json((tmp_path / "d.json").read_text()).gpuCount == 2


def test_nvidia_smi_fallback_from_the_recorded_h200_texts() -> None:
    raw = json.loads((FIX / "h200-nvidia-smi.json").read_text())
    dump = parse_nvidia_smi(raw["csv"], raw["banner"], raw["topo"])
    smi = build_hardware(dump)
    nvml = Hardware.model_validate_json((FIX / "h200-hardware.json").read_text())
    assert smi.extended is not None and nvml.extended is not None
    assert smi.extended.source == "nvidia-smi"
    assert (smi.gpuName, smi.gpuCount) == (nvml.gpuName, nvml.gpuCount)
    assert smi.vramGb == pytest.approx(nvml.vramGb, rel=0.01)
    assert smi.extended.driverVersion == nvml.extended.driverVersion
    assert smi.extended.cudaDriverVersion == nvml.extended.cudaDriverVersion
    assert smi.extended.gpus[0].computeCapability == "9.0"
    assert smi.extended.gpus[0].powerLimitW == nvml.extended.gpus[0].powerLimitW


def test_nvidia_smi_parser_handles_missing_values() -> None:
    line = (
        "0, NVIDIA GeForce RTX 3090, GPU-12345678-1234-1234-1234-123456789abc, 24576, "
        "00000000:01:00.0, 4, 4, 16, 16, 350.00, 350.00, 350.00, 2100, 9751, [N/A], 8.6, 580.95.05"
    )
    dump = parse_nvidia_smi(line, "| NVIDIA-SMI 580.95.05  CUDA Version: 13.0 |", None)
    g = dump.gpus[0]
    assert g.vbios is None and g.powerLimitMw == 350_000 and g.memoryTotalBytes == 24576 << 20
    assert dump.cudaDriverVersion == "13.0" and dump.driverVersion == "580.95.05"
    assert g.uuidSha256 == hash_uuid("GPU-12345678-1234-1234-1234-123456789abc")
    with pytest.raises(ValueError, match="17"):
        parse_nvidia_smi("0, RTX", None, None)


def test_smi_used_when_nvml_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_nvml(monkeypatch)
    line = (
        "0, NVIDIA H200, GPU-x, 143771, 0:1:0.0, 5, 5, 16, 16, 700, 700, 700, 1980, 3201, v, 9.0, 5"
    )
    answers = {"--query-gpu": line, "": "CUDA Version: 13.0", "topo": "GPU0 X"}

    def run(argv: list[str]) -> str | None:
        key = "topo" if "topo" in argv else ("--query-gpu" if len(argv) > 1 else "")
        return answers[key]

    hw = capture_hardware(run=run)
    assert hw.extended is not None and hw.extended.source == "nvidia-smi"
    assert hw.gpuName == "H200" and hw.extended.topology == "GPU0 X"


def test_malformed_dump_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"source": "nvml"}')
    with pytest.raises(InputError, match=r"capturedAt|host"):
        read_dump(bad)
    bad.write_text("{")
    with pytest.raises(InputError, match="cannot read"):
        read_dump(bad)


@pytest.mark.parametrize(
    ("nvml", "lmx"),
    [
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA GeForce RTX 3090 Ti", "RTX 3090 Ti"),
        ("NVIDIA H200", "H200"),
    ],
)
def test_lmx_gpu_names(nvml: str, lmx: str) -> None:
    assert lmx_gpu_name(nvml) == lmx
