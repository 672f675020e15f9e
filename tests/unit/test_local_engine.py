"""The process launcher with the engine installed on this host (the device machine runs vLLM
from its unpacked wheel, no Docker), the vLLM version in its ASCII-logo form, and the wait for
the engine's periodic stats lines after a short measured window."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from bench.engines import ContainerSpec, get_engine, load_experiment
from bench.matrix import MatrixOptions
from bench.matrix._configuration import _container_spec, level_window
from bench.matrix._launch import ProcessLauncher

GPU_EXPERIMENT = Path(__file__).resolve().parents[2] / "bench/experiments/tiny-vllm-gpu.yaml"
# vllm/entrypoints/serve/utils/api_utils.py:327-343 (0.26.0), as the GPU server logged it
LOGO = (
    "(APIServer pid=562) INFO 12-03 14:00:30 [api_utils.py:345]  ▄▄ ▄█ █     █     █ ▀▄▀ █  "
    "version 0.26.0\n"
)
LOGO_COLOUR = (
    " \x1b[97;1m█     █     █ ▀▄▀ █\x1b[0m  version \x1b[97;1m0.26.1rc2.dev7+gab12\x1b[0m\n"
)


def test_local_engine_is_a_real_run_of_the_process_launcher(tmp_path: Path) -> None:
    assert MatrixOptions(out=tmp_path, launcher="process").emulated
    assert not MatrixOptions(out=tmp_path, launcher="process", local_engine=True).emulated
    for bad in ({"launcher": "docker"}, {"launcher": "process", "emulate": True}):
        with pytest.raises(ValidationError, match="local_engine"):
            MatrixOptions(out=tmp_path, local_engine=True, **bad)  # type: ignore[arg-type]


def test_local_engine_spec_is_the_server_argv_on_loopback(tmp_path: Path) -> None:
    exp = load_experiment(GPU_EXPERIMENT)
    cfg = exp.select(["self-draft"])[0]
    opts = MatrixOptions(out=tmp_path, launcher="process", local_engine=True)
    spec = _container_spec(exp, cfg, opts, "RUN")
    argv = [*spec.entrypoint, *spec.command]
    assert argv[:3] == ["vllm", "serve", "/models/target"]
    assert argv[argv.index("--port") + 1] == str(spec.host_port)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert spec.container_port == spec.host_port
    assert "bench.emulator" not in argv


def test_process_launcher_runs_an_engine_argv_as_given(tmp_path: Path) -> None:
    spec = ContainerSpec(
        image="local/x:1",
        entrypoint=[sys.executable],
        command=["-c", "print('engine argv ran')"],
        container_port=1,
        host_port=1,
    )
    server = ProcessLauncher(engine=True).start(spec, tmp_path / "log")
    server.proc.wait(timeout=30)
    assert "engine argv ran" in server.log_text()


def test_vllm_version_from_the_logo_line() -> None:
    vllm = get_engine("vllm")
    assert vllm.version_from_log(LOGO) == "0.26.0"
    assert vllm.version_from_log(LOGO_COLOUR) == "0.26.1rc2.dev7+gab12"
    plain = "(APIServer pid=1) INFO [api_utils.py:347] vLLM server version 0.32.0, serving model m"
    assert vllm.version_from_log(plain) == "0.32.0"
    assert vllm.version_from_log("(APIServer pid=1) INFO Using FlashAttention version 3") is None


class GrowingLog:
    """A server whose log gains ``late`` at the ``reads``-th read of its log (the engine's next
    stats record, logged while the matrix waits): an event the test controls, not a moment a
    timer predicts, so a loaded machine changes nothing."""

    def __init__(self, early: str, late: str, reads: int) -> None:
        self.text, self.late, self.at = early, late, reads
        self.reads = 0

    base_url = ""

    def alive(self) -> bool:
        return True

    def exit_code(self) -> int | None:
        return None

    def restarts(self) -> int:
        return 0

    def log_text(self) -> str:
        self.reads += 1
        if self.reads == self.at:
            self.text += self.late
        return self.text

    def stop(self) -> None:
        pass


TABLE_ROW = "(APIServer pid=1) INFO [cuda_graph.py:123] | 4  | 4  | 0  | FULL  | 56  |\n"


def test_level_window_waits_for_the_stats_record_after_a_short_window() -> None:
    vllm = get_engine("vllm")
    exp = load_experiment(GPU_EXPERIMENT)
    patterns = vllm.periodic_patterns(exp.select(["baseline"])[0])
    assert patterns == (vllm.graph_patterns.use,)  # type: ignore[union-attr]
    # the stats row is logged at the third look: the wait (one interval, 60 s) is not run out
    server = GrowingLog("before\nmeasured\n", TABLE_ROW, reads=3)
    window = level_window(server, len("before\n"), patterns, 60.0, poll_s=0.01)
    assert window.startswith("measured") and "FULL" in window and server.reads == 3
    quick = GrowingLog("before\nmeasured\n", TABLE_ROW, reads=2)
    assert level_window(quick, 7, patterns, None) == "measured\n"  # emulated: no wait
    assert quick.reads == 1


def test_level_window_gives_up_after_one_interval() -> None:
    """The interval is 0.2 s and the log is read every 0.02 s: at most 0.2 / 0.02 + 1 reads
    before it gives up, however loaded the machine (a slower machine reads fewer times, never
    more); the stats row, logged at the 50th read, is never waited for."""
    server = GrowingLog("measured\n", TABLE_ROW, reads=50)
    pattern = get_engine("vllm").graph_patterns.use  # type: ignore[union-attr]
    assert level_window(server, 0, (pattern,), 0.2, poll_s=0.02, slack_s=0.0) == "measured\n"
    assert 1 <= server.reads <= 0.2 / 0.02 + 1
