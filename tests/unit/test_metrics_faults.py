"""bench.measure: /metrics that is garbage, counters of another model, counters that go back
(issues 39 class 9, 42 class 7, 38 faults 3-4), and the Retry-After a retry honours (38 fault 2).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from bench.measure import METRICS, RawResponse
from bench.measure._acceptance import counters_went_back, read_metrics
from bench.measure._loop import MAX_RETRY_AFTER_S, retry_after
from bench.measure._validity import MetricsProblem, metrics_reasons
from bench.schema import MetricSnapshot

DRAFTS = "vllm:spec_decode_num_drafts_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def page(model: str, drafts: float, accepted: float) -> str:
    return (
        f"# TYPE {DRAFTS} counter\n"
        f'{DRAFTS}{{engine="0",model_name="{model}"}} {drafts}\n'
        f'{DRAFTS}{{engine="1",model_name="{model}"}} 1\n'
        f'{ACCEPTED}{{engine="0",model_name="{model}"}} {accepted}\n'
    )


def test_only_the_served_models_series_is_read_and_named() -> None:
    text = page("mine", 10, 4) + page("theirs", 1000, 990)
    got = read_metrics(text, METRICS["vllm"], "mine")
    assert got.values == {DRAFTS: 11.0, ACCEPTED: 4.0}  # both engine indices, one model
    assert got.series == 'model_name="mine"' and got.other_models == ("theirs",)
    assert got.problem is None
    # a model the page holds no series for: nothing read, and said so
    none = read_metrics(page("theirs", 1, 1), METRICS["vllm"], "mine")
    assert none.values == {} and none.series == 'none for model_name="mine"'
    # no model_name label at all (an engine that does not label): every label set summed
    bare = read_metrics(f'{DRAFTS} 3\n{DRAFTS}{{engine="1"}} 2\n', METRICS["vllm"], "mine")
    assert bare.values == {DRAFTS: 5.0} and bare.series.startswith("no model_name label")


@pytest.mark.parametrize(
    "body,needle",
    [
        ("<html><body>502 Bad Gateway</body></html>\n", "not Prometheus text"),
        ("Internal Server Error\n", "not Prometheus text"),
        ('{"error": "metrics disabled"}\n', "not Prometheus text"),
        (f'{DRAFTS}{{model_name="m"}} NaN\n', "unusable"),
        (f'vllm:num_requests_running 1\n{DRAFTS}{{model_name="m"}} -3\n', "unusable"),
        (f'{DRAFTS} 1\n{PER_POS}{{model_name="m",position="x"}} 3\n', "not an integer"),
        (f"{DRAFTS} 1e308\n{DRAFTS} 1e308\n", f"{DRAFTS}: the sum of its label sets overflows"),
        (f'vllm:num_requests_running 1\n{DRAFTS}{{model_name="m"}} twelve\n', "unusable"),
    ],
)
def test_garbage_is_a_problem_not_no_counters(body: str, needle: str) -> None:
    got = read_metrics(body, METRICS["vllm"], "m")
    assert got.problem is not None and needle in got.problem
    assert all(math.isfinite(v) and v >= 0 for v in got.values.values())
    # an engine page without speculative counters is not garbage
    ok = read_metrics("# HELP x\nvllm:num_requests_running 1\n\n", METRICS["vllm"], "m")
    assert ok.problem is None and ok.values == {}


def test_counters_that_went_back_are_named_gauges_may_fall() -> None:
    before = MetricSnapshot(
        at=0.0, values={DRAFTS: 120.0, ACCEPTED: 80.0, "sglang:spec_accept_length": 3.0}
    )
    restarted = MetricSnapshot(at=1.0, values={DRAFTS: 7.0, "sglang:spec_accept_length": 1.5})
    assert counters_went_back(before, restarted) == [
        f"{ACCEPTED} 80 -> (absent)",
        f"{DRAFTS} 120 -> 7",
    ]
    grown = MetricSnapshot(at=1.0, values={DRAFTS: 130.0, ACCEPTED: 80.0})
    assert counters_went_back(before, grown) == []


def test_metrics_reasons_name_what_happened() -> None:
    reset = MetricsProblem("reset", 2, f"iteration 2: {DRAFTS} 120 -> 7", 200)
    (r,) = metrics_reasons([reset], speculative=False, measured=3)
    assert r.code == "metrics_counters_reset" and r.severity == "invalid"
    assert "120 -> 7" in r.message and "restarted" in r.message

    garbage = MetricsProblem(
        "scrape", 1, "iteration 1: GET /metrics after it not Prometheus text", 200
    )
    (g,) = metrics_reasons([garbage], speculative=True, measured=3)
    assert g.code == "metrics_scrape_failed" and g.severity == "invalid"
    assert "not Prometheus text" in g.message
    (w,) = metrics_reasons([garbage], speculative=False, measured=3)
    assert w.code == "metrics_scrape_failed" and w.severity == "warning"

    # a server without /metrics at all: acceptance unknown, as without counters (a warning)
    missing = [
        MetricsProblem("scrape", i, f"iteration {i}: answered HTTP 404", 404) for i in (0, 0, 1, 1)
    ]
    (n,) = metrics_reasons(missing, speculative=True, measured=2)
    assert n.code == "no_metrics_endpoint" and n.severity == "warning"
    # ...but a 404 at one scrape only is a failed scrape
    (one,) = metrics_reasons(missing[:1], speculative=True, measured=2)
    assert one.code == "metrics_scrape_failed" and one.severity == "invalid"
    assert metrics_reasons([], speculative=True, measured=2) == []


def answered(status: int, **headers: str) -> RawResponse:
    return RawResponse(status=status, headers={k.replace("_", "-"): v for k, v in headers.items()})


def test_retry_after_seconds_date_default_and_limits() -> None:
    assert retry_after(answered(429, retry_after="2")) == 2.0
    assert retry_after(answered(503, retry_after="0")) == 0.0
    assert retry_after(answered(429)) == 1.0  # no header: a short default
    when = datetime.now(UTC) + timedelta(seconds=30)
    got = retry_after(answered(503, retry_after=format_datetime(when, usegmt=True)))
    assert got is not None and 25 < got <= 30
    past = datetime.now(UTC) - timedelta(seconds=30)
    assert retry_after(answered(503, retry_after=format_datetime(past, usegmt=True))) == 0.0
    # longer than we wait: not retried (the caller reports the refusal)
    assert retry_after(answered(429, retry_after=str(int(MAX_RETRY_AFTER_S) + 1))) is None
    # not a refusal that a retry can cure
    for status in (200, 400, 404, 500):
        assert retry_after(answered(status, retry_after="1")) is None
    assert retry_after(RawResponse()) is None  # no answer at all


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize(
    "engine,path",
    [
        ("vllm", "vllm-gpu/metrics.txt"),
        ("sglang", "sglang-gpu/rec/metrics.txt"),
        ("sglang", "sglang-gpu/rec/metrics-idle.txt"),
    ],
)
def test_real_metrics_pages_read_cleanly_as_the_served_models(engine: str, path: str) -> None:
    # the recorded GPU pages (served model 'tiny'): no problem, the one series named, and the
    # same values as reading every label set (one model served)
    text = (FIXTURES / path).read_text()
    got = read_metrics(text, METRICS[engine], "tiny")
    assert got.problem is None and got.series == 'model_name="tiny"'
    assert got.other_models == ()
    assert got.values and got.values == read_metrics(text, METRICS[engine]).values
