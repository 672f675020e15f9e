"""Issue 48 through the demo's pipeline (the matrix on emulator processes, then the report): the
SYNTHETIC ACCEPTANCE controls get their engine's knob set to what their source measured in the
same run, FLy and adaptive depth are read from the flags and the server's own log, and every
configuration answers the accuracy task. Short workload: one level, two iterations (~20 s)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.demo import DEMO_ACCURACY_TASK, run_demo
from bench.emulator.engine import lossy_start
from bench.emulator.profile import Verification
from bench.emulator.runner import resolve_profile
from bench.schema import Payload, read_payload

pytestmark = pytest.mark.integration

ONLY = [
    "vllm-dflash", "vllm-dflash-synthetic", "sglang-dflash", "sglang-dflash-synthetic",
    "vllm-mtp-fly", "sglang-dflash-adaptive", "vllm-baseline", "sglang-baseline",
]  # fmt: skip
# prompt_seed pinned: the emulator's FLy leaves the target's output at a point drawn from the
# prompt (bench/emulator/engine.py:lossy_start), so with a seed drawn per run its two 32-token
# timed outputs were at times both still the baseline's and the gate read "FAIL (accuracy)"
# (1 of 6 runs here, one CI red); seed 1's prompts part inside the 32 tokens
WORKLOAD = {"max_tokens": 32, "warmup": 0, "iterations": 2, "concurrency": [1],
            "logprob_probes": 0, "prompt_seed": 1}  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Payload], str]:
    out = tmp_path_factory.mktemp("demo48")
    result, report = run_demo(out, only=ONLY, show_progress=False, workload=WORKLOAD)
    assert all(o.status == "done" for o in result.outcomes), result.outcomes
    payloads = {n: read_payload(out / "artifacts" / "payloads" / f"{n}-c1.json") for n in ONLY}
    return payloads, report.read_text(encoding="utf-8")


def pooled(p: Payload) -> tuple[float, list[float]]:
    """The source's acceptance length and per-position rates, from its counters."""
    acc = p.evidence.acceptance
    assert acc is not None and acc.drafts > 0
    return 1 + acc.accepted_tokens / acc.drafts, [n / acc.drafts for n in acc.accepted_per_position]


def test_vllm_control_forces_the_rates_its_source_measured(demo: Any) -> None:
    payloads, _ = demo
    length, rates = pooled(payloads["vllm-dflash"])
    ctl = payloads["vllm-dflash-synthetic"].evidence
    assert ctl.synthetic is not None and ctl.synthetic.of == "vllm-dflash"
    assert ctl.synthetic.acceptance_length == pytest.approx(length, abs=1e-6)
    assert ctl.synthetic.rates == pytest.approx(rates, abs=1e-4)
    assert ctl.launch is not None
    spec = json.loads(
        ctl.launch.server_argv[ctl.launch.server_argv.index("--speculative-config") + 1]
    )
    assert spec["rejection_sample_method"] == "synthetic"
    assert spec["synthetic_acceptance_rates"] == [round(r, 4) for r in rates]
    assert ctl.speculation is not None and ctl.speculation.labels == ["SYNTHETIC ACCEPTANCE"]


def test_sglang_control_gets_the_length_in_its_environment(demo: Any) -> None:
    payloads, _ = demo
    length, _ = pooled(payloads["sglang-dflash"])
    ctl = payloads["sglang-dflash-synthetic"].evidence
    assert ctl.launch is not None and ctl.launch.env is not None
    assert ctl.launch.env["SGLANG_SIMULATE_ACC_LEN"] == f"{length:.4f}"
    assert ctl.launch.env["SGLANG_SIMULATE_ACC_METHOD"] == "match-expected"
    assert ctl.speculation is not None and ctl.speculation.verification == "synthetic"


def test_lossy_and_adaptive_methods_are_read_from_flags_and_log(demo: Any) -> None:
    payloads, report = demo
    fly = payloads["vllm-mtp-fly"].evidence.speculation
    assert fly is not None and (fly.verification, fly.lossless) == ("fly", False)
    assert any("FLy verification is a lossy" in line for line in fly.from_log)
    ad = payloads["sglang-dflash-adaptive"].evidence.speculation
    assert ad is not None and (ad.lossless, ad.fixed_depth) == (True, False)
    assert ad.from_config == ["--speculative-adaptive"] and ad.from_log
    plain = payloads["vllm-dflash"].evidence.speculation
    assert plain is not None and (plain.lossless, plain.fixed_depth, plain.labels) == (
        True,
        True,
        [],
    )
    methods = report.split("## Methods that are not fixed-k lossless", 1)[1].split("\n## ", 1)[0]
    assert "vllm-mtp-fly" in methods and "sglang-dflash-adaptive" in methods
    ranking = report.split("## Decode ranking", 1)[1].split("\n## ", 1)[0]
    assert "synthetic" not in ranking and "fly" not in ranking


def test_every_configuration_answers_the_accuracy_task(demo: Any) -> None:
    payloads, report = demo
    prompts = [json.loads(x)["prompt"] for x in DEMO_ACCURACY_TASK.read_text().splitlines()]
    fly_profile = resolve_profile("vllm", "vllm-mtp", verification=Verification(method="fly"))
    # the emulator's FLy leaves the target's output at lossy_start: an 8-word answer whose
    # start falls inside it is wrong (bench/emulator/engine.py)
    fly_right = sum(1 for p in prompts if (lossy_start(fly_profile, p) or 99) >= 8)
    for name, p in payloads.items():
        acc = p.evidence.accuracy
        assert acc is not None and len(acc.items) == len(prompts), name
        right = sum(i.correct for i in acc.items)
        if name == "vllm-mtp-fly":
            assert right == fly_right < len(prompts)
        elif "synthetic" not in name:
            assert right == len(prompts), name
    timed = [
        (r.output_sha256, b.output_sha256)
        for it, bit in zip(
            payloads["vllm-mtp-fly"].evidence.iterations,
            payloads["vllm-baseline"].evidence.iterations,
            strict=True,
        )
        for r, b in zip(it.requests, bit.requests, strict=True)
    ]
    assert any(f != b for f, b in timed)  # what "and greedy" below stands on
    gate = report.split("## Accuracy gate", 1)[1].split("\n## ", 1)[0]
    assert (
        "| vllm-dflash | prefix | 12 of 12 | 100.0 % |" in gate
        and "FAIL (accuracy and greedy)" in gate
    )
