"""What the GPU recordings' contract tests share (test_sglang_gpu_recordings.py,
test_fourway_gpu_recordings.py): the seed's skipped MTP projections, the patch's log line, and
acceptance recomputed from a payload's raw /metrics snapshots, and reading a kept run folder."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from bench.measure._acceptance import combine, delta
from bench.schema import AcceptanceDelta, Payload

KEPT = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-runs"

SKIP = "draft_tensors_skipped"
#: the seed's 7 skipped MTP projections, under the names the draft's loader tried
SKIPPED = {
    f"model.layers.0.{n}.weight"
    for n in ("q_proj", "k_proj", "v_proj", "o_proj", "mlp.gate_proj", "mlp.up_proj",
              "mlp.down_proj")
}  # fmt: skip
PATCH_LINE = "specbench patch: Qwen3.5 MTP draft keeps the explicit"


def recomputed(p: Payload) -> AcceptanceDelta:
    """The run's acceptance from each measured iteration's raw before/after /metrics snapshots
    (bench.measure's own delta), summed: what the stored figures must equal."""
    windows = []
    for it in p.evidence.iterations:
        acc = it.acceptance
        if it.warmup or acc is None or acc.before is None or acc.after is None:
            continue
        d = delta(p.engineName, acc.before, acc.after, p.engineFlags.specNumTokens)
        assert d is not None, f"iteration {it.index}: no speculative counters in its snapshots"
        windows.append(d)
    total = combine(windows)
    assert total is not None, "no measured window with raw snapshots"
    return total


def unpack(name: str, into: Path) -> Path:
    """The kept run folder ``KEPT/<name>.tar.xz``, extracted under ``into``."""
    with tarfile.open(KEPT / f"{name}.tar.xz") as tar:
        tar.extractall(into, filter="data")
    return into / name


def log(run: Path, name: str) -> str:
    return (run / "logs" / f"{name}.log").read_text(encoding="utf-8")


def payload(run: Path, name: str) -> Payload:
    return Payload.model_validate_json((run / "payloads" / f"{name}.json").read_text())


def status(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "status.json").read_text())["configurations"]
    return data


def report(run: Path, out: Path) -> str:
    """REPORT.md as today's ``specbench report`` renders the kept folder."""
    subprocess.run(
        [sys.executable, "-m", "bench", "report", str(run), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return (out / "REPORT.md").read_text(encoding="utf-8")


#: the summary's stock-vs-patched finding on the toy chain target, in both H100 series
FINDING = (
    "accepted 420 of 430 draft tokens (97.67%) and is valid",
    "accepted 0 of 1270 draft tokens (0.00%) and is **INVALID**",
)


def section(text: str, heading: str) -> str:
    """The body of the report's ``## heading`` section."""
    return text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
