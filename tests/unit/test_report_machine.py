"""The report's roofline, GPU telemetry and hardware/provenance tables, from artifacts."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from report_factory import (
    experiment_lock,
    seed_matrix,
    set_hardware,
    write_artifacts,
    write_sums,
)

from bench.machine import ceiling, decode_bytes_from_checkpoint
from bench.report import load_artifacts, render_report
from bench.report._charts import ChartSpec
from bench.report._svg import chart_svg, nice_ticks
from bench.schema import (
    GpuEntry,
    GpuExtended,
    GpuWindowStats,
    Hardware,
    HardwareExtended,
    ModelBytes,
    TelemetrySummary,
    WeightsFile,
    read_payload,
    write_payload,
)

DUAL_3090 = Hardware(
    hwClass="DISCRETE_GPU",
    gpuName="NVIDIA GeForce RTX 3090",
    gpuCount=2,
    vramGb=48.0,
    gpus=[GpuEntry(name="NVIDIA GeForce RTX 3090", vramGb=24.0)] * 2,
    cpu="Test CPU",
    ramGb=64.0,
    os="Linux",
    extended=HardwareExtended(
        source="fixture",
        driverVersion="580.95.05",
        cudaDriverVersion="13.0",
        gpus=[
            GpuExtended(
                index=i,
                pcieGenCurrent=4,
                pcieGenMax=4,
                pcieWidthCurrent=16 if i == 0 else 8,
                pcieWidthMax=16,
                powerLimitW=350.0,
                datasheetBandwidthGBs=936.0,
            )
            for i in (0, 1)
        ],
        p2p={"0-1": "not supported"},
        topologyPairs={"0-1": "HOSTBRIDGE"},
    ),
)


@pytest.fixture
def art(tmp_path: Path) -> Path:
    root = write_artifacts(tmp_path / "art", seed_matrix(), lock=experiment_lock())
    set_hardware(root, DUAL_3090)
    prov = {
        "git": {"sha": "0123abcd", "dirty": True},
        "specbenchVersion": "0.1.0",
        "experiment": {"path": "exp.yaml", "sha256": "f" * 64},
        "images": [
            {"ref": "vllm/vllm-openai:v0.33.0", "engine": "vllm", "upstreamVersion": "0.33.0"}
        ],
    }
    (root / "provenance.json").write_text(json.dumps(prov))
    return root


def _report(art: Path, tmp_path: Path) -> str:
    text = render_report(art, tmp_path / "out").read_text()
    MarkdownIt("commonmark").enable("table").parse(text)
    return text


def test_roofline_uses_datasheet_and_estimates_and_matches_the_formula(
    art: Path, tmp_path: Path
) -> None:
    rs = load_artifacts(art)
    roof = rs.roofline
    assert roof is not None and roof.bandwidth_source == "datasheet"
    assert roof.bandwidth_gbs == 936.0 and roof.cards == 2
    exp = json.loads(experiment_lock())["experiment"]
    target = exp.get("models", {}).get("target", {})
    w = target["weight_bytes"]["estimate"]
    kv = target["kv_bytes_per_token"]["estimate"]
    mtp = target["mtp_head_bytes"]["estimate"]
    row = next(r for r in roof.rows if r.config == "vllm-mtp" and r.concurrency == 1)
    run = next(r for r in rs.runs if r.key == row.key)
    want = ceiling(
        936.0,
        2,
        w,
        kv_bytes_per_token=kv,
        context_tokens=roof.context_tokens or 0,
        tokens_per_step=run.mean_acceptance_length or 0,
        draft_bytes_per_step=(run.spec_tokens or 0) * mtp,
    )
    assert row.ceiling == pytest.approx(want.ceilingTokS)
    assert row.fraction == pytest.approx((run.decode.mean or 0) / want.ceilingTokS)
    text = _report(art, tmp_path)
    assert "## Bandwidth roofline" in text and "936.00 GB/s per card (datasheet" in text
    assert "ESTIMATE" in text


def test_measured_bandwidth_and_checkpoint_bytes_win_and_above_ceiling_is_flagged(
    art: Path, tmp_path: Path
) -> None:
    probe = {"devices": [{"bandwidthGBs": 870.0}, {"bandwidthGBs": 850.0}]}
    (art / "bandwidth.json").write_text(json.dumps(probe))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    _safetensors(
        ckpt / "model.safetensors",
        {
            "model.layers.0.w": 1000,
            "lm_head.weight": 500,
            "model.embed_tokens.weight": 700,
            "model.visual.x": 300,
            "mtp.fc.weight": 40,
        },
    )
    found = decode_bytes_from_checkpoint(ckpt)
    assert found is not None
    assert (found.decodeWeightBytes, found.mtpHeadBytes) == (1500, 40)
    assert (found.embeddingBytes, found.visionBytes) == (700, 300)
    weights = WeightsFile(
        created_at="2026-12-03T00:00:00+00:00",
        models={"target": ModelBytes(hf_id="t/t", **found.model_dump())},
    )
    (art / "weights.json").write_text(weights.model_dump_json(by_alias=True))
    roof = load_artifacts(art).roofline
    assert roof is not None and roof.bandwidth_source == "measured"
    assert roof.bandwidth_gbs == 850.0  # the slower card
    src = {b.what: b for b in roof.inputs}
    assert src["target weight_bytes"].value == 1500
    assert "safetensors" in src["target weight_bytes"].source
    assert not any(r.above for r in roof.rows)
    # A probe far below what the measured rates need: every one is "above the ceiling".
    probe = {"devices": [{"bandwidthGBs": 1.0}]}
    (art / "bandwidth.json").write_text(json.dumps(probe))
    roof = load_artifacts(art).roofline
    assert roof is not None and all(r.above for r in roof.rows if r.ceiling is not None)
    assert "ABOVE 1.15x CEILING" in _report(art, tmp_path)


def test_unknown_inputs_are_said_not_invented(art: Path, tmp_path: Path) -> None:
    lock = json.loads((art / "experiment.lock.json").read_text())
    exp = lock.get("experiment", lock)
    exp["models"]["target"].pop("weight_bytes")
    (art / "experiment.lock.json").write_text(json.dumps(lock))
    set_hardware(art, DUAL_3090.model_copy(update={"extended": None}))
    roof = load_artifacts(art).roofline
    assert roof is not None and roof.bandwidth_gbs is None
    assert all(r.ceiling is None and r.unknown for r in roof.rows)
    text = _report(art, tmp_path)
    assert "No decode ceiling can be computed for this run." in text
    assert "Unknown: memory bandwidth" in text and "; target weight bytes (" in text
    # a table of rows that are all 'unknown' carries nothing: the sentence replaces it
    assert "Ceiling tok/s per stream" not in text


def test_hardware_provenance_tables_and_telemetry(art: Path, tmp_path: Path) -> None:
    f = art / "payloads" / "vllm-dflash-c1.json"
    p = read_payload(f)
    summ = TelemetrySummary(
        source="nvml",
        intervalS=0.1,
        windowCount=5,
        measuredSeconds=23.4,
        gpus=[
            GpuWindowStats(gpu=0, samples=10, powerMeanW=301.0, throttleReasons=["sw_power_cap"]),
            GpuWindowStats(gpu=1, samples=10, powerMeanW=287.0),
        ],
        totalPowerMeanW=588.0,
        energyPerOutputTokenJ=5.375,
        throttled=True,
        throttleReasons=["sw_power_cap"],
    )
    ev = p.evidence.model_copy(update={"telemetry": summ})
    write_payload(f, p.model_copy(update={"evidence": ev}))
    write_sums(art)  # as the run would have vouched for it
    text = _report(art, tmp_path)
    assert "| Driver | 580.95.05 |" in text and "| CUDA (driver) | 13.0 |" in text
    assert "| 1 | 4/4 | x8/x16 | 350 W | 936 GB/s |" in text
    assert "| 0-1 | not supported | HOSTBRIDGE |" in text
    assert "| Git SHA | 0123abcd |" in text and "| Git tree dirty | yes |" in text
    assert "vllm/vllm-openai:v0.33.0" in text
    assert "## GPU telemetry" in text
    assert "588.00 W" in text and "301 W / 287 W" in text and "5.375 J" in text
    assert "**sw\\_power\\_cap**" in text
    assert "No GPU telemetry for" in text  # the other payloads carry none, and it is said


def _safetensors(path: Path, sizes: dict[str, int]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, n in sizes.items():
        header[name] = {"dtype": "U8", "shape": [n], "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * off)


def test_charts_are_redrawn_only_when_their_data_changes(art: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out).mkdir()
    (out / "decode.png").write_bytes(b"\x89PNG from an older specbench")
    render_report(art, out)
    # a file the report did not write (no entry of .charts.json names it with its bytes) is never
    # deleted, whatever its name: only specbench's own stale charts are (issue 42)
    assert (out / "decode.png").read_bytes() == b"\x89PNG from an older specbench"
    svgs = {p.name: p.stat().st_mtime_ns for p in out.glob("*.svg")}
    assert set(svgs) == {
        "decode.svg",
        "ttft.svg",
        "concurrency.svg",
        "acceptance.svg",
        "frontier.svg",
    }
    render_report(art, out)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.svg")} == svgs
    # A changed figure redraws the charts showing it; the acceptance chart is untouched.
    f = art / "payloads" / "vllm-dflash-c1.json"
    p = read_payload(f)
    write_payload(f, p.model_copy(update={"ttftMs": p.ttftMs}))  # same data: still cached
    render_report(art, out)
    assert (out / "acceptance.svg").stat().st_mtime_ns == svgs["acceptance.svg"]
    (out / "decode.svg").write_text("tampered")  # a chart that is not the one drawn
    render_report(art, out)
    assert (out / "decode.svg").read_text().startswith("<svg ")


def test_nice_ticks() -> None:
    assert nice_ticks(109.36 * 1.12) == [0, 50, 100, 150]
    assert nice_ticks(100.0, 0.0) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(0.7) == [0, 0.2, 0.4, 0.6, 0.8]


def test_an_svg_bar_chart_has_its_bars_error_bars_and_escaped_labels() -> None:
    """Worked by hand: the y axis runs 0..150 (ticks of 50: 105 x 1.12 = 117.6 rounds up) over
    the plot's 262 px (342 - 34 - 46), so a bar of 100 tok/s is 262 x 100 / 150 = 174.7 px
    tall from y = 34 + 262 - 174.7 = 121.3; two bars share 546 px: 273 px a slot, bars 0.7 of
    it (191.1 px), bar 0 centred at 70 + 136.5 = 206.5; its error bar spans 95..105 tok/s,
    y = 296 - 262 x 105/150 = 112.6 to 296 - 262 x 95/150 = 130.1."""
    spec = ChartSpec(
        role="decode", file="decode.svg", alt="Decode chart", title="SIMULATED: <decode> & co",
        kind="bars", ylabel="tok/s", labels=["vLLM + DFlash", "a<b"], values=[100.0, 50.0],
        errors=[5.0, 0.0], annotate=True,
    )  # fmt: skip
    svg = chart_svg(spec.model_dump(mode="json"))
    assert svg.startswith("<svg xmlns='http://www.w3.org/2000/svg'")
    assert "<title>SIMULATED: &lt;decode&gt; &amp; co</title>" in svg
    assert "<rect x='111.0' y='121.3' width='191.1' height='174.7'" in svg
    assert "M206.5 112.6V130.1" in svg
    assert ">a&lt;b<" in svg and ">100.00<" in svg and ">50.00<" in svg
    assert svg.count("<path d='M") == 1  # the second bar has no error bar (0)
