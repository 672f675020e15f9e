"""The lossless check: under greedy decoding, speculation must not change a single output token.

For each speculative run and concurrency level, the baseline is the same engine's run without
speculation at the same level. Requests are matched by their whole prompt (``prompt_sha256``,
nonce included): with a prompt seed every configuration got the same prompts in the same
order. A matched pair is identical when its output hashes agree; otherwise the report shows
where the texts part, in characters and in the baseline's streamed tokens (a run without
speculation streams one token per content chunk). A divergence is evidence, not a crash.

On a GPU, greedy outputs of two configurations part at numeric near-ties: bf16 logits a
rounding apart, ordered differently by different kernels. Each payload carries logprob probes
(``evidence.logprob_probes``: the measured prompts, or the first of them, sent again after the
timed iterations with the top-2 logprobs per token). At the first differing token of a pair,
both runs' top-2 decide: a **near-tie** when the two chosen tokens swap between top-1 and
runner-up and each run's gap is at most ``NEAR_TIE_NATS`` (a token tied to the bit with the
listed top-1 is a top-1: SGLang lists ties in its own order); a **real** divergence when a
chosen token is not its run's top-1 or the logprobs put the two tokens more than the threshold
apart; **unclassified** when no probe of both runs reproduces the pair, or when the listed
candidates cannot tell (said, never passed silently).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Final, Literal

from pydantic import Field

from bench.core import StrictModel
from bench.report._model import RequestOutput, RunView
from bench.schema import LogprobProbe, TokenLogprobs, TopLogprob

CONTEXT_CHARS = 24  # text shown on each side of a divergence

BF16_STEP: Final = 2.0**-4
"""Spacing of bf16 numbers in [8, 16): 8 significant bits, 2^3 * 2^-7."""

NEAR_TIE_NATS: Final = 2 * BF16_STEP
"""Largest top-1 - top-2 logprob gap (nats) at which a swap of the two is a numeric near-tie.

The gap of two logprobs is the gap of their logits (log-softmax subtracts the same log-sum-exp
from both). bf16 keeps 8 significant bits: a logit of magnitude in [8, 16) is a multiple of
2^-4 = 0.0625, in [4, 8) of 2^-5 (the recorded H200 stream's top-2 gaps all are multiples of
2^-5, as logits there give). Two configurations compute the same logits through different
kernels (batch shape, verify vs decode step, graphs vs eager), each off by about a rounding; a
swap of top-1 and top-2 needs the two runs' gaps to sum to that error, so each run's gap stays
within two such roundings (0.125 nats) at logits below 16. A real divergence (a draft token
the target would not pick) shows a chosen token that is not the run's own top-1, or a gap above
this."""

NEAR_TIE_REASON: Final = (
    "bf16 keeps 8 significant bits, so a logit below 16 in magnitude is rounded to a multiple "
    f"of 2^-4 = {BF16_STEP} nats; two configurations' kernels (batch shape, verify vs decode "
    "step, graphs vs eager) may each move a logit by about that, and a swap of the top two "
    "within two such roundings in each run is numerics, not a defect"
)

Verdict = Literal["near-tie", "real", "unclassified"]
RowVerdict = Literal["not compared", "identical", "within numerics", "lossy", "unclassified"]


class Divergence(StrictModel):
    prompt_sha256: str
    char: int = Field(description="first differing character offset")
    token: int | None = None
    baseline: str
    speculative: str


class TokenCheck(StrictModel):
    """The verdict on one differing pair, from both runs' top-2 at the first differing token."""

    prompt_sha256: str
    source: Literal["measured", "probe"] = Field(
        description="a measured pair (its probes reproduce both outputs) or a probe pair only"
    )
    verdict: Verdict
    token: int | None = Field(default=None, description="first differing token (0-based)")
    baseline_token: str | None = None
    speculative_token: str | None = None
    baseline_gap: float | None = Field(default=None, description="top-1 - top-2 (nats)")
    speculative_gap: float | None = None
    why: str


class LosslessRow(StrictModel):
    config: str
    engine: str
    method: str
    concurrency: int
    baseline: str | None
    requests: int
    matched: int
    identical: int
    first: Divergence | None = None
    note: str | None = None
    probed: int = Field(
        default=0, description="probe pairs of both runs (same prompt) that both answered"
    )
    checks: tuple[TokenCheck, ...] = ()

    def count(self, verdict: Verdict) -> int:
        return sum(1 for c in self.checks if c.verdict == verdict)

    @property
    def verdict(self) -> RowVerdict:
        """Lossy on any real divergence; unclassified when a divergence lacks the logprobs to
        judge it; within numerics when every divergence is a near-tie."""
        if self.matched == 0:
            return "not compared"
        if self.count("real"):
            return "lossy"
        if self.count("unclassified"):
            return "unclassified"
        if self.count("near-tie"):
            return "within numerics"
        return "identical"

    @property
    def lossless(self) -> bool | None:
        """True when every output was identical or parted at near-ties only; False on a real
        divergence; None when nothing could be matched or a divergence is unclassified."""
        return {"identical": True, "within numerics": True, "lossy": False}.get(self.verdict)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _token_index(token_chars: Sequence[int], char: int) -> int | None:
    """The baseline token holding character ``char`` (0-based), from its chunk sizes."""
    if not token_chars:
        return None
    for i, end in enumerate(accumulate(token_chars)):
        if char < end:
            return i
    return len(token_chars)


def _divergence(base: RequestOutput, spec: RequestOutput) -> Divergence:
    at = _common_prefix(base.text, spec.text)
    lo = max(0, at - CONTEXT_CHARS)
    return Divergence(
        prompt_sha256=base.prompt_sha256,
        char=at,
        token=_token_index(base.token_chars, at),
        baseline=base.text[lo : at + CONTEXT_CHARS],
        speculative=spec.text[lo : at + CONTEXT_CHARS],
    )


def top2(entry: TokenLogprobs) -> list[TopLogprob]:
    """The two best candidates by logprob, each token once; on an exact tie the token the
    engine emitted first (a greedy pick is one of the tied top-1s whatever order the engine
    lists them in: vLLM lists the sampled token first, SGLang 0.5.17 on an H100 listed the
    other first at all 62 exact ties of tests/fixtures/gpu-runs/tiny-sglang-gpu-determinism),
    then the engine's order."""
    seen: set[str] = set()
    out: list[TopLogprob] = []
    for t in sorted(entry.top, key=lambda t: (-t.logprob, t.token != entry.token)):
        if t.token not in seen:
            seen.add(t.token)
            out.append(t)
    return out[:2]


def _least_gap(entry: TokenLogprobs, token: str) -> float:
    """How far below ``entry``'s best candidate ``token`` lies: exact when listed, else the
    least it can be (at or below the lowest listed candidate)."""
    listed = {t.token: t.logprob for t in entry.top}
    best = max(listed.values())
    return best - listed.get(token, min(listed.values()))


def classify(
    base: LogprobProbe,
    spec: LogprobProbe,
    source: Literal["measured", "probe"] = "probe",
    threshold: float = NEAR_TIE_NATS,
) -> TokenCheck | None:
    """Near-tie, real or unclassified at the first token where the two probes differ; None
    when their tokens agree throughout."""

    def unclassified(why: str, token: int | None = None) -> TokenCheck:
        return TokenCheck(
            prompt_sha256=base.prompt_sha256,
            source=source,
            verdict="unclassified",
            token=token,
            why=why,
        )

    if base.error or spec.error:
        return unclassified(f"probe failed: {base.error or spec.error}")
    pairs = zip(base.tokens, spec.tokens, strict=False)  # a shorter probe is said below
    at = next((i for i, (b, s) in enumerate(pairs) if b.token != s.token), None)
    if at is None:
        if len(base.tokens) == len(spec.tokens):
            if base.output_sha256 == spec.output_sha256:
                return None
            return unclassified("the texts differ where the logprob tokens agree")
        return unclassified("one probe has fewer tokens", min(len(base.tokens), len(spec.tokens)))
    b, s = base.tokens[at], spec.tokens[at]
    bt, st = top2(b), top2(s)
    if len(bt) < 2 or len(st) < 2:
        return unclassified("fewer than two candidates at the differing token", at)
    gap_b, gap_s = bt[0].logprob - bt[1].logprob, st[0].logprob - st[1].logprob
    check = TokenCheck(
        prompt_sha256=base.prompt_sha256,
        source=source,
        verdict="real",
        token=at,
        baseline_token=b.token,
        speculative_token=s.token,
        baseline_gap=gap_b,
        speculative_gap=gap_s,
        why="",
    )
    if st[0].token != s.token:
        why = f"the speculative run's token is not its own top-1 ({st[0].token!r} is)"
    elif bt[0].token != b.token:
        why = f"the baseline's token is not its own top-1 ({bt[0].token!r} is)"
    elif max(gap_b, gap_s) > threshold:
        why = f"top-2 gap {max(gap_b, gap_s):.4f} nats > {threshold} nats"
    elif bt[1].token != s.token or st[1].token != b.token:
        # the other run's token ranks below this run's runner-up: real when it lies provably
        # beyond the threshold in one run; unlisted, it may sit just under the listed ones
        least = max(_least_gap(b, s.token), _least_gap(s, b.token))
        if least <= threshold:
            why = (
                "the two tokens are not each other's runner-up, but each lies within "
                f"{least:.4f} nats of the other run's top-1 as far as its listed candidates "
                "show (three or more tied?): more top logprobs would tell"
            )
            return check.model_copy(update={"verdict": "unclassified", "why": why})
        why = f"the two tokens are not each other's runner-up (at least {least:.4f} nats apart)"
    else:
        return check.model_copy(
            update={
                "verdict": "near-tie",
                "why": f"top-1 and top-2 swap, gaps {gap_b:.4f} and {gap_s:.4f} nats",
            }
        )
    return check.model_copy(update={"why": why})


def _checks(
    base: RunView, run: RunView, differing: list[tuple[RequestOutput, RequestOutput]]
) -> tuple[int, list[TokenCheck]]:
    """(usable probe pairs, checks): every differing measured pair, judged by the probes of its
    prompt when they reproduce both outputs, then every differing probe pair not judged
    already. A failed probe only matters where a divergence needed it."""
    base_probes = {p.prompt_sha256: p for p in base.probes}
    pairs = {
        p.prompt_sha256: (base_probes[p.prompt_sha256], p)
        for p in run.probes
        if p.prompt_sha256 in base_probes
    }
    usable = {sha: pair for sha, pair in pairs.items() if not (pair[0].error or pair[1].error)}
    checks: list[TokenCheck] = []
    for b, s in differing:
        pair = pairs.get(b.prompt_sha256)
        if pair is None:
            why = "no logprob probe of this prompt in both runs"
        elif pair[0].error or pair[1].error:
            why = f"probe failed: {pair[0].error or pair[1].error}"
        elif (pair[0].output_sha256, pair[1].output_sha256) != (b.output_sha256, s.output_sha256):
            why = "the probes' outputs differ from the measured ones"
        else:
            check = classify(*pair, source="measured")
            if check is not None:
                checks.append(check)
                continue
            why = "the probes agree token by token where the measured texts differ"
        checks.append(
            TokenCheck(
                prompt_sha256=b.prompt_sha256, source="measured", verdict="unclassified", why=why
            )
        )
    judged = {c.prompt_sha256 for c in checks}
    for sha, (pb, ps) in usable.items():
        if sha not in judged and pb.output_sha256 != ps.output_sha256:
            check = classify(pb, ps, source="probe")
            if check is not None:
                checks.append(check)
    return len(usable), checks


def lossless(runs: Sequence[RunView], *, every_method: bool = False) -> list[LosslessRow]:
    """One row per valid speculative run (current attempts only), in the runs' order. A lossy
    verifier or a SYNTHETIC ACCEPTANCE control makes no lossless claim (issue 48): left out
    unless ``every_method`` (the accuracy gate compares every run's output)."""
    current = [r for r in runs if r.attempt is None and r.valid]
    rows: list[LosslessRow] = []
    for run in current:
        if run.method == "NONE" or not (every_method or run.lossless_method):
            continue
        base = next(
            (
                b
                for b in current
                if b.method == "NONE"
                and b.engine == run.engine
                and b.concurrency == run.concurrency
            ),
            None,
        )
        row = LosslessRow(
            config=run.config,
            engine=run.engine,
            method=run.method,
            concurrency=run.concurrency,
            baseline=base.config if base else None,
            requests=len(run.outputs),
            matched=0,
            identical=0,
        )
        if base is None:
            rows.append(row.model_copy(update={"note": "no baseline run at this concurrency"}))
            continue
        by_prompt = {o.prompt_sha256: o for o in base.outputs}
        pairs = [
            (by_prompt[o.prompt_sha256], o) for o in run.outputs if o.prompt_sha256 in by_prompt
        ]
        same = [p for p in pairs if p[0].output_sha256 == p[1].output_sha256]
        differing = [p for p in pairs if p[0].output_sha256 != p[1].output_sha256]
        note = None
        if not pairs:
            note = (
                "no request shares a prompt with the baseline: the runs used different prompts "
                "(a matrix run shares one prompt seed; specbench run takes --prompt-seed)"
            )
        first = min((_divergence(b, s) for b, s in differing), key=lambda d: d.char, default=None)
        probed, checks = _checks(base, run, differing)
        rows.append(
            row.model_copy(
                update={
                    "matched": len(pairs),
                    "identical": len(same),
                    "first": first,
                    "note": note,
                    "probed": probed,
                    "checks": tuple(checks),
                }
            )
        )
    return rows
