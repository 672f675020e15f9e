"""Re-render the worked GPU examples' reports from what the repository kept of their runs.

The full artifacts of the H200 runs behind docs/gpu-tiny-example and docs/gpu-sglang-example
were not kept. The recorded payloads under tests/fixtures/vllm-gpu/ and tests/fixtures/sglang-gpu/
are byte-identical copies of some of them (the SHA256 column of the reports as first rendered,
kept beside the new ones, shows which). For each example this rebuilds an artifacts folder from
those payloads, the trimmed logs, the recorded hardware.json and the experiment file at the
commit that ran (checked against the SHA256 the first report names), and runs `specbench report`
on it:

    python3 scripts/example_from_recordings.py OUT_DIR [EXAMPLE ...]

The lock's run id and creation time come from the payloads, the prompt seed from the
experiment, the launcher was `process` (scripts/gpu_tiny.sh, scripts/gpu_sglang.sh) and the
SGLang runs went `--allow-unpinned`. Nothing is measured or made up here: a payload that was not
kept is absent, and the report shows its level as unknown. The recorded status.json is left
out: it lists the payloads that were not kept, and the report refuses a folder that lost what
its status says the run wrote.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VLLM = REPO / "tests" / "fixtures" / "vllm-gpu"
SGLANG = REPO / "tests" / "fixtures" / "sglang-gpu"


@dataclass(frozen=True)
class Example:
    experiment: str  # file name under bench/experiments/
    commit: str  # a commit whose copy of the experiment is the one that ran
    sha256: str  # the experiment file's SHA256, as the first report names it
    fixtures: Path
    payloads: dict[str, str]  # fixture payload stem -> stem in the artifacts
    logs: dict[str, str]  # fixture log stem -> configuration
    docs: str  # the example's folder under docs/
    unpinned: bool = False
    notes: list[str] = field(default_factory=list)


EXAMPLES = {
    "vllm": Example(
        "tiny-vllm-gpu.yaml",
        "68120bd",
        "21d0b83c3f0d2cffe32ea1b7a64f700c7c7e5383ef632e0e0e3fdd5e760fe1da",
        VLLM,
        {s: s for s in ("baseline-c1", "self-draft-c1", "self-draft-c4", "partial-draft-c1",
                        "eager-c1")},
        {s: s for s in ("baseline", "self-draft", "eager")},
        "gpu-tiny-example",
    ),
    "vllm-dflash": Example(
        "tiny-vllm-gpu-dflash.yaml",
        "564b59e",
        "b85eab35540b951e98021a93b815e06631fe10fb9e4e08207b1362f0a287393d",
        VLLM,
        {"dflash-c1": "dflash-c1"},
        {"dflash": "dflash"},
        "gpu-tiny-example/dflash",
    ),
    "sglang-dflash": Example(
        "tiny-sglang-gpu-dflash.yaml",
        "beb4ad4",
        "8492a7c38d31d99dc0b5360faa01b75187e8ef31b492d675d35882c7e301bca7",
        SGLANG,
        {"dflash-baseline-c1": "baseline-c1", "dflash-dflash-c1": "dflash-c1",
         "dflash-dflash-c4": "dflash-c4"},
        {"dflash-baseline": "baseline", "dflash-dflash": "dflash"},
        "gpu-sglang-example/dflash",
        unpinned=True,
    ),
    "sglang-mtp": Example(
        "tiny-sglang-gpu-mtp.yaml",
        "beb4ad4",
        "c57784d4c7a6afd56f7d746e05cd5e1fd535fb05f6b19fbe171d71c4442b1812",
        SGLANG,
        {"mtp-mtp-c1": "mtp-c1"},
        {"mtp-baseline": "baseline", "mtp-mtp": "mtp"},
        "gpu-sglang-example/mtp",
        unpinned=True,
    ),
    "sglang-tiny": Example(
        "tiny-sglang-gpu.yaml",
        "beb4ad4",
        "8e612487712d0002171a34055584c0f01724c1e8b1a30763ca5b70ce45fa5d92",
        SGLANG,
        {"tiny-standalone-c1": "standalone-c1"},
        {"tiny-baseline": "baseline", "tiny-standalone": "standalone"},
        "gpu-sglang-example/tiny",
        unpinned=True,
    ),
}  # fmt: skip


def artifacts(ex: Example, dest: Path) -> Path:
    import yaml

    from bench.engines import parse_experiment
    from bench.schema import RunLock

    path = f"bench/experiments/{ex.experiment}"
    src = subprocess.run(
        ["git", "show", f"{ex.commit}:{path}"], cwd=REPO, capture_output=True, check=True
    ).stdout
    if hashlib.sha256(src).hexdigest() != ex.sha256:
        sys.exit(f"{path} at {ex.commit} is not the experiment that ran")
    exp = parse_experiment(yaml.safe_load(src), f"{path}@{ex.commit}")
    (dest / "payloads").mkdir(parents=True)
    (dest / "logs").mkdir()
    run_ids = set()
    for stem, name in ex.payloads.items():
        raw = (ex.fixtures / "payloads" / f"{stem}.json").read_bytes()
        (dest / "payloads" / f"{name}.json").write_bytes(raw)
        run_ids.add(json.loads(raw)["evidence"]["run"]["run_id"])
    for stem, name in ex.logs.items():
        shutil.copy(ex.fixtures / "logs" / f"{stem}.log", dest / "logs" / f"{name}.log")
    shutil.copy(ex.fixtures / "hardware.json", dest / "hardware.json")
    (run_id,) = run_ids
    created = datetime.strptime(run_id.split("-")[0], "%Y%m%dT%H%M%SZ")
    lock = RunLock(
        run_id=run_id,
        created_at=created.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
        simulated=False,
        launcher="process",
        prompt_seed=exp.workload.prompt_seed,
        unresolved_pins=exp.unresolved_pins() if ex.unpinned else [],
        experiment=exp,
    )
    (dest / "experiment.lock.json").write_text(lock.model_dump_json(by_alias=True, indent=1))
    lines = [
        f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.relative_to(dest).as_posix()}"
        for f in sorted(dest.rglob("*"))
        if f.is_file()
    ]
    (dest / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return dest


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    from bench.report import render_report

    out = Path(sys.argv[1])
    for name in sys.argv[2:] or list(EXAMPLES):
        ex = EXAMPLES[name]
        art = artifacts(ex, out / name / "artifacts")
        print(name, render_report(art, out / name / "report"))


if __name__ == "__main__":
    main()
