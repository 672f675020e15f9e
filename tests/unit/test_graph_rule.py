"""The CUDA graph rule on logs in the pinned engines' shapes (written by the emulator's
formats): captured at start, used in the measured windows, else a warning naming the line
(invalid where the configuration requires graphs)."""

from __future__ import annotations

from test_validity import make_payload

from bench.emulator import formats
from bench.emulator.profile import FailMode
from bench.engines import get_engine
from bench.measure import GraphCheck, accept_lengths, graph_check, judge
from bench.schema import Configuration

SG = get_engine("sglang")
VL = get_engine("vllm")
assert SG.graph_patterns is not None and VL.graph_patterns is not None
SGP = SG.graph_patterns
VLP = VL.graph_patterns


def sg_capture(phase: str) -> str:
    line = formats.SGLANG_GRAPH_CAPTURE_LINE.format(phase=phase, backend="CUDA graph", edge="end")
    line += formats.SGLANG_GRAPH_END_STATS.format(elapsed=7.1, usage=0.52, avail=3.38)
    return formats.sglang_log(line, tp_rank=0)


def sg_decode(graph: bool, accept: float | None = 2.4) -> str:
    spec = (
        ""
        if accept is None
        else formats.SGLANG_SPEC_PART.format(accept_len=accept, accept_rate=0.7)
    )
    msg = formats.SGLANG_DECODE_LINE.format(
        running=1, full_tokens=1300, full_usage=0.02, mamba_num=1, mamba_usage=0.2,
        spec=spec, graph=graph, gen_tput=87.0, queue=0,
    )  # fmt: skip
    return formats.sglang_log(msg, tp_rank=0)


def vl_capture() -> str:
    src, tmpl = formats.VLLM_GRAPH_CAPTURED_LINE
    return formats.vllm_log("Worker_TP0", 1, "INFO", src, tmpl % (9.0, 0.45))


def vl_table(mode: str, count: int = 40) -> str:
    src, _ = formats.VLLM_CUDAGRAPH_SETTINGS
    msg = formats.vllm_cudagraph_table("FULL_AND_PIECEWISE", [1, 2, 4], [(3, 4, mode, count)])
    return formats.vllm_log("APIServer", 1, "INFO", src, msg)


def check_sg(
    log: list[str], window: list[str], *, speculative: bool = True, required: bool = False
) -> GraphCheck:
    return graph_check(
        "\n".join(log + window), "\n".join(window), SGP,
        speculative=speculative, required=required, args=[],
    )  # fmt: skip


def test_sglang_healthy_spec_run_has_no_reason() -> None:
    g = check_sg([sg_capture("target verify")], [sg_decode(True)] * 3)
    assert g.reasons == [] and g.notes == []
    assert g.evidence.active and g.evidence.use_lines == 3 and g.evidence.used == 3
    assert g.evidence.needed == "target verify"
    assert "Capture target verify CUDA graph end." in g.evidence.captured[0]


def test_sglang_eager_fallback_is_a_warning_naming_the_line() -> None:
    g = check_sg([], [sg_decode(False)] * 3)
    assert [(r.code, r.severity) for r in g.reasons] == [("cuda_graphs_not_captured", "warning")]
    assert "Capture (target (?:decode|verify)) CUDA graph end" in g.reasons[0].message
    assert "cuda_graph_setup.py:574" in g.reasons[0].message
    assert not g.evidence.active


def test_sglang_captured_but_never_used() -> None:
    g = check_sg([sg_capture("target verify")], [sg_decode(False)] * 4)
    assert [r.code for r in g.reasons] == ["cuda_graphs_unused"]
    assert "4 of 4" in g.reasons[0].message and "metrics_reporter.py:893" in g.reasons[0].message
    assert len(g.reasons[0].evidence) == 4 and "cuda graph: False" in g.reasons[0].evidence[0]


def test_the_wrong_phase_does_not_count_as_captured() -> None:
    # A speculative configuration needs the target-verify graph, a baseline the decode graph.
    assert [r.code for r in check_sg([sg_capture("target decode")], [sg_decode(True)]).reasons] == [
        "cuda_graphs_not_captured"
    ]
    base = check_sg([sg_capture("target decode")], [sg_decode(True, None)], speculative=False)
    assert base.reasons == []


def test_required_graphs_make_the_run_invalid() -> None:
    g = check_sg([], [sg_decode(False)], required=True)
    assert [(r.code, r.severity) for r in g.reasons] == [("cuda_graphs_not_captured", "invalid")]
    p = judge(make_payload(), speculative=True, findings=[], graphs=g)
    assert not p.evidence.validity.valid


def test_partial_eager_steps_are_a_note_only() -> None:
    g = check_sg([sg_capture("target verify")], [sg_decode(True), sg_decode(False)])
    assert g.reasons == [] and g.notes == [
        "cuda graphs: 1 of 2 logged step(s) in the measured windows ran eager"
    ]


def test_graph_lines_outside_the_window_do_not_count_as_use() -> None:
    # Used during the load/warm-up part of the log only: the window itself has no line.
    log = "\n".join([sg_capture("target verify"), sg_decode(True)])
    g = graph_check(log, "", SGP, speculative=True, required=False, args=[])
    assert g.reasons == [] and g.evidence.use_lines == 0
    assert (
        g.evidence.use_unobservable == "no graph-state line was logged inside the measured windows"
    )


def test_vllm_healthy_unused_and_eager() -> None:
    flag = ["--cudagraph-metrics"]
    ok = graph_check(vl_capture() + "\n" + vl_table("FULL"), vl_table("FULL"), VLP,
                     speculative=True, required=False, args=flag)  # fmt: skip
    assert ok.reasons == [] and ok.evidence.used == 40 == ok.evidence.use_lines
    unused = graph_check(vl_capture(), vl_table("NONE", 7), VLP,
                         speculative=True, required=False, args=flag)  # fmt: skip
    assert [r.code for r in unused.reasons] == ["cuda_graphs_unused"]
    assert "7 of 7" in unused.reasons[0].message
    src, msg = formats.VLLM_EAGER_LINE
    eager_line = formats.vllm_log("APIServer", 1, "INFO", src, msg)
    eager = graph_check(eager_line, vl_table("NONE"), VLP, speculative=True, required=False,
                        args=flag)  # fmt: skip
    assert [r.code for r in eager.reasons] == ["cuda_graphs_not_captured"]
    assert eager.reasons[0].evidence == [eager_line]


def test_vllm_use_without_the_metrics_flag_is_unobservable_not_a_verdict() -> None:
    g = graph_check(vl_capture(), "", VLP, speculative=True, required=True, args=[])
    assert g.reasons == []
    assert g.evidence.use_unobservable == "the engine logs graph use only with --cudagraph-metrics"
    assert g.notes and "--cudagraph-metrics" in g.notes[0]


def test_judge_keeps_the_server_log_evidence() -> None:
    window = [sg_decode(True, 1.85), sg_decode(True, 2.5)]
    g = check_sg([sg_capture("target verify")], window)
    p = judge(
        make_payload(), speculative=True, findings=[], graphs=g,
        load_checks=("draft_tensors_skipped",),
        window_accept_lengths=accept_lengths("\n".join(window), SG.accept_length_pattern),
    )  # fmt: skip
    sl = p.evidence.server_log
    assert sl is not None and sl.graphs is not None and sl.graphs.active
    assert sl.accept_lengths == [1.85, 2.5]
    assert sl.load_checks == ["draft_tensors_skipped"] and sl.load_failures == 0
    assert p.evidence.validity.valid


def test_require_cuda_graphs_defaults_off_and_old_files_stay_valid() -> None:
    cfg = Configuration.model_validate(
        {"name": "x", "engine": "sglang", "method": "NONE", "args": [],
         "emulator": {"profile": "sglang-baseline"}}
    )  # fmt: skip
    assert cfg.require_cuda_graphs is False


def test_emulator_failure_modes_switch_capture_and_use() -> None:
    from bench.emulator import load_profile

    base = load_profile("sglang-mtp")
    assert base.graphs_captured and base.graphs_used
    eager = base.with_overrides(fail=(FailMode.EAGER_FALLBACK,))
    assert not eager.graphs_captured and not eager.graphs_used
    unused = base.with_overrides(fail=(FailMode.GRAPHS_UNUSED,))
    assert unused.graphs_captured and not unused.graphs_used
    assert base.eager_slowdown == 3.0  # eager decode steps take 3x the profile's step time
