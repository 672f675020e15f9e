"""Issue 48 against the pinned wheels: every key, value, environment variable, flag and log line
that bench/engines/_speculation.py and the emulator use to tell lossy, adaptive and synthetic
speculation apart, and to force a synthetic acceptance, exists in vLLM 0.33.0 and SGLang 0.5.19
as we use it; and vLLM's own minimum-variance schedule is ours."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from upstream_parsers import UpstreamParser, vllm_length_to_rates, vllm_speculative_fields

from bench.emulator import formats
from bench.engines import _speculation as sp
from bench.engines import get_engine, load_experiment, min_variance_rates, synthetic_knob
from bench.schema import EXPERIMENTS_DIR

pytestmark = pytest.mark.contract

SEED = load_experiment(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml")


def literal_args(path: Path, name: str) -> tuple[str, ...]:
    """The strings of ``name = Literal[...]`` at the top of a pinned module."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            assert isinstance(node.value, ast.Subscript)
            elts = node.value.slice.elts if isinstance(node.value.slice, ast.Tuple) else []
            return tuple(e.value for e in elts if isinstance(e, ast.Constant))
    raise AssertionError(f"{name} not found in {path}")


def line_of(path: Path, text: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, start=1) if text in line)


def test_vllm_speculative_keys_are_speculativeconfig_fields(vllm_src: Path) -> None:
    fields = vllm_speculative_fields(vllm_src)
    ours = {sp.VLLM_REJECTION_KEY, sp.VLLM_SYNTHETIC_RATES_KEY, sp.VLLM_SYNTHETIC_LENGTH_KEY,
            sp.VLLM_PER_BATCH_K_KEY, sp.VLLM_ADAPTIVE_VERIFY_KEY}  # fmt: skip
    assert ours <= fields, sorted(ours - fields)
    assert "synthetic_acceptance_rate" not in fields  # the older docs' spelling is gone


def test_vllm_rejection_methods_and_the_lossy_one(vllm_src: Path) -> None:
    spec_py = vllm_src / "vllm" / "config" / "speculative.py"
    assert set(literal_args(spec_py, "RejectionSampleMethod")) == sp.VLLM_REJECTION_METHODS
    # FLy's warning, where the emulator says vLLM logs it
    assert sp.VLLM_FLY_WARNING in formats.VLLM_FLY[1]
    warn = line_of(spec_py, "FLy verification is a lossy")
    assert formats.VLLM_FLY[0] == f"speculative.py:{warn - 1}"  # logger.warning_once( is above
    text = spec_py.read_text(encoding="utf-8")
    assert '"FLy verification is a lossy speculative decoding method and "' in text
    assert '"may degrade model outputs."' in text
    assert {"fly"} == sp.VLLM_LOSSY_METHODS  # the docstring's only lossy method (:566-569)
    assert "'fly' applies FLy's lossy" in text


def test_vllm_logs_its_non_default_args(vllm_src: Path) -> None:
    startup = vllm_src / "vllm" / "entrypoints" / "common" / "startup.py"
    n = line_of(startup, 'logger.info("non-default args: %s"')
    assert (f"startup.py:{n}", "non-default args: %s") == formats.VLLM_NON_DEFAULT_ARGS
    assert sp.VLLM_ARGS_LINE.search("x non-default args: {'a': 1}") is not None


def test_vllm_cpu_sampling_refuses_synthetic_acceptance(vllm_src: Path) -> None:
    """No CPU build runs a control: its rejection kernels assert (README: which versions)."""
    cpu = (vllm_src / "vllm" / "utils" / "cpu_triton_utils.py").read_text(encoding="utf-8")
    assert cpu.count(f'assert not SYNTHETIC_MODE, "{sp.VLLM_CPU_SYNTHETIC_REFUSAL}"') == 2


@pytest.mark.parametrize("length", [1.0, 1.37, 2.0, 2.5, 3.999, 4.0, 5.0])
def test_our_schedule_is_vllms(vllm_src: Path, length: float) -> None:
    for k in (1, 2, 4):
        if length <= k + 1:
            (theirs,) = vllm_length_to_rates(vllm_src, [(length, k)])
            assert min_variance_rates(length, k) == pytest.approx(theirs), (length, k)


def test_the_vllm_control_argv_parses(vllm_cli: UpstreamParser, vllm_src: Path) -> None:
    cfg = SEED.configuration("vllm-dflash")
    knob = synthetic_knob(cfg, 2.6, [0.8, 0.5, 0.2, 0.1])
    argv = get_engine("vllm").server_argv(cfg.model_copy(update={"args": knob.args}), SEED)
    ns = vllm_cli.parse(argv[2:])
    assert ns.speculative_config["rejection_sample_method"] == "synthetic"
    assert set(ns.speculative_config) <= vllm_speculative_fields(vllm_src)
    assert json.loads(knob.knob.split(" ", 1)[1]) == ns.speculative_config


def test_sglang_simulated_acceptance_environment(sglang_src: Path) -> None:
    environ = (sglang_src / "sglang" / "srt" / "environ.py").read_text(encoding="utf-8")
    assert f"{sp.SGLANG_SIMULATE_LEN_ENV} = EnvFloat(-1)" in environ
    assert f'{sp.SGLANG_SIMULATE_METHOD_ENV} = EnvStr("{sp.SGLANG_SIMULATE_METHOD}")' in environ
    assert (f'{sp.SGLANG_SIMULATE_TOKEN_MODE_ENV} = EnvStr("{sp.SGLANG_SIMULATE_TOKEN_MODE}")'
            in environ)  # fmt: skip
    utils = (sglang_src / "sglang" / "srt" / "speculative" / "spec_utils.py").read_text()
    # the length counts the bonus token: a step accepts length - 1 drafts
    assert "num_correct_drafts.fill_(simulate_acc_len - 1)" in utils
    assert 'simulate_acc_method == "match-expected"' in utils


def test_sglang_adaptive_flag_parses_and_is_a_server_arg(sglang_cli: UpstreamParser) -> None:
    cfg = SEED.configuration("sglang-mtp")
    argv = get_engine("sglang").server_argv(cfg, SEED)
    ns = sglang_cli.parse([*argv[3:], sp.SGLANG_ADAPTIVE_FLAG])
    assert ns.speculative_adaptive is True
    assert sglang_cli.parse(argv[3:]).speculative_adaptive is False


def test_sglang_logs_its_resolved_server_args(sglang_src: Path) -> None:
    engine_py = (sglang_src / "sglang" / "srt" / "entrypoints" / "engine.py").read_text()
    assert 'logger.info(f"server_args={server_args.resolved_dict()}")' in engine_py
