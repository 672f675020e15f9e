"""specbench probe of the whole flag path in one tree (patched or pristine): the experiment's own
SGLang MTP argv -> the release's parser -> ServerArgs.from_cli_args -> the serving hook that
resolves `--speculative-draft-model-quantization` -> ModelConfig.from_server_args(is_draft_model=
True) -> the draft remap and _verify_quantization. Only ModelConfig.__init__'s checkpoint
reading is replaced: the draft config gets the target's config.json (checkpoint_config), as the
MTP draft does on the GPU host."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from suite_support import QWEN35_MTP, checkpoint_config, server_args_chain

from bench.engines import get_engine, load_experiment
from bench.engines.upstream import DEFAULT_EXPERIMENT

FLAG = "--speculative-draft-model-quantization"
PROGRAM = ("python3", "-m", "sglang.launch_server")
# The CPU machine has no accelerator for get_device() to find; the GPU host resolves "cuda".
DEVICE = ["--device", "cuda"]


def mtp_argvs() -> dict[str, list[str]]:
    """CLI args of every experiment configuration that runs SGLang's MTP draft on the patched
    image (the draft reads the target checkpoint: no --speculative-draft-model-path)."""
    exp = load_experiment(DEFAULT_EXPERIMENT)
    found = {}
    for cfg in exp.configurations:
        if cfg.engine != "sglang" or cfg.method != "MTP" or cfg.image not in (None, "sglang"):
            continue
        argv = get_engine("sglang").server_argv(cfg, exp)
        assert tuple(argv[:3]) == PROGRAM, argv[:3]
        found[cfg.name] = argv[3:]
    assert found, "the experiment has no SGLang MTP configuration"
    return found


def without_flag(argv: list[str]) -> list[str]:
    i = argv.index(FLAG)
    return argv[:i] + argv[i + 2 :]


@pytest.fixture(scope="module")
def chain() -> Iterator[Any]:
    with server_args_chain() as mods:
        yield mods


def draft_quantization(chain: Any, argv: list[str]) -> tuple[str | None, bool, str | None]:
    """(quantization, is_draft_quantization_explicit) as from_server_args hands them to the
    draft's ModelConfig, and the quantization the draft resolves to."""
    parser = argparse.ArgumentParser(prog="sglang serve")
    chain.server_args.ServerArgs.add_cli_args(parser)
    server_args = chain.server_args.ServerArgs.from_cli_args(parser.parse_args(argv + DEVICE))
    chain.serving_hook.handle_missing_default_values(server_args)
    upstream_cls = chain.model_config.ModelConfig
    handed: dict[str, Any] = {}

    class DraftConfig(upstream_cls):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs: Any) -> None:  # what __init__ does up to quantization
            handed.update(kwargs)
            self.model_path = kwargs["model_path"]
            self.revision = kwargs["revision"]
            self.quantization = kwargs["quantization"]
            self.is_draft_model = kwargs["is_draft_model"]
            self.is_draft_quantization_explicit = kwargs["is_draft_quantization_explicit"]
            self.speculative_algorithm = kwargs["speculative_algorithm"]
            self.hf_config = checkpoint_config()
            self.hf_text_config = self.hf_config
            self._config_draft_model()
            self._verify_quantization()

    chain.model_config.ModelConfig = DraftConfig  # from_server_args builds the module's class
    try:
        draft = upstream_cls.from_server_args(server_args, is_draft_model=True)
    finally:
        chain.model_config.ModelConfig = upstream_cls
    assert draft.hf_config.architectures == [QWEN35_MTP]
    return handed["quantization"], handed["is_draft_quantization_explicit"], draft.quantization


Record = Callable[[str, object], None]


@pytest.mark.parametrize("name", sorted(mtp_argvs()))
def test_experiment_mtp_draft_resolves_unquantized(
    chain: Any, name: str, record_property: Record
) -> None:
    argv = mtp_argvs()[name]
    assert argv[argv.index(FLAG) + 1] == "unquant"
    record_property("targets_patch", True)
    handed, explicit, resolved = draft_quantization(chain, argv)
    assert (handed, explicit) == (None, True)  # the hook's reading of the flag
    assert resolved is None  # the draft is built with BF16 layers


@pytest.mark.parametrize("name", sorted(mtp_argvs()))
def test_same_argv_without_the_flag_inherits_gptq(chain: Any, name: str) -> None:
    handed, explicit, resolved = draft_quantization(chain, without_flag(mtp_argvs()[name]))
    assert (handed, explicit) == (None, False)
    assert resolved == "gptq"
