"""Every server argv the experiment produces is accepted by the pinned release's own parser,
and vLLM's --speculative-config keys are fields of pinned vLLM's SpeculativeConfig."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from upstream_parsers import ParserRejected, UpstreamParser, vllm_speculative_fields

from bench.engines import get_engine, load_experiment
from bench.schema import Experiment

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml"
# The depth sweep's points: flags rewritten per k by the engine adapters (depth_args).
DEPTH_EXPERIMENT = REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090-depth.yaml"

# The seed report's SGLang MTP command, verbatim (shared/seed-report.md, "Reproduction commands").
SEED_SGLANG_MTP = [
    "--model-path", "/models/Qwen3.8-27B-GPTQ-4bit", "--tp-size", "2", "--context-length", "8192",
    "--mem-fraction-static", "0.87", "--max-running-requests", "4", "--disable-custom-all-reduce",
    "--attention-backend", "fa3", "--cuda-graph-backend-prefill", "disabled",
    "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
    "--speculative-draft-model-quantization", "unquant",
    "--mamba-scheduler-strategy", "extra_buffer",
]  # fmt: skip
# The program part of each engine's argv (server_argv starts with it).
PROGRAMS = {"sglang": ("python3", "-m", "sglang.launch_server"), "vllm": ("vllm", "serve")}


@pytest.fixture(scope="module")
def experiment() -> Experiment:
    return load_experiment(EXPERIMENT)


def cli_args(engine: str, argv: list[str]) -> list[str]:
    program = PROGRAMS[engine]
    assert tuple(argv[: len(program)]) == program, f"{engine} argv starts {argv[:3]}"
    return argv[len(program) :]


def argvs(experiment: Experiment, engine: str) -> list[tuple[str, list[str]]]:
    return [
        (cfg.name, cli_args(engine, get_engine(engine).server_argv(cfg, experiment)))
        for cfg in experiment.configurations
        if cfg.engine == engine
    ]


def parser_for(engine: str, request: pytest.FixtureRequest) -> UpstreamParser:
    cli: UpstreamParser = request.getfixturevalue(f"{engine}_cli")
    return cli


@pytest.mark.parametrize("path", [EXPERIMENT, DEPTH_EXPERIMENT], ids=lambda p: p.stem)
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_every_experiment_argv_parses(
    engine: str, path: Path, request: pytest.FixtureRequest
) -> None:
    cli = parser_for(engine, request)
    experiment = load_experiment(path)
    found = argvs(experiment, engine)
    assert found, f"no {engine} configuration in the experiment"
    if path == DEPTH_EXPERIMENT:  # the rewritten points are there, not only the originals
        assert any(c.depth_of for c in experiment.configurations if c.engine == engine)
    for name, args in found:
        try:
            cli.parse(args)
        except ParserRejected as err:
            pytest.fail(f"{name}: pinned {engine} parser rejects {args}: {err}")


def test_sglang_seed_command_parses_verbatim(sglang_cli: UpstreamParser) -> None:
    ns = sglang_cli.parse(SEED_SGLANG_MTP)
    assert ns.speculative_draft_model_quantization == "unquant"
    assert ns.mamba_radix_cache_strategy == "extra_buffer"  # the deprecated alias's target
    assert (ns.tp_size, ns.speculative_num_draft_tokens) == (2, 3)


def test_vllm_values_reach_the_parser(vllm_cli: UpstreamParser, experiment: Experiment) -> None:
    cfg = experiment.configuration("vllm-mtp")
    ns = vllm_cli.parse(cli_args("vllm", get_engine("vllm").server_argv(cfg, experiment)))
    assert ns.model_tag == experiment.target.path
    assert ns.tensor_parallel_size == 2
    assert ns.speculative_config == {"method": "qwen3_next_mtp", "num_speculative_tokens": 2}


@pytest.mark.parametrize(
    ("engine", "good", "bad"),
    [
        ("sglang", "--mamba-scheduler-strategy", "--mamba-scheduler-strategie"),
        ("sglang", "--speculative-draft-model-quantization", "--speculative-draft-quantization"),
        ("vllm", "--max-num-seqs", "--max-num-seqz"),  # (a bare prefix would parse: allow_abbrev)
        ("vllm", "--gpu-memory-utilization", "--gpu-mem-utilization"),
    ],
)
def test_misspelt_flag_is_rejected(
    engine: str, good: str, bad: str, experiment: Experiment, request: pytest.FixtureRequest
) -> None:
    """The suite fails when a flag is misspelt: the same argv with one flag renamed is refused."""
    cli = parser_for(engine, request)
    args = next(a for _, a in argvs(experiment, engine) if good in a)
    wrong = [bad if a == good else a for a in args]
    with pytest.raises(ParserRejected):
        cli.parse(wrong)


def test_sglang_rejects_a_bad_choice(sglang_cli: UpstreamParser) -> None:
    bad = [
        "unquantized" if a == "unquant" else a for a in SEED_SGLANG_MTP
    ]  # not a QUANTIZATION_CHOICES value
    with pytest.raises(ParserRejected):
        sglang_cli.parse(bad)


# -- --speculative-config keys -----------------------------------------------------------------


@pytest.fixture(scope="module")
def spec_fields(vllm_src: Path) -> set[str]:
    return vllm_speculative_fields(vllm_src)


def speculative_configs(experiment: Experiment) -> list[tuple[str, dict[str, object]]]:
    out = []
    for name, args in argvs(experiment, "vllm"):
        if "--speculative-config" in args:
            out.append((name, json.loads(args[args.index("--speculative-config") + 1])))
    return out


def test_speculative_config_keys_are_speculativeconfig_fields(
    experiment: Experiment, spec_fields: set[str]
) -> None:
    configs = speculative_configs(experiment)
    assert configs, "no vLLM configuration passes --speculative-config"
    for name, spec in configs:
        unknown = sorted(set(spec) - spec_fields)
        assert not unknown, f"{name}: keys {unknown} are not SpeculativeConfig fields"


def test_misspelt_speculative_key_is_caught(spec_fields: set[str]) -> None:
    assert {"method", "model", "num_speculative_tokens"} <= spec_fields
    assert "num_speculative_token" not in spec_fields
