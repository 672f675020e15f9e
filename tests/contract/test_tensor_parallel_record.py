"""The tensor-parallel size a payload records is the engine's own (issue 24: "as read from the
engine, not from the flag"): each engine's start-up record, rendered from the pinned source with
a sample size of 2, is read back as 2 by the adapter; the real recordings (vLLM 0.32.0 CPU and
0.26.0 GPU, both at 1) are read as 1; the emulator writes the record upstream's way.

vLLM: v1/engine/core.py:139-143 logs "Initializing a V1 LLM engine (v%s) with config: %s" with
the VllmConfig, whose ``__str__`` (config/vllm.py) is evaluated here from the pinned source on a
stand-in config. SGLang: entrypoints/engine.py:1098 logs ``server_args=`` and the resolved
ServerArgs as a dict.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path
from typing import Any

from test_log_renders import render, sglang_record, vllm_records

from bench.emulator import serve_in_thread
from bench.engines import get_engine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VLLM_CONFIG_RECORD = "vllm/v1/engine/core.py:140"
SGLANG_ARGS_RECORD = "sglang/srt/entrypoints/engine.py:1098"


class StandIn:
    """Any attribute chain of a config object; the named ones carry the given values."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> StandIn:
        return StandIn()

    def __repr__(self) -> str:
        return "X"

    def __format__(self, spec: str) -> str:
        return "X"


def vllm_config_str(root: Path, tensor_parallel: int) -> str:
    """VllmConfig.__str__ of the pinned source, on a stand-in config."""
    tree = ast.parse((root / "vllm/config/vllm.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "VllmConfig")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__str__")
    ret = next(n for n in ast.walk(fn) if isinstance(n, ast.Return))
    assert ret.value is not None
    this = StandIn(parallel_config=StandIn(tensor_parallel_size=tensor_parallel))
    text = eval(compile(ast.Expression(ret.value), "vllm.py", "eval"), {}, {"self": this})
    assert isinstance(text, str) and f"tensor_parallel_size={tensor_parallel}," in text
    return text


def test_vllm_reads_the_size_from_its_engine_config_record(vllm_src: Path) -> None:
    engine = get_engine("vllm")
    message = render(vllm_src, VLLM_CONFIG_RECORD, {}, ("0.33.0", vllm_config_str(vllm_src, 2)))
    for record in vllm_records(vllm_src, message, "core.py:140"):
        found = engine.tensor_parallel_from_log(f"earlier line\n{record}\nlater line\n")
        assert found is not None and found[0] == 2, record
        assert "tensor_parallel_size=2" in found[1]


def test_sglang_reads_the_size_from_its_server_args_record(sglang_src: Path) -> None:
    resolved = {"model_path": "/models/t", "tp_size": 2, "attn_tp_size": 7, "dp_size": 1}
    holder = StandIn(resolved_dict=lambda: resolved)
    message = render(sglang_src, SGLANG_ARGS_RECORD, {"server_args": holder})
    found = get_engine("sglang").tensor_parallel_from_log(sglang_record(sglang_src, message))
    assert found is not None and found[0] == 2


def test_the_real_recordings_are_read_as_one_rank() -> None:
    engine = get_engine("vllm")
    logs = [FIXTURES / "vllm-cpu" / "startup.log", *sorted((FIXTURES / "vllm-gpu/logs").glob("*"))]
    for log in logs:
        found = engine.tensor_parallel_from_log(log.read_text(errors="replace"))
        assert found is not None and found[0] == 1, log.name


def test_the_emulator_logs_the_ranks_it_was_told(vllm_src: Path) -> None:
    """Its record reads back as the experiment's size, and its vLLM record begins as upstream's
    (the same fields in the same order, up to where the emulator stops)."""
    upstream = vllm_config_str(vllm_src, 1)
    for name, profile in (("vllm", "vllm-dflash"), ("sglang", "sglang-mtp")):
        for size in (1, 2):
            log = io.StringIO()
            with serve_in_thread(
                name, profile, time_scale=0.01, echo=log, tensor_parallel=size
            ) as handle:
                assert handle.wait_ready(30)
            found = get_engine(name).tensor_parallel_from_log(log.getvalue())
            assert found is not None and found[0] == size, (name, size)
            if name == "vllm":
                line = next(x for x in log.getvalue().splitlines() if "with config: " in x)
                ours = line.split("with config: ", 1)[1].removesuffix("...").rstrip(", ")
                keys = [kv.split("=", 1)[0] for kv in ours.split(", ")]
                theirs = [kv.split("=", 1)[0] for kv in upstream.split(", ")][: len(keys)]
                assert keys == theirs
