"""Issue 37: per-request acceptance as each pinned engine sends it, and its cross-check with
the /metrics counters of the same window."""

from __future__ import annotations

from bench.emulator import formats
from bench.engines import get_engine, load_experiment
from bench.measure._acceptance import build
from bench.measure._requestacc import (
    SGLANG_SOURCE,
    VLLM_SOURCE,
    cross_check,
    parse_spec_tokens,
)
from bench.schema import EXPERIMENTS_DIR, CategoryRequestAcceptance


def test_sglang_sglext_chunk_is_read() -> None:
    details = formats.sglang_spec_tokens_details(5, 7, 2, 13, [1, 1, 3])
    got = parse_spec_tokens({"choices": [], "sglext": {"spec_tokens_details": details}})
    assert got is not None and got.source == SGLANG_SOURCE
    assert (got.verify_steps, got.accepted_tokens, got.draft_tokens) == (5, 7, 10)
    assert got.acceptance_rate == 0.7 and got.accept_length == 13 / 5
    assert got.histogram == [1, 1, 3]


def test_vllm_usage_chunk_metrics_are_read() -> None:
    sd = {
        "mean_acceptance_length": 2.5,
        "draft_acceptance_rate": 0.75,
        "acceptance_histogram": [0, 1, 1],
        "num_spec_steps": 2,
        "num_accepted_draft_tokens": 3,
        "num_draft_tokens": 4,
        "num_spec_tokens": 2,
    }
    got = parse_spec_tokens({"choices": [], "usage": {}, "metrics": {"speculative_decoding": sd}})
    assert got is not None and got.source == VLLM_SOURCE
    assert (got.verify_steps, got.accepted_tokens, got.draft_tokens) == (2, 3, 4)


def test_missing_or_malformed_details_are_none() -> None:
    assert parse_spec_tokens({"choices": []}) is None
    assert parse_spec_tokens({"sglext": {"spec_tokens_details": {"spec_verify_ct": -1}}}) is None
    assert parse_spec_tokens({"sglext": None, "metrics": {"speculative_decoding": None}}) is None


def _total(source: str, steps: int, accepted: int) -> CategoryRequestAcceptance:
    return CategoryRequestAcceptance(
        source=source, requests=2, verify_steps=steps, draft_tokens=steps * 2,
        accepted_tokens=accepted,
    )  # fmt: skip


def test_the_cross_check_rules() -> None:
    counters = build(10, 20, 12, [], "x")
    assert cross_check(_total(VLLM_SOURCE, 10, 12), counters, 2).agrees_with_counters is True
    assert cross_check(_total(VLLM_SOURCE, 10, 13), counters, 2).agrees_with_counters is False
    assert cross_check(_total(VLLM_SOURCE, 11, 12), counters, 2).agrees_with_counters is False
    # SGLang's counter figure loses at most k per request to the last truncated verify
    assert cross_check(_total(SGLANG_SOURCE, 10, 16), counters, 2).agrees_with_counters is True
    assert cross_check(_total(SGLANG_SOURCE, 10, 17), counters, 2).agrees_with_counters is False
    assert cross_check(_total(SGLANG_SOURCE, 10, 11), counters, 2).agrees_with_counters is False
    none = cross_check(_total(SGLANG_SOURCE, 10, 12), None, 2)
    assert none.agrees_with_counters is None and "no counter delta" in none.check


def test_vllm_emulator_metrics_follow_the_histogram() -> None:
    got = parse_spec_tokens(
        {
            "metrics": {
                "speculative_decoding": formats.vllm_spec_decoding_metrics(2, [1, 0, 3], False)
            }
        }
    )
    assert got is not None and got.source == VLLM_SOURCE
    assert (got.verify_steps, got.accepted_tokens, got.draft_tokens) == (4, 6, 8)
    assert got.acceptance_rate == 0.75 and got.accept_length == 2.5


def test_the_emulator_is_told_the_per_request_flag_of_a_vllm_configuration() -> None:
    exp = load_experiment(EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml")
    cfg = exp.configuration("vllm-mtp")
    flagged = cfg.model_copy(
        update={"args": [*cfg.args, "--per-request-spec-decode-metrics", "summary"]}
    )
    engine = get_engine("vllm")
    argv = engine.emulator_argv(flagged, host="127.0.0.1", port=1)
    at = argv.index("--per-request-spec-decode-metrics")
    assert argv[at + 1] == "summary"
    assert "--per-request-spec-decode-metrics" not in engine.emulator_argv(cfg, host="h", port=1)
