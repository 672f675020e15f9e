"""Record the hardware fixtures on a real GPU (run on the device machine, not a test):

    python3 tests/gpu/record_fixtures.py --out DIR [--prefix h200]

Writes <prefix>-nvml-dump.json (raw NVML answers), <prefix>-json (built from it),
<prefix>-nvidia-smi.json (raw nvidia-smi texts, UUIDs redacted), <prefix>-json (10 Hz
samples around idle / bf16-matmul load / idle, with the instants marked), <prefix>-bandwidth.json
(torch copy probe), <prefix>-json and summary.json. Unit tests replay these files.
Each stage is guarded, so one failure does not lose the others.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpuload import matmul_load

from bench.machine import (
    SMI_FIELDS,
    Sampler,
    build_hardware,
    capture_hardware,
    capture_provenance,
    probe_bandwidth,
    record_nvml,
    run_command,
    summarize_sampler,
)

UUID_RE = re.compile(r"GPU-[0-9a-fA-F-]{36}")
REDACTED_UUID = "GPU-00000000-0000-0000-0000-000000000000"


class Recorder:
    def __init__(self, out: Path, prefix: str) -> None:
        self.out = out
        self.prefix = prefix
        self.summary: dict[str, Any] = {"errors": {}}

    def write(self, name: str, text: str) -> None:
        (self.out / f"{self.prefix}-{name}.json").write_text(text + "\n", encoding="utf-8")

    def stage(self, name: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            self.summary["errors"][name] = traceback.format_exc()
            print(self.summary["errors"][name], file=sys.stderr)

    def hardware(self) -> None:
        dump = record_nvml()
        self.write("nvml-dump", dump.model_dump_json(indent=2))
        hw = build_hardware(dump)
        self.write("hardware", hw.model_dump_json(indent=2))
        self.summary["hardware"] = hw.model_dump()
        run = run_command
        smi = {
            "csv": run(
                [
                    "nvidia-smi",
                    f"--query-gpu={SMI_FIELDS}",
                    "--format=csv,noheader,nounits",
                ]
            ),
            "banner": run(["nvidia-smi"]),
            "topo": run(["nvidia-smi", "topo", "-m"]),
        }
        red = {k: UUID_RE.sub(REDACTED_UUID, v) if v else v for k, v in smi.items()}
        self.write("nvidia-smi", json.dumps(red, indent=2))

    def telemetry(self, idle: float, load_s: float) -> None:
        marks: dict[str, float] = {}
        with Sampler(interval_s=0.1) as sampler:
            marks["idle_start"] = time.monotonic()
            time.sleep(idle)
            marks["load_start"] = time.monotonic()
            load = matmul_load(load_s)
            marks["load_end"] = time.monotonic()
            time.sleep(idle)
            marks["idle_end"] = time.monotonic()
        rec = sampler.recording(
            marks=marks, note=f"idle {idle}s, bf16 8192^3 matmuls {load_s}s, idle {idle}s"
        )
        self.write("telemetry", rec.model_dump_json(indent=2))

        def span(a: str, b: str) -> dict[str, Any]:
            s = summarize_sampler(sampler, [(marks[a], marks[b])])
            return s.model_dump(exclude={"windows"})

        def rng(field: str) -> list[Any]:
            vals = [getattr(s, field) for s in rec.samples if getattr(s, field) is not None]
            return [min(vals), max(vals)] if vals else []

        self.summary["telemetry"] = {
            "rateHz": sampler.rate_hz(),
            "samples": len(rec.samples),
            "errors": sampler.errors,
            "load": load,
            "loadWindow": span("load_start", "load_end"),
            "idleWindow": span("idle_start", "load_start"),
            "ranges": {f: rng(f) for f in ("powerW", "smClockMhz", "memClockMhz", "temperatureC")},
            "throttleMasks": sorted({s.throttleReasons for s in rec.samples if s.throttleReasons}),
        }

    def bandwidth(self) -> None:
        bw = probe_bandwidth()
        self.write("bandwidth", bw.model_dump_json(indent=2))
        self.summary["bandwidth"] = bw.model_dump()

    def provenance(self) -> None:
        hw = capture_hardware()
        prov = capture_provenance(hardware=hw, command=["tests/gpu/record_fixtures.py"])
        self.write("provenance", prov.model_dump_json(indent=2))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--prefix", default="h200")
    ap.add_argument("--idle", type=float, default=2.0)
    ap.add_argument("--load", type=float, default=6.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    r = Recorder(args.out, args.prefix)
    r.stage("hardware", r.hardware)
    r.stage("telemetry", lambda: r.telemetry(args.idle, args.load))
    r.stage("bandwidth", r.bandwidth)
    r.stage("provenance", r.provenance)
    text = json.dumps(r.summary, indent=2, default=str)
    (args.out / "summary.json").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 1 if r.summary["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
