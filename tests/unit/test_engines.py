"""Engine adapters: argv from a configuration, the docker run line, log patterns."""

from __future__ import annotations

import json
import shlex

import pytest

from bench.commands.run import EngineChoice
from bench.core import ENGINE_NAMES, InputError
from bench.engines import flag_value, get_engine, load_experiment, plan_entries
from bench.schema import EXPERIMENTS_DIR

EXP = load_experiment(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml")


def test_vllm_argv_is_program_model_seed_flags_plumbing() -> None:
    cfg = EXP.configuration("vllm-mtp")
    argv = get_engine("vllm").server_argv(cfg, EXP)
    assert argv[:3] == ["vllm", "serve", "/models/Qwen3.8-27B-GPTQ-4bit"]
    assert argv[3 : 3 + len(cfg.args)] == cfg.args
    assert flag_value(argv, "--served-model-name") == EXP.served_model


def test_sglang_dflash_block_is_tokens_plus_one() -> None:
    cfg = EXP.configuration("sglang-dflash")
    argv = get_engine("sglang").server_argv(cfg, EXP)
    assert flag_value(argv, "--speculative-num-draft-tokens") == "5"
    assert flag_value(argv, "--speculative-draft-model-path") == "/models/Qwen3.8-27B-DFlash2"
    assert "--enable-metrics" in argv


def test_vllm_dflash_config_names_the_draft_path() -> None:
    argv = get_engine("vllm").server_argv(EXP.configuration("vllm-dflash"), EXP)
    spec = json.loads(flag_value(argv, "--speculative-config") or "{}")
    assert spec == {
        "method": "dflash",
        "model": "/models/Qwen3.8-27B-DFlash2",
        "num_speculative_tokens": 4,
    }


def test_server_argv_is_pure() -> None:
    cfg = EXP.configuration("sglang-mtp")
    eng = get_engine("sglang")
    assert eng.server_argv(cfg, EXP) == eng.server_argv(cfg, EXP)


def test_docker_run_line_binds_loopback_and_never_carries_a_token_value() -> None:
    for entry in plan_entries(EXP):
        words = shlex.split(entry.docker_run)
        p = words[words.index("-p") + 1]
        assert p.startswith("127.0.0.1:"), p
        assert words[words.index("-e") + 1] == "HF_TOKEN"
        assert "--ipc=host" in words
        # The server argv follows the image unchanged.
        assert shlex.join(words[-(len(entry.argv) - 1) :]) == shlex.join(entry.argv[1:])


def test_sglang_skipped_tensor_pattern_matches_the_loader_warning() -> None:
    eng = get_engine("sglang")
    line = (
        "[2026-12-02 10:00:00 TP0] Parameter model.layers.0.q_proj.weight "
        "not found in params_dict, skip loading"
    )
    hits = [p.code for p in eng.load_patterns if p.search(line)]
    assert hits == ["draft_tensors_skipped"]


def test_unknown_engine_is_input_error() -> None:
    with pytest.raises(InputError):
        get_engine("tgi")


def test_vllm_version_from_startup_line() -> None:
    eng = get_engine("vllm")
    assert eng.version_from_log("INFO vLLM server version 0.33.0, serving model x") == "0.33.0"


# vllm/entrypoints/common/startup.py:19-38 as vLLM 0.33.0 logs it without VLLM_DISABLE_LOG_LOGO:
# monochrome (docker logs, no tty) and coloured ("\x1b[1m" bold, "\x1b[0m" reset)
LOGO_MONO = (
    "(APIServer pid=1) INFO 12-03 10:00:00 [startup.py:38] "
    " ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.33.0"
)
LOGO_COLOR = (
    "(APIServer pid=1) INFO 12-03 10:00:00 [startup.py:38] "
    " \x1b[93m▄▄\x1b[0m \x1b[94m▄█\x1b[0m \x1b[1m█     █     █ ▀▄▀ █\x1b[0m  version "
    "\x1b[1m0.33.0\x1b[0m"
)


@pytest.mark.parametrize("line", [LOGO_MONO, LOGO_COLOR])
def test_vllm_version_from_the_ascii_logo(line: str) -> None:
    assert get_engine("vllm").version_from_log(line) == "0.33.0"


def test_cli_engine_choices_are_the_engine_names() -> None:
    assert [e.value for e in EngineChoice] == list(ENGINE_NAMES)


@pytest.mark.parametrize("algo", ["MTP", "mtp", "nextn", "EAGLE4"])
def test_sglang_rejects_an_algorithm_the_pinned_release_does_not_know(algo: str) -> None:
    """SGLang 0.5.19 stops at start on these (spec_info.py from_string: "Unknown speculative
    algorithm name"; NEXTN is an alias only in capitals, speculative_hook.py:69)."""
    cfg = EXP.configuration("sglang-mtp")
    args = list(cfg.args)
    args[args.index("--speculative-algorithm") + 1] = algo
    problems = get_engine("sglang").check(cfg.model_copy(update={"args": args}), EXP)
    assert any(f"--speculative-algorithm {algo!r} is not an algorithm" in p for p in problems)


@pytest.mark.parametrize("algo", ["NEXTN", "EAGLE"])
def test_sglang_accepts_the_mtp_spellings_of_the_pinned_release(algo: str) -> None:
    cfg = EXP.configuration("sglang-mtp")
    args = list(cfg.args)
    args[args.index("--speculative-algorithm") + 1] = algo
    assert get_engine("sglang").check(cfg.model_copy(update={"args": args}), EXP) == []


TINY = load_experiment(EXPERIMENTS_DIR / "tiny-vllm-cpu.yaml")


def _with_spec(exp: object, name: str, spec: dict[str, object]) -> object:
    cfg = exp.configuration(name)  # type: ignore[attr-defined]
    args = list(cfg.args)
    args[args.index("--speculative-config") + 1] = json.dumps(spec)
    return cfg.model_copy(update={"args": args})


@pytest.mark.parametrize(
    ("exp", "name", "spec", "problems"),
    [
        (EXP, "vllm-dflash", {"method": "dflash", "model": "/models/Qwen3.8-27B-DFlash2",
                              "num_speculative_tokens": 4}, []),
        (EXP, "vllm-dflash", {"method": "draft_model", "model": "/models/other",
                              "num_speculative_tokens": 4},
         ["--speculative-config method 'draft_model' is not 'dflash'",
          "--speculative-config model '/models/other' != /models/Qwen3.8-27B-DFlash2"]),
        (EXP, "vllm-mtp", {"method": "qwen3_next_mtp", "num_speculative_tokens": 2}, []),
        (EXP, "vllm-mtp", {"method": "ngram", "num_speculative_tokens": 2},
         ["--speculative-config method 'ngram' is not 'deepseek_mtp' or 'mtp' or "
          "'qwen3_5_mtp' or 'qwen3_next_mtp'"]),
        (TINY, "partial-draft", {"method": "draft_model", "model": "/models/target",
                                 "num_speculative_tokens": 3},
         ["--speculative-config model '/models/target' != /models/draft"]),
        (TINY, "ngram", {"method": "ngram", "num_speculative_tokens": 3}, []),
    ],
)  # fmt: skip
def test_vllm_speculative_config_method_and_draft_path(
    exp: object, name: str, spec: dict[str, object], problems: list[str]
) -> None:
    cfg = _with_spec(exp, name, spec)
    assert get_engine("vllm").spec_problems(cfg, exp) == problems  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("engine", "args", "eager"),
    [
        ("vllm", ["--enforce-eager"], True),
        ("vllm", ["--max-num-seqs", "4"], False),
        ("sglang", ["--disable-cuda-graph"], True),
        ("sglang", ["--cuda-graph-backend-decode", "disabled"], True),
        ("sglang", ["--cuda-graph-backend-decode=disabled"], True),
        ("sglang", ["--cuda-graph-backend-decode", "full"], False),
        # prefill graphs off (the seed's flag) leaves decode graphs on
        ("sglang", ["--cuda-graph-backend-prefill", "disabled"], False),
    ],
)
def test_the_emulator_runs_eager_when_the_configuration_does(
    engine: str, args: list[str], eager: bool
) -> None:
    cfg = EXP.configuration(f"{engine}-baseline").model_copy(update={"args": args})
    argv = get_engine(engine).emulator_argv(cfg, host="127.0.0.1", port=1)
    assert ("--eager" in argv) is eager
