"""why_not_ready on made-up logs: each explanation appears only with its evidence (the GPU logs
that showed them are held in tests/contract/test_sglang_gpu_recordings.py)."""

from __future__ import annotations

import pytest

from bench.engines import get_engine
from bench.measure import why_not_ready

pytestmark = pytest.mark.unit

SGLANG = get_engine("sglang")
UP = "[2026-12-06 05:42:13] INFO:     Uvicorn running on http://127.0.0.1:35501 (Press CTRL+C)"
READY = "[2026-12-06 05:42:20] The server is fired up and ready to roll!"
BEGIN = "[t] Capture target verify CUDA graph begin. backend=full, bs=[1, 2, 4]"
END = "[t] Capture target verify CUDA graph end. elapsed=3.1 s"
SKIP = "[t] Parameter model.layers.0.q_proj.weight not found in params_dict, skip loading"


def why(*lines: str, speculative: bool = True) -> list[str]:
    return why_not_ready(
        "\n".join(lines), SGLANG.load_patterns, SGLANG.graph_patterns,
        speculative=speculative, warmup=SGLANG.warmup_patterns,
    )  # fmt: skip


def codes(found: list[str]) -> list[str]:
    return [w.split(":", 1)[0] for w in found]


def test_a_warm_up_that_never_answered_is_named_with_the_line_that_started_it() -> None:
    found = why("[t] Load weight end.", UP)
    assert codes(found) == ["warmup_never_answered"]
    assert repr(UP) in found[0] and "--ready-timeout" in found[0]


def test_a_warm_up_that_answered_or_never_began_explains_nothing() -> None:
    assert why("[t] Load weight end.", UP, READY) == []
    assert why("[t] Load weight end.") == []  # still loading: the HTTP side never started
    # the same log without the engine's warm-up patterns says nothing of a warm-up
    assert why_not_ready(UP, SGLANG.load_patterns, None, speculative=True) == []


def test_each_explanation_with_its_own_evidence() -> None:
    skipped, hung = why(SKIP, SKIP.replace("q_proj", "k_proj"), SKIP, BEGIN)
    assert skipped.endswith(
        "2 distinct (model.layers.0.q_proj.weight, model.layers.0.k_proj.weight)"
    )  # each tensor once, named
    assert hung.startswith("cuda_graph_capture_hung:") and repr(BEGIN) in hung
    assert codes(why(SKIP, BEGIN, END, UP)) == ["draft_tensors_skipped", "warmup_never_answered"]
    assert why(BEGIN, END, UP, READY) == []
    # a skipped tensor is named without speculation too (the rule is not speculative-only)
    assert codes(why(SKIP, BEGIN, END, UP, READY, speculative=False)) == ["draft_tensors_skipped"]
