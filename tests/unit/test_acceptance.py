"""bench.measure (acceptance): Prometheus parsing and the one definition of acceptance for both
engines."""

from __future__ import annotations

import pytest

from bench.measure import METRICS, VLLM_DRAFTS, build, combine, delta, parse_prometheus, snapshot

VLLM_BEFORE = """# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 60.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 12.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 8.0
vllm:num_requests_running{engine="0"} 1.0
"""


def test_parse_sums_label_sets_and_keeps_positions() -> None:
    v = parse_prometheus(VLLM_BEFORE, METRICS["vllm"])
    assert v[VLLM_DRAFTS] == 15.0
    assert v['vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"}'] == 8.0
    assert "vllm:num_requests_running" not in v


def test_vllm_delta() -> None:
    after = (
        VLLM_BEFORE.replace("} 10.0", "} 110.0")
        .replace("} 60.0", "} 460.0")
        .replace("} 30.0", "} 330.0")
        .replace("} 12.0", "} 112.0")
        .replace("} 8.0", "} 58.0")
    )
    d = delta("vllm", snapshot("vllm", VLLM_BEFORE), snapshot("vllm", after), 4)
    assert d is not None
    assert (d.drafts, d.draft_tokens, d.accepted_tokens) == (100, 400, 300)
    assert d.acceptance_rate == pytest.approx(0.75)
    assert d.mean_acceptance_length == pytest.approx(4.0)
    assert d.accepted_per_position == [100, 50]


def _sglang(verify: float, gen: float, reqs: float, gauge: str = "") -> str:
    return (
        f'sglang:spec_verify_calls_total{{model_name="m"}} {verify}\n'
        f'sglang:generation_tokens_total{{model_name="m",is_streaming="true"}} {gen}\n'
        f'sglang:generation_tokens_total{{model_name="m",is_streaming="false"}} 7\n'
        f'sglang:num_requests_total{{model_name="m",is_streaming="true"}} {reqs}\n'
        f'sglang:spec_accept_length{{model_name="m"}} 2.4\n{gauge}'
    )


def test_sglang_delta_from_verify_calls_and_generation_tokens() -> None:
    # One request of 512 tokens: 1 from prefill + 511 from 200 verify forwards
    # (200 bonus tokens + 311 accepted drafts); 2 drafts per forward (NEXTN, 3 draft tokens).
    b = snapshot("sglang", _sglang(1000, 5000, 10))
    a = snapshot("sglang", _sglang(1200, 5512, 11))
    d = delta("sglang", b, a, spec_num_tokens=2)
    assert d is not None
    assert (d.drafts, d.draft_tokens, d.accepted_tokens) == (200, 400, 311)
    assert d.mean_acceptance_length == pytest.approx(1 + 311 / 200)
    # The gauge of active draft tokens wins over the configured count when exported.
    a2 = snapshot(
        "sglang", _sglang(1200, 5512, 11, 'sglang:spec_num_draft_tokens{model_name="m"} 5\n')
    )
    d2 = delta("sglang", b, a2, spec_num_tokens=2)
    assert d2 is not None and d2.draft_tokens == 800


def test_no_counters_means_unknown_and_combine() -> None:
    empty = snapshot("vllm", "")
    assert delta("vllm", empty, empty, 4) is None
    x = build(10, 40, 20, [12, 8], "s")
    y = build(30, 120, 60, [30, 20, 10], "s")
    c = combine([x, y])
    assert c is not None
    assert (c.drafts, c.draft_tokens, c.accepted_tokens) == (40, 160, 80)
    assert c.accepted_per_position == [42, 28, 10]
    assert c.acceptance_rate == pytest.approx(0.5) and c.mean_acceptance_length == pytest.approx(
        3.0
    )
    assert combine([]) is None
