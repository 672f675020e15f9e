"""The pinned releases' own argument parsers and config classes, imported from the extracted
wheel sources with GPU-only modules stubbed (see stubs.py)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import types
from pathlib import Path
from typing import Any

from stubs import StubModule, upstream_import_env

# Third-party modules the pinned sources import at parser-definition time that are not (and
# need not be) installed here. Anything else missing is a real ImportError.
SGLANG_STUBS = (
    "torch", "torchvision", "torchcodec", "triton", "msgspec", "orjson", "json_repair",
    "partial_json_parser", "psutil", "pybase64", "openai", "starlette", "xgrammar", "zmq",
    "transformers", "sgl_kernel", "flashinfer", "fastapi", "uvicorn", "uvloop", "IPython",
    "PIL",  # pillow came with matplotlib, which the dev environment no longer has
)  # fmt: skip
VLLM_STUBS = (
    "torch", "torchaudio", "torchvision", "torchcodec", "triton", "transformers", "av",
    "cachetools", "cbor2", "cloudpickle", "cpuinfo", "cv2", "fastapi", "msgspec", "openai",
    "openai_harmony", "partial_json_parser", "psutil", "pybase64", "runai_model_streamer",
    "safetensors", "scipy", "snappy", "soundfile", "soxr", "uvloop", "xxhash", "zmq", "PIL",
)  # fmt: skip


class ParserRejected(Exception):
    """The upstream parser refused an argv (argparse exits 2 with a message)."""


def _sglang_root_package(root: Path) -> types.ModuleType:
    # sglang/__init__.py pulls the whole runtime (torch, FlashInfer); the parser needs none of it.
    pkg = types.ModuleType("sglang")
    pkg.__path__ = [str(root / "sglang")]
    return pkg


class UpstreamParser:
    """One pinned engine's CLI parser; ``parse`` raises ParserRejected like the real CLI."""

    def __init__(self, parser: argparse.ArgumentParser, stubbed: list[str]) -> None:
        self.parser = parser
        self.stubbed = stubbed

    def parse(self, argv: list[str]) -> argparse.Namespace:
        messages: list[str] = []

        def _error(message: str) -> Any:
            messages.append(message)
            raise ParserRejected(message)

        self.parser.error = _error  # type: ignore[method-assign]
        try:
            return self.parser.parse_args(argv)
        except SystemExit as err:  # an action that exits on its own
            raise ParserRejected(f"exit {err.code}: {messages}") from err


def sglang_parser(root: Path) -> UpstreamParser:
    """``prepare_server_args``' parser: argparse "sglang serve" + ServerArgs.add_cli_args."""
    with upstream_import_env(root, SGLANG_STUBS, {"sglang": _sglang_root_package(root)}) as f:
        server_args = importlib.import_module("sglang.srt.server_args")
        parser = argparse.ArgumentParser(prog="sglang serve")
        server_args.ServerArgs.add_cli_args(parser)
        return UpstreamParser(parser, list(f.stubbed))


def _vllm_presets() -> dict[str, types.ModuleType]:
    # regex is a drop-in for re here; the executor/IR packages register torch custom ops at
    # import (ParallelConfig imports them lazily only for an isinstance check).
    return {
        "regex": re,
        "vllm.v1.executor": StubModule("vllm.v1.executor"),
        "vllm.ir": StubModule("vllm.ir"),
    }


def vllm_parser(root: Path) -> UpstreamParser:
    """``vllm serve``'s parser: FlexibleArgumentParser + make_arg_parser (FrontendArgs +
    AsyncEngineArgs.add_cli_args), as cli/serve.py builds it."""
    saved = os.environ.get("VLLM_TARGET_DEVICE")
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"  # no GPU here; the parser is device-independent
    try:
        with upstream_import_env(root, VLLM_STUBS, _vllm_presets()) as f:
            cli_args = importlib.import_module("vllm.entrypoints.common.cli_args")
            argparse_utils = importlib.import_module("vllm.utils.argparse_utils")
            parser = argparse_utils.FlexibleArgumentParser(prog="vllm serve")
            parser = cli_args.make_arg_parser(parser)
            return UpstreamParser(parser, list(f.stubbed))
    finally:
        if saved is None:
            os.environ.pop("VLLM_TARGET_DEVICE", None)
        else:
            os.environ["VLLM_TARGET_DEVICE"] = saved


def vllm_speculative_fields(root: Path) -> set[str]:
    """Field names of pinned vLLM's SpeculativeConfig (the keys --speculative-config takes)."""
    saved = os.environ.get("VLLM_TARGET_DEVICE")
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"
    try:
        with upstream_import_env(root, VLLM_STUBS, _vllm_presets()):
            speculative = importlib.import_module("vllm.config.speculative")
            return {f.name for f in dataclasses.fields(speculative.SpeculativeConfig)}
    finally:
        if saved is None:
            os.environ.pop("VLLM_TARGET_DEVICE", None)
        else:
            os.environ["VLLM_TARGET_DEVICE"] = saved


def vllm_length_to_rates(root: Path, lengths: list[tuple[float, int]]) -> list[list[float]]:
    """Pinned vLLM's own ``SpeculativeConfig._acceptance_length_to_rates`` for each (mean
    acceptance length, k): the schedule its synthetic rejection sampler forces."""
    saved = os.environ.get("VLLM_TARGET_DEVICE")
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"
    try:
        with upstream_import_env(root, VLLM_STUBS, _vllm_presets()):
            speculative = importlib.import_module("vllm.config.speculative")
            fn = speculative.SpeculativeConfig._acceptance_length_to_rates
            return [list(fn(length, k)) for length, k in lengths]
    finally:
        if saved is None:
            os.environ.pop("VLLM_TARGET_DEVICE", None)
        else:
            os.environ["VLLM_TARGET_DEVICE"] = saved


# -- the patch ------------------------------------------------------------------------------

PATCH_FILE_RE = re.compile(r"^\+\+\+ b/(\S+)", re.MULTILINE)


def patched_files(patch: Path) -> list[str]:
    """Paths (relative to site-packages) a patch changes."""
    return PATCH_FILE_RE.findall(patch.read_text(encoding="utf-8"))


def apply_patches(
    patches: list[Path], pkg_root: Path, site: Path
) -> subprocess.CompletedProcess[str]:
    """Copy the files the patches touch from the pinned sources (``pkg_root`` holds
    ``sglang/``) into ``site`` and apply them there with ``patch -p1`` exactly as the
    Dockerfile does. Returns the last patch run (check ``returncode``)."""
    for patch in patches:
        for rel in patched_files(patch):
            dest = site / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                shutil.copyfile(pkg_root / rel, dest)
    proc = subprocess.CompletedProcess[str]([], 0, "", "")
    for patch in patches:
        proc = subprocess.run(
            [
                "patch",
                "-p1",
                "--fuzz=0",
                "--forward",
                "--batch",
                "--no-backup-if-mismatch",
                "-i",
                str(patch),
            ],
            cwd=site,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            return proc
    return proc


class _NoOverride:
    """A quantization method that never claims another checkpoint's config."""

    @staticmethod
    def override_quantization_method(*args: Any, **kwargs: Any) -> None:
        return None


def model_config_presets() -> dict[str, types.ModuleType]:
    """Stand-ins for model_config.py's sglang imports: all stubs except the quantization
    registry, which lists real method names."""
    quant = types.ModuleType("sglang.srt.layers.quantization")
    quant.QUANTIZATION_METHODS = {  # type: ignore[attr-defined]
        m: _NoOverride
        for m in ("gptq", "gptq_marlin", "awq", "awq_marlin", "fp8", "compressed-tensors")
    }
    sglang_mods = [
        "sglang", "sglang.srt", "sglang.srt.arg_groups.overrides",
        "sglang.srt.configs.embedding_model_spec", "sglang.srt.configs.linear_attn_model_registry",
        "sglang.srt.configs.dots3", "sglang.srt.environ", "sglang.srt.runtime_context",
        "sglang.srt.server_args", "sglang.srt.utils", "sglang.srt.utils.hf_transformers_utils",
        "sglang.srt.utils.runai_utils", "sglang.utils",
    ]  # fmt: skip
    presets: dict[str, types.ModuleType] = {m: StubModule(m) for m in sglang_mods}
    presets["sglang.srt.layers.quantization"] = quant
    return presets
