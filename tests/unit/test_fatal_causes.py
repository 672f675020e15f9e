# ruff: noqa: E501  (log lines quoted whole, as the engines wrote them)
"""What ended a server, named from its log (bench/matrix/_fatal.py), on lines of real GPU logs
(H100, 2026-12-07: vLLM 0.26.0 without flashinfer, SGLang 0.5.17's DFLASH on the text-only
Qwen3.5 class; tests/fixtures/gpu-runs/tiny-fourway-gpu-20261207-a.tar.xz holds them whole)."""

from __future__ import annotations

import pytest

from bench.engines._fatal import known_causes

pytestmark = pytest.mark.unit

VLLM = """\
(EngineCore pid=1013) ERROR 12-07 00:21:32 [core.py:1330] Traceback (most recent call last):
(EngineCore pid=1013) ERROR 12-07 00:21:32 [core.py:1330]     from flashinfer.gdn_prefill import (
(EngineCore pid=1013) ERROR 12-07 00:21:32 [core.py:1330] ModuleNotFoundError: No module named 'flashinfer'
(APIServer pid=813)     raise RuntimeError(
(APIServer pid=813) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""

SGLANG = """\
[2026-12-07 00:30:06] Ignore import error when loading sglang.srt.models.inkling: No module named 'helion'
[2026-12-07 00:30:07] Scheduler hit an exception: Traceback (most recent call last):
    raise ValueError(
ValueError: Model Qwen3_5ForCausalLM implements neither set_dspark_layers_to_capture nor set_dflash_layers_to_capture, one of which is required for DFLASH/DSPARK.

[2026-12-07 00:30:07] Received sigquit from a child process. It usually means the child failed.
[2026-12-07 00:30:07] kill_process_tree called: parent_pid=2981, include_parent=True, pid=2981
"""


def test_the_root_exception_is_named_not_its_wrapper() -> None:
    causes = known_causes("vllm-mtp: server exited (code 1) before it was ready", VLLM)
    assert causes == [
        "the server raised, first in its log: \"ModuleNotFoundError: No module named 'flashinfer'\""
    ]


def test_sglang_killing_its_own_tree_is_not_called_the_oom_killer() -> None:
    causes = known_causes("sglang-dflash: server exited (code -9) before it was ready", SGLANG)
    assert causes[0].startswith("the server raised, first in its log: 'ValueError: Model Qwen3_5")
    assert "killed its own processes" in causes[1] and "not the out-of-memory killer" in causes[1]
    assert not any("is what the kernel's out-of-memory killer sends" in c for c in causes)


def test_a_sigkill_without_the_launchers_word_still_points_at_the_oom_killer() -> None:
    causes = known_causes("x: server exited (code 137) before it was ready", "Loading weights\n")
    assert len(causes) == 1 and "out-of-memory killer sends" in causes[0]


def test_a_known_cause_is_quoted_and_no_exception_line_is_added_beside_it() -> None:
    log = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    causes = known_causes("x: server exited (code 1)", log)
    assert len(causes) == 1 and causes[0].startswith("the server log names the cause: cuda_out")


def test_a_clean_log_names_nothing() -> None:
    assert known_causes("x: server exited (code 1)", "INFO ready\nINFO shutting down\n") == []
