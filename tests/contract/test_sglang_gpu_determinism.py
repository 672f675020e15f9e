"""STANDALONE's divergence from the baseline on a real GPU, explained (issue 49, item 6): the
H100 call of 2026-12-07 (SGLang 0.5.17 as a local process, the random-weight tiny Qwen3 target
in BF16, `bench/experiments/tiny-sglang-gpu-determinism.yaml` at commit b57f39b), kept whole as
tests/fixtures/gpu-runs/tiny-sglang-gpu-determinism.tar.xz. Held here, on the CPU:

- determinism: a second baseline server (the same argv) gives the same greedy outputs at
  concurrency 1, and all but one at 4 (that one parts late, in a batch of four);
- the control: STANDALONE with the target as its own draft (lossless by construction) parts
  from the baseline exactly as STANDALONE with the partial draft does, at the same tokens;
- what the probes compare: at every probed first divergence both runs' top-2 gaps are at
  most two bf16 steps, and one run's is mostly an exact tie, which SGLang lists in its own
  order (never the emitted token first): near-ties, not a defect. The report says "lossless
  within numerics" at concurrency 1 and nowhere "lossy".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_recordings import payload, recomputed, report, section, unpack

from bench.report import load_artifacts, lossless
from bench.report._lossless import NEAR_TIE_NATS, top2
from bench.schema import LogprobProbe, Payload

pytestmark = pytest.mark.contract

NAME = "tiny-sglang-gpu-determinism"
CONFIGS = ("baseline", "baseline-again", "standalone", "self-draft")
#: bf16 spacing for logits in [4, 8): every recorded top-2 gap is a multiple of it
STEP = 2.0**-5


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(NAME, tmp_path_factory.mktemp("determinism"))


def outputs(p: Payload) -> dict[str, str]:
    """Measured requests' output hash by prompt."""
    return {
        r.prompt_sha256 or "": r.output_sha256 or ""
        for it in p.evidence.iterations
        if not it.warmup
        for r in it.requests
    }


def probes(p: Payload) -> dict[str, LogprobProbe]:
    lp = p.evidence.logprob_probes
    assert lp is not None and lp.requests
    return {q.prompt_sha256: q for q in lp.requests}


def first_split(a: LogprobProbe, b: LogprobProbe) -> int | None:
    return next(
        (i for i, (x, y) in enumerate(zip(a.tokens, b.tokens, strict=True)) if x.token != y.token),
        None,
    )


def test_one_run_eight_valid_payloads_on_the_same_prompts(run: Path) -> None:
    got = {f"{n}-c{c}": payload(run, f"{n}-c{c}") for n in CONFIGS for c in (1, 4)}
    assert all(p.evidence.validity.valid for p in got.values())
    assert len({p.evidence.run.run_id for p in got.values()}) == 1
    for c in (1, 4):
        prompts = {n: set(outputs(got[f"{n}-c{c}"])) for n in CONFIGS}
        assert len({frozenset(s) for s in prompts.values()}) == 1
        assert len(prompts["baseline"]) == 3 * c


def test_the_baseline_against_itself(run: Path) -> None:
    """Two servers of the same argv: identical at c=1; one of twelve parts at c=4."""
    for c, differ in ((1, 0), (4, 1)):
        a = outputs(payload(run, f"baseline-c{c}"))
        b = outputs(payload(run, f"baseline-again-c{c}"))
        assert sum(a[k] != b[k] for k in a) == differ
        pa, pb = (
            probes(payload(run, f"baseline-c{c}")),
            probes(payload(run, f"baseline-again-c{c}")),
        )
        assert all(first_split(pa[k], pb[k]) is None for k in pa)


def test_the_control_parts_where_the_partial_draft_does(run: Path) -> None:
    """The target as its own draft cannot choose other tokens than the target: its outputs
    part from the baseline at the same probe tokens as STANDALONE's, so the draft is not the
    cause (at c=4 six of the eight probes; one parts elsewhere, and one of STANDALONE's
    probes does not part at all)."""
    for c, same in ((1, 3), (4, 6)):
        base = probes(payload(run, f"baseline-c{c}"))
        sa, sd = probes(payload(run, f"standalone-c{c}")), probes(payload(run, f"self-draft-c{c}"))
        at = {k: (first_split(base[k], sa[k]), first_split(base[k], sd[k])) for k in base}
        assert sum(x == y is not None for x, y in at.values()) == same


def test_every_probed_first_divergence_is_a_bf16_near_tie(run: Path) -> None:
    ties = splits = 0
    for c in (1, 4):
        base = probes(payload(run, f"baseline-c{c}"))
        for name in ("standalone", "self-draft"):
            spec = probes(payload(run, f"{name}-c{c}"))
            for k, b in base.items():
                i = first_split(b, spec[k])
                if i is None:  # one probe of the sixteen agrees throughout
                    continue
                gaps = []
                for t in (b.tokens[i], spec[k].tokens[i]):
                    x, y = sorted((e.logprob for e in t.top), reverse=True)[:2]
                    gaps.append(x - y)
                assert all(g <= 2 * STEP <= NEAR_TIE_NATS for g in gaps), (name, c, k, gaps)
                ties += min(gaps) == 0.0
                splits += 1
    # 21 split probe pairs: 19 an exact tie in one run and a step or two in the other, two
    # one step in each
    assert (splits, ties) == (21, 19)


def test_sglang_lists_an_exact_tie_with_the_emitted_token_second(run: Path) -> None:
    """Why ``top2`` puts the emitted token first on an exact tie: every one of the baseline's
    recorded ties lists the other token first, yet greedy emitted a top-1."""
    ties = listed_first = 0
    for n in ("baseline", "baseline-again"):
        for c in (1, 4):
            for q in probes(payload(run, f"{n}-c{c}")).values():
                for t in q.tokens:
                    x, y = sorted(t.top, key=lambda e: -e.logprob)[:2]
                    if x.logprob == y.logprob:
                        ties += 1
                        listed_first += t.top[0].token == t.token
                    assert top2(t)[0].token == t.token
    assert (ties, listed_first) == (62, 0)


def test_the_verdicts_and_the_acceptance(run: Path, tmp_path: Path) -> None:
    rows = {(r.config, r.concurrency): r for r in lossless(load_artifacts(run).runs)}
    assert sorted(rows) == [("self-draft", 1), ("self-draft", 4), ("standalone", 1),
                            ("standalone", 4)]  # fmt: skip
    for (_, c), row in rows.items():
        assert row.count("real") == 0
        assert row.verdict == ("within numerics" if c == 1 else "unclassified")
        # c=4's unclassified: the four prompts of the last iteration were never probed, and
        # one three-way tie that two listed candidates cannot settle
        assert {ch.why for ch in row.checks if ch.verdict == "unclassified"} <= {
            "no logprob probe of this prompt in both runs",
            *(ch.why for ch in row.checks if "three or more tied" in ch.why),
        }
    text = section(report(run, tmp_path / "r"), "Greedy output: speculation against the baseline")
    table = [r for r in text.splitlines() if r.startswith(("| standalone |", "| self-draft |"))]
    verdicts = sorted(r.split(" | ")[9] for r in table)
    assert verdicts == ["DIVERGED, unclassified"] * 2 + ["lossless within numerics"] * 2
    # the control's draft agrees with its target on only part of its tokens (the random
    # target's gaps are a few bf16 steps: draft and verify kernels round differently), more
    # than the partial draft's; both recomputed from the raw /metrics snapshots
    acc = {n: recomputed(payload(run, f"{n}-c1")) for n in ("standalone", "self-draft")}
    assert (acc["standalone"].accepted_tokens, acc["standalone"].draft_tokens) == (208, 519)
    assert (acc["self-draft"].accepted_tokens, acc["self-draft"].draft_tokens) == (239, 426)
