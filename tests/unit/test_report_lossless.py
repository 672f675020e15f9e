"""The lossless check: speculative runs against their baseline, matched by prompt (hand-made
runs with known answers)."""

from __future__ import annotations

from pathlib import Path

from bench.measure._probes import MAX_PROBES
from bench.report import lossless
from bench.report._lossless import NEAR_TIE_NATS, classify
from bench.report._model import RequestOutput, RunView
from bench.schema import LogprobProbe, TokenLogprobs, TopLogprob


def out(prompt: str, text: str, chunks: tuple[int, ...] = ()) -> RequestOutput:
    return RequestOutput(
        prompt_sha256=prompt, output_sha256=f"h({text})", text=text, token_chars=chunks
    )


def run(config: str, method: str, outputs: list[RequestOutput], c: int = 1) -> RunView:
    return RunView(
        key=f"{config}-c{c}",
        config=config,
        engine="vllm",
        method=method,
        concurrency=c,
        outputs=tuple(outputs),
    )


BASE = run(
    "vllm-baseline",
    "NONE",
    # one token per chunk: "the" " cat" " sat" / "a" " dog" " ran" " far"
    [out("p1", "the cat sat", (3, 4, 4)), out("p2", "a dog ran far", (1, 4, 4, 4))],
)


def test_identical_outputs_are_lossless() -> None:
    spec = run("vllm-mtp", "MTP", [out("p2", "a dog ran far"), out("p1", "the cat sat")])
    [row] = lossless([BASE, spec])
    assert (row.baseline, row.matched, row.identical, row.first) == ("vllm-baseline", 2, 2, None)
    assert row.lossless is True


def test_first_divergence_in_characters_and_baseline_tokens() -> None:
    spec = run("vllm-mtp", "MTP", [out("p1", "the cat sat"), out("p2", "a dog ran off")])
    [row] = lossless([BASE, spec])
    assert (row.matched, row.identical) == (2, 1)
    # no logprob probes: the divergence is said, never passed nor called lossy
    assert (row.verdict, row.lossless) == ("unclassified", None)
    [check] = row.checks
    assert (check.prompt_sha256, check.verdict) == ("p2", "unclassified")
    assert check.why == "no logprob probe of this prompt in both runs"
    assert row.first is not None
    # "a dog ran f|ar" vs "a dog ran o|ff": character 10, inside the 4th token " far" (0-based 3)
    assert (row.first.char, row.first.token, row.first.prompt_sha256) == (10, 3, "p2")
    assert row.first.baseline.endswith("far") and row.first.speculative.endswith("off")


def test_unmatched_prompts_and_missing_baseline_are_said() -> None:
    other_prompts = run("vllm-mtp", "MTP", [out("q1", "the cat sat")])
    [row] = lossless([BASE, other_prompts])
    assert row.matched == 0 and row.lossless is None and row.note and "prompt seed" in row.note
    at_c4 = run("vllm-mtp", "MTP", [out("p1", "the cat sat")], c=4)
    [row] = lossless([BASE, at_c4])
    assert row.baseline is None and row.note == "no baseline run at this concurrency"


# -- near-tie or real: both runs' top-2 at the first differing token ----------------------------


def tok(token: str, *top: tuple[str, float]) -> TokenLogprobs:
    """A token with its candidates; its own logprob is its entry among them."""
    return TokenLogprobs(
        token=token,
        logprob=dict(top)[token],
        top=[TopLogprob(token=t, logprob=lp) for t, lp in top],
    )


def probe(prompt: str, text: str, *tokens: TokenLogprobs) -> LogprobProbe:
    return LogprobProbe(prompt_sha256=prompt, output_sha256=f"h({text})", tokens=list(tokens))


COMMON = tok(" a", (" a", -0.1), (" b", -3.0))


def test_a_swap_within_the_threshold_is_a_near_tie() -> None:
    # baseline: " x" -2.00 over " y" -2.0625 (gap 0.0625); speculative: " y" -2.03125 over
    # " x" -2.125 (gap 0.09375); both <= 0.125 and swapped
    base = probe("p", "ax", COMMON, tok(" x", (" x", -2.0), (" y", -2.0625)))
    spec = probe("p", "ay", COMMON, tok(" y", (" y", -2.03125), (" x", -2.125)))
    check = classify(base, spec)
    assert check is not None and check.verdict == "near-tie"
    assert (check.token, check.baseline_token, check.speculative_token) == (1, " x", " y")
    assert (check.baseline_gap, check.speculative_gap) == (0.0625, 0.09375)


def test_the_threshold_is_inclusive_and_one_side_above_it_is_real() -> None:
    at = tok(" x", (" x", -1.0), (" y", -1.0 - NEAR_TIE_NATS))
    base = probe("p", "x", at)
    spec = probe("p", "y", tok(" y", (" y", -1.0), (" x", -1.0 - NEAR_TIE_NATS)))
    tie = classify(base, spec)
    assert tie is not None and tie.verdict == "near-tie"
    wide = probe("p", "y", tok(" y", (" y", -1.0), (" x", -1.5)))  # gap 0.5
    c = classify(base, wide)
    assert c is not None and c.verdict == "real" and "0.5000 nats > 0.125" in c.why


def test_a_token_that_is_not_the_runs_own_top1_is_real_whatever_the_gap() -> None:
    # a broken draft: the speculative run emitted " d", which its target ranks below " x"
    # (vLLM lists the sampled token first, then the top ones)
    base = probe("p", "x", tok(" x", (" x", -1.0), (" y", -1.01)))
    spec = probe("p", "d", tok(" d", (" d", -1.02), (" x", -1.0)))
    c = classify(base, spec)
    assert c is not None and c.verdict == "real"
    assert c.why == "the speculative run's token is not its own top-1 (' x' is)"


def test_an_exact_tie_listed_in_the_other_order_is_the_emitted_tokens_top1() -> None:
    # SGLang on an H100: the run emitted "ri", tied to the bit with " number", and listed
    # " number" first; the baseline's " number" led by one bf16 step (the GPU recording's
    # first divergence, tests/fixtures/gpu-runs/tiny-sglang-gpu-determinism.tar.xz)
    base = probe("p", "x", tok(" number", (" number", -2.2135), ("ri", -2.2448)))
    spec = probe("p", "y", tok("ri", (" number", -2.2183), ("ri", -2.2183)))
    c = classify(base, spec)
    assert c is not None and c.verdict == "near-tie"
    assert (c.baseline_gap, c.speculative_gap) == (-2.2135 + 2.2448, 0.0)
    # a listed order is kept where the logprobs part, however little
    lower = probe("p", "y", tok("ri", (" number", -2.2183), ("ri", -2.21831)))
    c = classify(base, lower)
    assert c is not None and c.verdict == "real" and "not its own top-1" in c.why


def test_tokens_that_are_not_each_others_runner_up_are_real_where_the_logprobs_prove_it() -> None:
    # the baseline lists " x" and " z" 0.01 apart: " y", unlisted, may lie just under " z"
    # (a three-way tie) or far below: top-2 cannot tell
    base = probe("p", "x", tok(" x", (" x", -1.0), (" z", -1.01)))
    spec = probe("p", "y", tok(" y", (" y", -1.0), (" x", -1.01)))
    c = classify(base, spec)
    assert c is not None and (c.verdict, c.token) == ("unclassified", 0)
    assert "not each other's runner-up" in c.why and "within 0.0100 nats" in c.why
    # the speculative run lists " y" 0.3 nats under its own top-1 " x": past the threshold
    # however the baseline ranks it, so provably not numerics (and " x" is its own top-1 there)
    base = probe("p", "x", tok(" x", (" x", -1.0), (" z", -1.01)))
    spec = probe("p", "y", tok(" y", (" y", -1.0), (" w", -1.02), (" x", -1.3)))
    c = classify(base, spec)
    assert c is not None and (c.verdict, c.why) == (
        "real",
        "the two tokens are not each other's runner-up (at least 0.3000 nats apart)",
    )


def test_identical_probes_give_no_check_and_failed_ones_are_unclassified() -> None:
    same = probe("p", "a", COMMON)
    assert classify(same, same) is None
    failed = same.model_copy(update={"error": "the engine returned no logprobs", "tokens": []})
    c = classify(same, failed)
    assert c is not None and c.verdict == "unclassified" and "no logprobs" in c.why


def with_probes(view: RunView, *probes: LogprobProbe) -> RunView:
    return view.model_copy(update={"probes": probes})


NEAR = (
    probe("p2", "a dog ran far", tok(" far", (" far", -2.0), (" off", -2.03125))),
    probe("p2", "a dog ran off", tok(" off", (" off", -2.0), (" far", -2.0625))),
)


def test_a_measured_divergence_at_a_near_tie_is_lossless_within_numerics() -> None:
    spec = run("vllm-mtp", "MTP", [out("p1", "the cat sat"), out("p2", "a dog ran off")])
    [row] = lossless([with_probes(BASE, NEAR[0]), with_probes(spec, NEAR[1])])
    assert (row.matched, row.identical, row.probed) == (2, 1, 1)
    assert [(c.source, c.verdict) for c in row.checks] == [("measured", "near-tie")]
    assert (row.verdict, row.lossless) == ("within numerics", True)


def test_one_real_divergence_makes_the_row_lossy() -> None:
    real = probe("p1", "the cat ate", tok(" ate", (" ate", -4.0), (" sat", -1.0)))
    base_p1 = probe("p1", "the cat sat", tok(" sat", (" sat", -1.0), (" ate", -4.0)))
    spec = run("vllm-mtp", "MTP", [out("p1", "the cat ate"), out("p2", "a dog ran off")])
    [row] = lossless([with_probes(BASE, NEAR[0], base_p1), with_probes(spec, NEAR[1], real)])
    assert sorted(c.verdict for c in row.checks) == ["near-tie", "real"]
    assert (row.verdict, row.lossless) == ("lossy", False)


def test_probes_that_do_not_reproduce_the_measured_pair_leave_it_unclassified() -> None:
    spec = run("vllm-mtp", "MTP", [out("p1", "the cat sat"), out("p2", "a dog ran off")])
    other = probe("p2", "a dog ran fast", tok(" fast", (" fast", -2.0), (" far", -2.03125)))
    [row] = lossless([with_probes(BASE, NEAR[0]), with_probes(spec, other)])
    measured = [c for c in row.checks if c.source == "measured"]
    assert [(c.verdict, c.why) for c in measured] == [
        ("unclassified", "the probes' outputs differ from the measured ones")
    ]
    assert row.verdict == "unclassified" and row.lossless is None


def test_a_probe_pair_that_diverges_where_the_measured_ones_agree_is_judged_too() -> None:
    spec = run("vllm-mtp", "MTP", [out("p1", "the cat sat"), out("p2", "a dog ran far")])
    [row] = lossless([with_probes(BASE, NEAR[0]), with_probes(spec, NEAR[1])])
    assert row.identical == row.matched == 2
    assert [(c.source, c.verdict) for c in row.checks] == [("probe", "near-tie")]
    assert row.verdict == "within numerics"


def test_the_docs_state_the_threshold_and_probe_cap_the_code_uses() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "report-sections.md").read_text()
    flat = " ".join(readme.split())
    assert f"both runs' gap is at most {NEAR_TIE_NATS} nats" in flat
    assert f"measured prompts again, up to {MAX_PROBES}," in flat


def test_failed_probes_of_identical_pairs_change_nothing_and_are_not_counted() -> None:
    failed = LogprobProbe(prompt_sha256="p1", output_sha256=None, error="HTTP 500: EngineCore")
    spec = run("vllm-mtp", "MTP", [out("p1", "the cat sat"), out("p2", "a dog ran off")])
    [row] = lossless([with_probes(BASE, failed), with_probes(spec, failed)])
    assert row.probed == 0 and [c.prompt_sha256 for c in row.checks] == ["p2"]
    identical = run("vllm-mtp", "MTP", [out("p1", "the cat sat"), out("p2", "a dog ran far")])
    [row] = lossless([with_probes(BASE, failed), with_probes(identical, failed)])
    assert (row.probed, row.checks, row.verdict) == (0, (), "identical")


def test_a_divergence_whose_probe_failed_says_so() -> None:
    failed = LogprobProbe(prompt_sha256="p2", output_sha256=None, error="HTTP 500: EngineCore")
    spec = run("vllm-mtp", "MTP", [out("p1", "the cat sat"), out("p2", "a dog ran off")])
    [row] = lossless([with_probes(BASE, NEAR[0]), with_probes(spec, failed)])
    [check] = row.checks
    assert (check.verdict, check.why) == ("unclassified", "probe failed: HTTP 500: EngineCore")
