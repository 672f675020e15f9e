"""The draft-quantization patch against the pinned SGLang wheel: it applies, compiles, and the
patched upstream ModelConfig resolves an explicit `unquant` Qwen3.5 MTP draft to no
quantization while everything without the flag keeps GPTQ."""

from __future__ import annotations

import py_compile
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import PATCHES
from upstream_parsers import apply_patches, model_config_env, patched_files

MODEL_CONFIG = "sglang/srt/configs/model_config.py"
GPTQ_4BIT = {
    "quant_method": "gptq",
    "bits": 4,
    "group_size": 32,
    "sym": True,
    "desc_act": False,
}


def test_patches_exist_and_target_the_pinned_package() -> None:
    assert PATCHES, "docker/sglang/patches/*.patch is empty"
    for patch in PATCHES:
        files = patched_files(patch)
        assert files, f"{patch.name}: no '+++ b/...' file header"
        assert all(f.startswith("sglang/") for f in files), files


def test_patches_apply_and_compile(sglang_src: Path, tmp_path: Path) -> None:
    proc = apply_patches(PATCHES, sglang_src, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for patch in PATCHES:
        for rel in patched_files(patch):
            py_compile.compile(str(tmp_path / rel), doraise=True)
    assert (tmp_path / MODEL_CONFIG).read_bytes() != (sglang_src / MODEL_CONFIG).read_bytes()


def test_corrupted_patch_fails_to_apply(sglang_src: Path, tmp_path: Path) -> None:
    """A context line that no longer matches the pinned file must fail the apply step."""
    text = PATCHES[0].read_text(encoding="utf-8")
    context = next(
        line for line in text.splitlines() if line.startswith(" ") and len(line.strip()) > 20
    )
    bad = tmp_path / "corrupt.patch"
    bad.write_text(text.replace(context, context + "  # drifted upstream", 1), encoding="utf-8")
    proc = apply_patches([bad], sglang_src, tmp_path / "site")
    assert proc.returncode != 0


def test_patch_does_not_apply_twice(sglang_src: Path, tmp_path: Path) -> None:
    assert apply_patches(PATCHES, sglang_src, tmp_path).returncode == 0
    assert apply_patches(PATCHES, sglang_src, tmp_path).returncode != 0


# -- regression: the patched upstream function itself ---------------------------------------


@pytest.fixture
def patched(sglang_src: Path, tmp_path: Path) -> Iterator[Any]:
    assert apply_patches(PATCHES, sglang_src, tmp_path).returncode == 0
    with model_config_env(tmp_path / MODEL_CONFIG, "specbench_patched_model_config") as module:
        yield module


@pytest.fixture
def pristine(sglang_src: Path, tmp_path: Path) -> Iterator[Any]:
    copy = tmp_path / "model_config.py"
    shutil.copyfile(sglang_src / MODEL_CONFIG, copy)
    with model_config_env(copy, "specbench_pristine_model_config") as module:
        yield module


def resolve(
    module: Any, *, draft: bool, quantization: str | None, explicit: bool, arch: str
) -> tuple[str | None, str | None]:
    """Run upstream's draft remap + _verify_quantization on a Qwen3.5 GPTQ checkpoint config
    the way ModelConfig.__init__ does; return (resolved quantization, load-log quant string)."""
    cfg = module.ModelConfig.__new__(module.ModelConfig)
    cfg.model_path = "/models/Qwen3.8-27B-GPTQ-4bit"
    cfg.revision = None
    cfg.quantization = quantization
    cfg.is_draft_model = draft
    cfg.is_draft_quantization_explicit = explicit
    cfg.speculative_algorithm = "EAGLE"
    cfg.hf_config = SimpleNamespace(architectures=[arch], quantization_config=dict(GPTQ_4BIT))
    cfg.hf_text_config = SimpleNamespace()
    cfg._config_draft_model()
    cfg._verify_quantization()
    return cfg.quantization, cfg.get_quantization_config_log_str()


# What serving_hook._handle_missing_default_values hands ModelConfig for the draft:
# `--speculative-draft-model-quantization unquant` -> (None, explicit=True);
# no flag and no --quantization -> (None, explicit=False).
UNQUANT = {"quantization": None, "explicit": True}
NO_FLAG = {"quantization": None, "explicit": False}
QWEN35 = "Qwen3_5ForConditionalGeneration"


def test_explicit_unquant_mtp_draft_resolves_to_no_quantization(patched: Any) -> None:
    quant, log = resolve(patched, draft=True, arch=QWEN35, **UNQUANT)  # type: ignore[arg-type]
    assert quant is None
    assert log is None  # the draft's "Load weight end." line loses "quant=gptq, bits=4"


def test_mtp_draft_without_the_flag_stays_gptq(patched: Any) -> None:
    quant, log = resolve(patched, draft=True, arch=QWEN35, **NO_FLAG)  # type: ignore[arg-type]
    assert quant == "gptq"
    assert log == "quant=gptq, bits=4"


def test_target_model_stays_gptq(patched: Any) -> None:
    quant, _ = resolve(patched, draft=False, arch=QWEN35, quantization=None, explicit=False)
    assert quant == "gptq"


def test_other_architectures_are_unchanged(patched: Any) -> None:
    # A non-Qwen3.5 draft with the flag keeps upstream behaviour (auto-detected GPTQ).
    quant, _ = resolve(patched, draft=True, arch="Qwen3NextForCausalLM", **UNQUANT)  # type: ignore[arg-type]
    assert quant == "gptq"


def test_pristine_release_has_the_bug(pristine: Any) -> None:
    """Without the patch the explicit opt-out is lost: the seed's broken first MTP run."""
    quant, log = resolve(pristine, draft=True, arch=QWEN35, **UNQUANT)  # type: ignore[arg-type]
    assert quant == "gptq"
    assert log == "quant=gptq, bits=4"
