"""Speculative depth sweeps: declaration checks, expansion into one configuration per k, the
emulator at another depth, and the report's rules (hand-computed values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from report_factory import Spec, depth_lock, write_artifacts

from bench.cli import main
from bench.core import InputError
from bench.emulator import load_profile
from bench.engines import load_experiment, parse_experiment
from bench.engines.upstream import REPO_ROOT
from bench.report import load_artifacts, render_report
from bench.report._depth import ALPHA, best_k, depth_sweeps, expected_tokens_per_step

EXPERIMENTS = REPO_ROOT / "bench" / "experiments"
SEED = EXPERIMENTS / "qwen38-27b-gptq-2x3090.yaml"
DEPTH = EXPERIMENTS / "qwen38-27b-gptq-2x3090-depth.yaml"


def _doc() -> dict[str, object]:
    data = yaml.safe_load(SEED.read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("index", "sweep", "reason"),
    [
        (0, [], "empty depth sweep"),
        (0, [0, 2], ">= 1"),
        (0, [2, 2], "unique"),
        (6, [1, 2], "no speculation to sweep"),  # vllm-baseline
    ],
)
def test_bad_sweeps_name_the_field(index: int, sweep: list[int], reason: str) -> None:
    data = _doc()
    configs = data["configurations"]
    assert isinstance(configs, list)
    configs[index]["depth_sweep"] = sweep
    with pytest.raises(InputError) as err:
        parse_experiment(data, "exp.yaml")
    assert err.value.where == f"exp.yaml: configurations.{index}.depth_sweep"
    assert reason in err.value.reason


def test_bad_sweep_is_exit_2_on_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _doc()
    configs = data["configurations"]
    assert isinstance(configs, list)
    configs[0]["depth_sweep"] = [3, 3]
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit) as ex:
        main(["plan", str(path)])
    assert ex.value.code == 2
    assert "configurations.0.depth_sweep" in capsys.readouterr().err


def test_expansion_rewrites_each_engines_flags() -> None:
    exp = load_experiment(DEPTH)
    by = {c.name: c for c in exp.configurations}
    assert [n for n in by if n.startswith("vllm-dflash-")] == [
        f"vllm-dflash-k{k}" for k in range(2, 9)
    ]
    v7 = by["vllm-dflash-k7"]
    spec = json.loads(v7.args[v7.args.index("--speculative-config") + 1])
    assert (v7.spec_num_tokens, spec["num_speculative_tokens"], v7.depth_of) == (
        7,
        7,
        "vllm-dflash",
    )
    s3 = by["sglang-mtp-k3"].args
    assert s3[s3.index("--speculative-num-steps") + 1] == "3"
    assert s3[s3.index("--speculative-num-draft-tokens") + 1] == "4"
    d6 = by["sglang-dflash-k6"].args
    assert d6[d6.index("--speculative-num-draft-tokens") + 1] == "7"
    # the declared k keeps no depth deviation; every other point records one
    assert not [d for d in by["vllm-dflash-k4"].deviations if d.flag == "speculative tokens"]
    dev = [d for d in by["vllm-dflash-k7"].deviations if d.flag == "speculative tokens"]
    assert (dev[0].seed, dev[0].used) == ("4", "7")
    assert [c.name for c in exp.select(["sglang-mtp"])] == [f"sglang-mtp-k{k}" for k in (1, 2, 3)]


def test_depth_experiment_shares_the_seed_pins() -> None:
    seed, depth = yaml.safe_load(SEED.read_text()), yaml.safe_load(DEPTH.read_text())
    for key in ("images", "models", "served_model", "quantization", "tensor_parallel"):
        assert depth[key] == seed[key], key
    for key in ("prompt_tokens", "max_tokens", "warmup", "iterations"):
        assert depth["workload"][key] == seed["workload"][key], key


def test_emulator_at_another_depth() -> None:
    p = load_profile("vllm-dflash")  # k=4, acceptance 0.8 0.7 0.6 0.5, 1.2 ms per draft token
    deep = p.with_overrides(spec_tokens=6)
    assert deep.spec is not None and deep.spec.acceptance == pytest.approx(
        (0.8, 0.7, 0.6, 0.5, 0.45, 0.405)
    )
    assert deep.step_ms(1) == pytest.approx(26.19 + 2 * 1.2)
    shallow = p.with_overrides(spec_tokens=2)
    assert shallow.spec is not None and shallow.spec.acceptance == (0.8, 0.7)
    assert shallow.step_ms(1) == pytest.approx(26.19 - 2 * 1.2)


def test_expected_tokens_per_step_by_hand() -> None:
    # 100 drafts; 80 accepted at position 1, 56 at 2, 34 at 3: E = 1 + 0.8 + 0.56 + 0.34 = 2.70
    assert expected_tokens_per_step([80, 56, 34], 100) == pytest.approx(2.70)
    assert expected_tokens_per_step([], 100) is None
    assert expected_tokens_per_step([5], 0) is None


def _specs() -> list[Spec]:
    def s(k: int, decode: list[float], per_pos: tuple[int, ...]) -> Spec:
        return Spec(
            f"vllm-dflash-k{k}",
            "vllm",
            "DFLASH",
            decode,
            [70.0, 71.0, 72.0],
            spec_tokens=k,
            draft_model="d",
            simulated=False,
            acceptance=(100, 100 * k, sum(per_pos)),
            accepted_per_position=per_pos,
        )

    return [
        s(2, [90.0, 91.0, 89.0], (80, 56)),  # E 2.36 -> step 2.36/90 s = 26.22 ms
        s(3, [100.0, 101.0, 99.5], (80, 56, 34)),  # E 2.70 at 100.17 tok/s
        s(4, [100.5, 101.5, 100.0], (80, 56, 34, 17)),  # fastest mean, not significantly
    ]


def test_best_k_is_the_smallest_not_significantly_slower(tmp_path: Path) -> None:
    specs = _specs()
    art = write_artifacts(tmp_path / "art", specs, lock=depth_lock(specs))
    [sweep] = depth_sweeps(load_artifacts(art))
    assert [p.k for p in sweep.points] == [2, 3, 4]
    k2, k3, _ = sweep.points
    assert k2.p_vs_best is not None and k2.p_vs_best < ALPHA
    assert k3.p_vs_best is not None and k3.p_vs_best >= ALPHA
    assert (sweep.best_k, sweep.fastest_k, sweep.declared_k) == (3, 4, 4)
    assert best_k(sweep.points) == (3, 4)
    assert k3.tokens_per_step == pytest.approx(2.70)
    assert k2.step_ms == pytest.approx(1000 * 2.36 / 90.0)
    assert k3.per_position == pytest.approx((0.8, 0.56, 0.34))


def test_report_states_the_best_k(tmp_path: Path) -> None:
    specs = _specs()
    art = write_artifacts(tmp_path / "art", specs, lock=depth_lock(specs))
    text = render_report(art, tmp_path / "out").read_text()
    assert "## Speculative depth" in text and "### vLLM + DFlash, concurrency 1" in text
    assert "Best k: **3** (k=4 has the highest mean, but not significantly above k=3)." in text
    assert "The experiment declares k=4; this sweep points to k=3 on this host." in text
    assert (
        "recipe for Qwen3.8-27B DFlash2 (vllm-project/recipes) uses k=7, deeper than this "
        "sweep's best." in text
    )
    assert "| 3 | 100.17" in text and "| 0.80 / 0.56 / 0.34 | 2.70 | 26.96 |" in text
