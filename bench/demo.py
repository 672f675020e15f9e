"""``specbench demo``: the whole pipeline on the emulator, as local processes (no Docker, no GPU).

It runs the seed experiment (every configuration, every concurrency level, the seed's 1044-token
prompts) against emulated engines, including the broken-draft configuration (the seed's first
SGLang MTP attempt: 7 skipped tensors, zero acceptance) so the invalid-run path shows, then
renders ``reports/demo/REPORT.md``. Everything it writes is labelled SIMULATED.

To finish in well under a minute on 2 cores, the demo shortens the workload (``DEMO_WORKLOAD``:
fewer output tokens, one warmup and three measured iterations) and runs the emulator at
``DEMO_TIME_SCALE``; the experiment it really ran is written next to the report
(``experiment.yaml``) and recorded in the artifacts' lock and provenance.

Issue 48 in part 1 (``demo_document``): the seed's DFlash configurations each get a SYNTHETIC
ACCEPTANCE control, two configurations the seed does not have show what the report does with
methods that are not fixed-k lossless (vLLM MTP with FLy, SGLang DFlash with adaptive depth),
and every configuration answers the emulator's constructed exact-answer task (the accuracy
gate). Part 1 took 44.6 s with them against 41.6 s without, on a loaded 2-core machine (the
emulators start at once; the controls start after their sources, whose acceptance they force).

Part 2 (``run_categories_demo``, ``specbench demo --no-categories`` skips it): the seed host's
categories experiment (a prompt set of real text by category) into ``<out>/categories``, whose
report has the section on acceptance and speedup by prompt category, SIMULATED as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bench.core import (
    InputError,
    ensure_dir,
    read_json_model,
    read_yaml,
    remove_tree,
    sha256_file,
    write_text,
)
from bench.engines import load_experiment
from bench.matrix import MatrixOptions, MatrixResult, run_matrix
from bench.report import render_report
from bench.schema import EXPERIMENTS_DIR, LOCK_FILE, RunLock

DEMO_EXPERIMENT = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
DEMO_OUT = Path("reports/demo")
#: emulated durations x 0.02: a 95 s simulated load takes 1.9 s. Smaller scales make the
#: emulated token rate outrun a busy 2-core machine (whole streams in one read: invalid runs).
DEMO_TIME_SCALE = 0.02
#: the demo's workload changes to the seed's (1044 prompt / 512 output tokens, warmup 2,
#: iterations 5, concurrency 1/2/4/8/16); the prompts stay the seed's
DEMO_WORKLOAD: dict[str, Any] = {
    "max_tokens": 128,
    "warmup": 1,
    "iterations": 3,
    "concurrency": [1, 4, 16],
    # 2 logprob probes a level, not the runner's 8: the demo's healthy runs are identical to
    # their baselines, so the lossless check never needs them, and 8 cost ~5 s of a ~23 s demo
    "logprob_probes": 2,
}


#: the second part of the demo (issue 37): the seed host's categories experiment, every
#: configuration, over the categorised prompt set, shortened like the seed's
CATEGORIES_EXPERIMENT = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090-categories.yaml"
CATEGORIES_WORKLOAD: dict[str, Any] = {
    "max_tokens": 64,
    "warmup": 1,
    "iterations": 3,
    "concurrency": [1, 4],
    "logprob_probes": 0,
}


def demo_banner(time_scale: float = DEMO_TIME_SCALE, *, seed_workload: bool = False) -> str:
    """One line that says what the demo runs and how it differs from the seed experiment."""
    w = load_experiment(DEMO_EXPERIMENT).workload
    head = f"SIMULATED demo: the seed experiment on the emulator at time scale {time_scale:g}"
    if seed_workload:
        return f"{head}, the seed's workload"
    d = DEMO_WORKLOAD
    return (
        f"{head}, workload shortened to {w.prompt_tokens} prompt / {d['max_tokens']} output "
        f"tokens, warmup {d['warmup']}, {d['iterations']} iterations, concurrency "
        f"{_levels(d['concurrency'])}, {d['logprob_probes']} logprob probes a level "
        f"(the seed: {w.max_tokens} output tokens, warmup "
        f"{w.warmup}, {w.iterations} iterations, concurrency {_levels(w.concurrency)}; "
        f"--seed-workload runs it)"
    )


def _levels(levels: list[int]) -> str:
    return "/".join(str(c) for c in levels)


#: issue 48 in the demo: the emulator's own constructed exact-answer task (its greedy output is
#: " w0 w1 ..." for every prompt: bench/emulator/tokens.py), asked of every configuration
DEMO_ACCURACY_TASK = EXPERIMENTS_DIR.parent / "prompts" / "emulator-continuation.jsonl"
DEMO_ACCURACY: dict[str, Any] = {
    "name": "emulator-continuation",
    "scorer": "prefix",
    "max_tokens": 8,
}
#: the seed's DFlash configurations get a SYNTHETIC ACCEPTANCE control each
DEMO_SYNTHETIC_CONTROLS = ("vllm-dflash", "sglang-dflash")


def demo_extra_configurations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Two configurations the seed does not have, to show what the report does with methods
    that break the fixed-k lossless comparison (issue 48): vLLM MTP with FLy's lossy
    verification (vLLM 0.33.0 ``rejection_sample_method: fly``) and SGLang DFlash with
    ``--speculative-adaptive``; both derived from the seed's own configurations."""
    by_name = {c["name"]: c for c in doc["configurations"]}
    fly = {**by_name["vllm-mtp"], "name": "vllm-mtp-fly"}
    spec = '{"method":"qwen3_next_mtp","num_speculative_tokens":2,"rejection_sample_method":"fly"}'
    fly["args"] = [*fly["args"][:-1], spec, "--per-request-spec-decode-metrics", "summary"]
    fly["notes"] = "Demo only: FLy's lossy verification (vLLM 0.33.0), never a lossless claim."
    adaptive = {**by_name["sglang-dflash"], "name": "sglang-dflash-adaptive"}
    adaptive["args"] = [*adaptive["args"], "--speculative-adaptive"]
    adaptive["notes"] = "Demo only: SGLang's adaptive depth, never in a depth sweep's best k."
    for cfg in (fly, adaptive):
        cfg.pop("deviations", None)
        cfg.pop("synthetic_control", None)
    return [fly, adaptive]


def demo_document(workload: dict[str, Any] | None = None) -> dict[str, Any]:
    """The seed experiment's YAML document with the demo's workload (``{}``: the seed's), the
    demo's accuracy task, SYNTHETIC ACCEPTANCE controls and two methods that are not fixed-k
    lossless (issue 48)."""
    doc: dict[str, Any] = read_yaml(DEMO_EXPERIMENT, what="experiment file")
    doc["workload"] = {**doc["workload"], **(DEMO_WORKLOAD if workload is None else workload)}
    doc["workload"]["accuracy"] = {
        **DEMO_ACCURACY,
        "path": str(DEMO_ACCURACY_TASK.resolve()),
        "sha256": sha256_file(DEMO_ACCURACY_TASK),
    }
    for cfg in doc["configurations"]:
        if cfg["name"] in DEMO_SYNTHETIC_CONTROLS:
            cfg["synthetic_control"] = True
    extra = demo_extra_configurations(doc)
    at = next(i for i, c in enumerate(doc["configurations"]) if c["name"] == "vllm-baseline")
    doc["configurations"][at:at] = extra
    return doc


def run_demo(
    out: Path = DEMO_OUT,
    *,
    time_scale: float = DEMO_TIME_SCALE,
    iterations: int | None = None,
    warmup: int | None = None,
    only: list[str] | None = None,
    show_progress: bool = True,
    workload: dict[str, Any] | None = None,
) -> tuple[MatrixResult, Path]:
    """Run the demo into ``out`` (artifacts in ``out/artifacts``); returns the report path.

    ``workload`` replaces DEMO_WORKLOAD (``{}``: the seed's workload unchanged)."""
    artifacts = out / "artifacts"
    _check_demo_out(out, artifacts)
    ensure_dir(out, "--out")
    if artifacts.exists():
        # A demo is disposable: start clean so the report is of this run only.
        remove_tree(artifacts, root=out)
    # the experiment as run, so the provenance's experiment hash is of what really ran
    exp_path = out / "experiment.yaml"
    banner = demo_banner(time_scale, seed_workload=workload == {})
    header = f"# {banner}\n# derived from {DEMO_EXPERIMENT.name}\n"
    write_text(exp_path, header + yaml.safe_dump(demo_document(workload), sort_keys=False))
    exp = load_experiment(exp_path)
    opts = MatrixOptions(
        out=artifacts,
        only=only or [],
        launcher="process",
        emulate=True,
        time_scale=time_scale,
        iterations=iterations,
        warmup=warmup,
        show_progress=show_progress,
        # every emulator starts at once: their start-ups overlap (a third of the demo's time)
        prestart=True,
    )
    result = run_matrix(exp, opts, experiment_path=exp_path)
    return result, render(artifacts, out)


def categories_document(workload: dict[str, Any] | None = None) -> dict[str, Any]:
    """The categories experiment's document with the demo's workload; its prompt set's path
    made absolute (the document is written elsewhere)."""
    doc: dict[str, Any] = read_yaml(CATEGORIES_EXPERIMENT, what="experiment file")
    ps = dict(doc["workload"]["prompt_set"])
    ps["path"] = str((CATEGORIES_EXPERIMENT.parent / ps["path"]).resolve())
    extra = CATEGORIES_WORKLOAD if workload is None else workload
    doc["workload"] = {**doc["workload"], **extra, "prompt_set": ps}
    return doc


def run_categories_demo(
    out: Path,
    *,
    time_scale: float = DEMO_TIME_SCALE,
    show_progress: bool = True,
    workload: dict[str, Any] | None = None,
    only: list[str] | None = None,
) -> tuple[MatrixResult, Path]:
    """The categories experiment on the emulator into ``out`` (artifacts in ``out/artifacts``):
    its report has the per-category section (SIMULATED). ``workload`` replaces
    CATEGORIES_WORKLOAD (``{}``: the experiment's own); ``only`` names configurations."""
    artifacts = out / "artifacts"
    _check_demo_out(out, artifacts)
    ensure_dir(out, "--out")
    if artifacts.exists():
        remove_tree(artifacts, root=out)
    exp_path = out / "experiment.yaml"
    header = (
        f"# SIMULATED demo, part 2: {CATEGORIES_EXPERIMENT.name} on the emulator at time scale "
        f"{time_scale:g}, workload {CATEGORIES_WORKLOAD if workload is None else workload}\n"
    )
    write_text(exp_path, header + yaml.safe_dump(categories_document(workload), sort_keys=False))
    exp = load_experiment(exp_path)
    opts = MatrixOptions(
        out=artifacts,
        only=only or [],
        launcher="process",
        emulate=True,
        time_scale=time_scale,
        show_progress=show_progress,
        prestart=True,
    )
    result = run_matrix(exp, opts, experiment_path=exp_path)
    return result, render(artifacts, out)


def _check_demo_out(out: Path, artifacts: Path) -> None:
    """Before anything is written or removed: ``out`` is new, empty, or an earlier demo's
    (its artifacts a SIMULATED run): a demo never deletes a folder it did not write."""
    if out.exists() and not out.is_dir():
        raise InputError("--out", f"{out} exists and is a file, not a folder")
    if not out.is_dir() or {p.name for p in out.iterdir()} <= {"experiment.yaml"}:
        return  # new, empty, or a demo stopped before its run began
    try:
        lock = read_json_model(artifacts / LOCK_FILE, RunLock)
    except InputError:
        lock = None
    if lock is None or not lock.simulated or artifacts.is_symlink():
        raise InputError(
            "--out",
            f"{out} holds files that are not an earlier demo's (a demo replaces "
            f"{artifacts} and the report): give a new or empty folder",
        )


def render(artifacts: Path, out: Path) -> Path:
    """REPORT.md through the report renderer (bench.report.render_report)."""
    path: Path = render_report(artifacts, out)
    return path
