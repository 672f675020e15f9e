"""The CUDA graph and acceptance-length log patterns (bench/engines/_sglang.py, _vllm.py) and the
emulator lines they are tested on exist in the pinned sources at the lines the adapters cite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.emulator import formats
from bench.engines import LogPattern, get_engine

# (engine, literal pieces that must appear within NEAR lines of the pattern's cited file:line)
NEAR = 3
ANCHORS: dict[tuple[str, str], tuple[str, ...]] = {
    ("sglang", "cuda_graph_captured"): ('f"Capture {capture_name} {graph_backend', '} end. "'),
    ("sglang", "cuda_graph_use"): ('f"{self._graph_backend_label}: {can_run_cuda_graph}, "',),
    ("sglang", "accept_length"): ('msg += f"accept len: {spec_accept_length:.2f}, ',),
    ("vllm", "cuda_graph_captured"): ('"Graph capturing finished in %.0f secs, took %.2f GiB"',),
    ("vllm", "cuda_graph_disabled"): (
        '"Cudagraph is disabled under eager mode"',
        '"Skipping encoder and decoder CUDA graph capture. To enable "',
        '"Skipping CUDA graph capture. To turn on CUDA graph capture, "',
    ),
    ("vllm", "cuda_graph_use"): ('data_rows.append("| " + " | ".join(formatted_row) + " |")',),
    ("vllm", "accept_length"): ('"SpecDecoding metrics: "', '"Mean acceptance length: %.2f, "'),
}
# Facts elsewhere in the same files that the patterns rely on.
FILE_FACTS: dict[str, tuple[str, ...]] = {
    # the capture name is "<role> verify" with speculation, "<role> decode" without; role
    # "target" for the target model; the CUDA backend label is "CUDA graph"
    "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py": (
        'role = "draft" if model_runner.is_draft_worker else "target"',
        'capture_name = f"{role} verify"',
        'capture_name = f"{role} decode"',
        '"cuda": "CUDA graph",',
    ),
    # the decode-batch line, and its graph label on CUDA
    "sglang/srt/managers/scheduler_components/metrics_reporter.py": (
        'msg = f"Decode batch{iter_msg}, #running-req: {num_running_reqs}, {token_usage_msg}"',
        '}.get(getattr(self.scheduler, "device", ""), "cuda graph")',
    ),
    # the metrics table's columns; the mode cell is the enum's name
    "vllm/compilation/cuda_graph.py": ('"Runtime Mode",', "runtime_mode,"),
    "vllm/config/compilation.py": ("    def __str__(self) -> str:\n        return self.name",),
    "vllm/engine/arg_utils.py": ('"--cudagraph-metrics",',),
}


def patterns(engine: str) -> list[LogPattern]:
    adapter = get_engine(engine)
    g = adapter.graph_patterns
    assert g is not None and adapter.accept_length_pattern is not None
    return [g.captured, *g.disabled, g.use, adapter.accept_length_pattern]


def cited(root: Path, source: str) -> tuple[Path, int]:
    m = re.fullmatch(r"(\S+\.py):(\d+)(?: \(.*\))?", source)
    assert m, f"source {source!r} is not file.py:line"
    return root / m.group(1), int(m.group(2))


def missing_anchors(root: Path, pattern: LogPattern, anchors: tuple[str, ...]) -> list[str]:
    path, line = cited(root, pattern.source)
    lines = path.read_text(encoding="utf-8").splitlines()
    near = "\n".join(lines[max(0, line - 1 - NEAR) : line + NEAR])
    return [a for a in anchors if a not in near]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_graph_patterns_are_at_their_cited_lines(engine: str, upstream: dict[str, object]) -> None:
    root = upstream[engine].root  # type: ignore[attr-defined]
    seen = set()
    for p in patterns(engine):
        anchors = ANCHORS[(engine, p.code)]
        # each disabled pattern cites its own line: one of the code's anchors must be there
        need = [a for a in anchors if p.regex in a] or list(anchors)
        assert missing_anchors(root, p, tuple(need)) == [], p.source
        seen.add(p.code)
    assert {c for e, c in ANCHORS if e == engine} == seen


@pytest.mark.parametrize("path", sorted(FILE_FACTS))
def test_facts_the_patterns_rely_on(path: str, upstream: dict[str, object]) -> None:
    root = upstream[path.split("/")[0]].root  # type: ignore[attr-defined]
    text = (root / path).read_text(encoding="utf-8")
    assert [f for f in FILE_FACTS[path] if f not in text] == []


def test_a_moved_or_changed_line_is_caught(upstream: dict[str, object]) -> None:
    root = upstream["sglang"].root  # type: ignore[attr-defined]
    g = get_engine("sglang").graph_patterns
    assert g is not None
    moved = LogPattern(g.use.code, g.use.regex, g.use.message, g.use.source.replace(":893", ":700"))
    assert missing_anchors(root, moved, ANCHORS[("sglang", "cuda_graph_use")])
    assert missing_anchors(root, g.use, ('f"{self._graph_backend_label}= {can_run_cuda_graph}"',))


def test_emulator_lines_match_the_patterns() -> None:
    sg, vl = get_engine("sglang").graph_patterns, get_engine("vllm").graph_patterns
    assert sg is not None and vl is not None
    capture = formats.SGLANG_GRAPH_CAPTURE_LINE.format(
        phase="target verify", backend="CUDA graph", edge="end"
    )
    m = sg.captured.search(capture + "elapsed=1.00 s")
    assert m and m.group(1) == "target verify"
    src, tmpl = formats.VLLM_GRAPH_CAPTURED_LINE
    assert vl.captured.search(formats.vllm_log("Worker_TP0", 1, "INFO", src, tmpl % (9, 0.4)))
    src, msg = formats.VLLM_EAGER_LINE
    assert any(d.search(msg) for d in vl.disabled)
    table = formats.vllm_cudagraph_table("FULL_AND_PIECEWISE", [1, 2], [(3, 4, "FULL", 9)])
    rows = [m for line in table.splitlines() if (m := vl.use.search(line))]
    assert [(m.group(1), m.group(2)) for m in rows] == [("FULL", "9")]


def test_sglang_warmup_patterns_are_at_their_cited_lines(upstream: dict[str, object]) -> None:
    # the warm-up thread starts with the HTTP server and logs the ready line after its request
    root = upstream["sglang"].root  # type: ignore[attr-defined]
    w = get_engine("sglang").warmup_patterns
    assert w is not None
    assert missing_anchors(root, w.up, ("def _wait_and_warmup(",)) == []
    assert (
        missing_anchors(root, w.done, ('logger.info("The server is fired up and ready to roll!")',))
        == []
    )
    assert re.search(w.done.regex, "The server is fired up and ready to roll!")
    text = (root / "sglang/srt/entrypoints/http_server.py").read_text(encoding="utf-8")
    assert 'url + "/model_info"' in text and "def _execute_server_warmup(" in text
