"""Engine name -> adapter."""

from __future__ import annotations

from bench.core import ENGINE_NAMES, InputError
from bench.engines._base import Engine
from bench.engines._sglang import SGLang
from bench.engines._vllm import VLLM


def engine_names() -> list[str]:
    return list(ENGINE_NAMES)


def get_engine(name: str) -> Engine:
    """The adapter for ``name`` ('vllm' or 'sglang')."""
    if name == "vllm":
        return VLLM()
    if name == "sglang":
        return SGLang()
    raise InputError("engine", f"unknown engine {name!r} (known: {', '.join(engine_names())})")
