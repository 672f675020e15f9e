"""bench.measure (acceptance): the edges of the one definition — the server's TTFT histogram,
Prometheus lines of every shape, counters that are missing, negative or out of order — each
with a value worked out by hand (branches found by mutation testing, docs/MUTATION.md)."""

from __future__ import annotations

import pytest

from bench.measure import METRICS, build, combine, delta, parse_prometheus
from bench.measure._acceptance import server_ttft_ms
from bench.schema import MetricSnapshot

PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def _ttft(engine: str, sum_s: float, count: float) -> MetricSnapshot:
    name = f"{engine}:time_to_first_token_seconds"
    return MetricSnapshot(at=0.0, values={f"{name}_sum": sum_s, f"{name}_count": count})


def test_server_ttft_is_the_windows_mean_in_ms() -> None:
    # 5 first tokens in the window, 2.5 s between them: 500 ms each on average
    assert server_ttft_ms("vllm", _ttft("vllm", 1.0, 4), _ttft("vllm", 3.5, 9)) == 500.0
    # one request in the window is enough: 0.25 s -> 250 ms
    assert server_ttft_ms("vllm", _ttft("vllm", 1.0, 4), _ttft("vllm", 1.25, 5)) == 250.0
    # counters that were absent before the window start from zero: 0.6 s / 3 = 200 ms
    empty = MetricSnapshot(at=0.0, values={})
    got = server_ttft_ms("sglang", empty, _ttft("sglang", 0.6, 3))
    assert got == pytest.approx(200.0)


def test_server_ttft_unknown_when_nothing_to_average() -> None:
    b = _ttft("vllm", 1.0, 4)
    assert server_ttft_ms("vllm", b, b) is None  # no request got its first token
    assert server_ttft_ms("vllm", b, _ttft("vllm", 1.0, 3)) is None  # counter went back
    assert server_ttft_ms("tgi", b, _ttft("tgi", 2.0, 5)) is None  # engine without one
    only_sum = MetricSnapshot(at=0.0, values={"vllm:time_to_first_token_seconds_sum": 2.0})
    only_count = MetricSnapshot(at=0.0, values={"vllm:time_to_first_token_seconds_count": 5.0})
    assert server_ttft_ms("vllm", b, only_sum) is None
    assert server_ttft_ms("vllm", b, only_count) is None


def test_prometheus_lines_of_every_shape() -> None:
    text = (
        "\n"
        "# HELP vllm:spec_decode_num_drafts_total 1 2\n"
        "#\n"  # a bare comment
        "vllm:spec_decode_num_drafts_total 3.5\n"  # no labels
        "vllm:spec_decode_num_draft_tokens_total 2 1700000000\n"  # no labels, a timestamp
        'vllm:spec_decode_num_draft_tokens_total 3 # {trace_id="t 1"} 1.0\n'  # an exemplar
        'vllm:spec_decode_num_draft_tokens_total{a="{",b="}"} 4\n'  # braces in label values
        'vllm:spec_decode_num_drafts_total{model_name="a b"} 1.5 1700000000\n'  # space in a label
        "vllm:spec_decode_num_draft_tokens_total abc\n"  # not a number: skipped
        "vllm:spec_decode_num_accepted_tokens_total\n"  # no value: skipped
        'vllm:spec_decode_num_accepted_tokens_total{engine="0"}\n'  # labels, no value
        f'{PER_POS}{{engine="0", position = "2" }} 4\n'  # spaces around the label
        f'{PER_POS}{{position="2",engine="1"}} 1\n'  # position first
        f'{PER_POS}{{engine="0"}} 9\n'  # no position label
    )
    assert parse_prometheus(text, METRICS["vllm"]) == {
        "vllm:spec_decode_num_drafts_total": 5.0,
        "vllm:spec_decode_num_draft_tokens_total": 9.0,
        f'{PER_POS}{{position="2"}}': 5.0,
        f'{PER_POS}{{position="?"}}': 9.0,
    }
    assert parse_prometheus("# only a comment\n\n", METRICS["vllm"]) == {}


def test_vllm_positions_in_numeric_order_and_missing_before() -> None:
    # 11 positions: a text sort would put position 10 second
    after = {f'{PER_POS}{{position="{i}"}}': float(100 - i) for i in range(11)}
    after |= {
        "vllm:spec_decode_num_drafts_total": 20.0,
        "vllm:spec_decode_num_draft_tokens_total": 220.0,
        "vllm:spec_decode_num_accepted_tokens_total": 55.0,
    }
    before = MetricSnapshot(at=0.0, values={"vllm:spec_decode_num_drafts_total": 4.0})
    a = MetricSnapshot(at=1.0, values=after)
    d = delta("vllm", before, a, None)
    assert d is not None
    assert d.accepted_per_position == [100 - i for i in range(11)]
    assert (d.drafts, d.draft_tokens, d.accepted_tokens) == (16, 220, 55)
    assert d.acceptance_rate == pytest.approx(0.25)  # 55 / 220
    assert d.mean_acceptance_length == pytest.approx(1 + 55 / 16)
    assert d.source == "vllm /metrics spec_decode counters"
    assert d.before is before and d.after is a
    # a counter the after scrape lacks counts from zero: accepted = 0 - 0, draft tokens 0 - 7
    partial = delta(
        "vllm",
        MetricSnapshot(at=0.0, values={"vllm:spec_decode_num_draft_tokens_total": 7.0}),
        MetricSnapshot(at=1.0, values={"vllm:spec_decode_num_drafts_total": 3.0}),
        None,
    )
    assert partial is not None
    assert (partial.drafts, partial.draft_tokens, partial.accepted_tokens) == (3, 0, 0)
    assert partial.mean_acceptance_length == 1.0
    # the after scrape decides whether the engine exports the counters at all
    assert delta("vllm", a, before.model_copy(update={"values": {}}), None) is None


def _sglang(verify: float, gen: float, reqs: float, **extra: float) -> MetricSnapshot:
    values = {
        "sglang:spec_verify_calls_total": verify,
        "sglang:generation_tokens_total": gen,
        "sglang:num_requests_total": reqs,
    }
    values |= {f"sglang:{k}": v for k, v in extra.items()}
    return MetricSnapshot(at=0.0, values=values)


def test_sglang_draft_tokens_gauge_spec_and_neither() -> None:
    b = _sglang(100, 1000, 10)
    # 2 requests, 50 verify forwards, 152 tokens: accepted = 152 - 2 - 50 = 100
    plain = _sglang(150, 1152, 12)
    d = delta("sglang", b, plain, None)
    assert d is not None
    assert (d.drafts, d.draft_tokens, d.accepted_tokens) == (50, 0, 100)
    assert d.acceptance_rate is None and d.mean_acceptance_length == pytest.approx(3.0)
    assert d.accepted_per_position == []
    assert d.source == "sglang /metrics: verify calls, generation tokens, requests"
    d3 = delta("sglang", b, plain, 3)
    assert d3 is not None and d3.draft_tokens == 150
    # a gauge of 1 (no draft token per round) is not a usable width: the configured one wins
    g1 = delta("sglang", b, _sglang(150, 1152, 12, spec_num_draft_tokens=1.0), 3)
    assert g1 is not None and g1.draft_tokens == 150
    # a gauge of 2: one draft token per round
    g2 = delta("sglang", b, _sglang(150, 1152, 12, spec_num_draft_tokens=2.0), 3)
    assert g2 is not None and g2.draft_tokens == 50
    g2_alone = delta("sglang", b, _sglang(150, 1152, 12, spec_num_draft_tokens=2.0), None)
    assert g2_alone is not None and g2_alone.draft_tokens == 50


def test_sglang_accepted_never_negative_and_needs_verify_calls() -> None:
    b = _sglang(100, 1000, 10)
    # 3 requests of 1 token each and 5 verify calls: 3 - 3 - 5 < 0 -> 0 accepted
    d = delta("sglang", b, _sglang(105, 1003, 13), 2)
    assert d is not None and d.accepted_tokens == 0 and d.acceptance_rate == 0.0
    no_spec = MetricSnapshot(at=0.0, values={"sglang:generation_tokens_total": 9.0})
    assert delta("sglang", b, no_spec, 2) is None


def test_build_rounds_and_clamps() -> None:
    x = build(2.6, 7.4, 3.5, [1], "s")
    assert (x.drafts, x.draft_tokens, x.accepted_tokens) == (3, 7, 4)
    assert x.acceptance_rate == pytest.approx(4 / 7)
    assert x.mean_acceptance_length == pytest.approx(1 + 4 / 3)
    # one draft round of one draft token: the rate and length are defined
    one = build(1, 1, 1, [], "s")
    assert (one.acceptance_rate, one.mean_acceptance_length) == (1.0, 2.0)
    zero = build(0, 0, 0, [], "s")
    assert (zero.acceptance_rate, zero.mean_acceptance_length) == (None, None)
    neg = build(-2.0, -1.0, -3.0, [], "s")
    assert (neg.drafts, neg.draft_tokens, neg.accepted_tokens) == (0, 0, 0)
    assert neg.acceptance_rate is None and neg.mean_acceptance_length is None
    assert neg.before is None and neg.after is None


def test_combine_keeps_the_first_source_and_pads_positions() -> None:
    x = build(1, 2, 1, [1], "first")
    y = build(1, 2, 2, [], "second")
    z = build(2, 4, 3, [2, 1], "third")
    c = combine(iter([x, y, z]))
    assert c is not None
    assert c.source == "first"
    assert c.accepted_per_position == [3, 1]
    assert (c.drafts, c.draft_tokens, c.accepted_tokens) == (4, 8, 6)
    assert c.before is None and c.after is None
    only = combine([y])
    assert only is not None and only.accepted_per_position == []
