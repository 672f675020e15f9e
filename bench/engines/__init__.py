"""Engine adapters: one module per engine. Each turns a configuration into the server argv and
the equivalent ``docker run`` line, and knows its health paths and load-log failure patterns.

``get_engine(name).server_argv(cfg, experiment)`` is pure and stable: contract tests feed it to
the pinned upstream argument parsers.
"""

from __future__ import annotations

from bench.engines.base import Engine, LogPattern, flag_value
from bench.errors import InputError

__all__ = ["Engine", "LogPattern", "engine_names", "flag_value", "get_engine"]


def engine_names() -> list[str]:
    return ["vllm", "sglang"]


def get_engine(name: str) -> Engine:
    """The adapter for ``name`` ('vllm' or 'sglang')."""
    if name == "vllm":
        from bench.engines.vllm import VLLM

        return VLLM()
    if name == "sglang":
        from bench.engines.sglang import SGLang

        return SGLang()
    raise InputError("engine", f"unknown engine {name!r} (known: {', '.join(engine_names())})")
