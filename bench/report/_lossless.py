"""The lossless check: under greedy decoding, speculation must not change a single output token.

For each speculative run and concurrency level, the baseline is the same engine's run without
speculation at the same level. Requests are matched by their whole prompt (``prompt_sha256``,
nonce included): with a prompt seed every configuration got the same prompts in the same
order. A matched pair is identical when its output hashes agree; otherwise the report shows
where the texts part, in characters and in the baseline's streamed tokens (a run without
speculation streams one token per content chunk). A divergence is evidence, not a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

from pydantic import Field

from bench.core import StrictModel
from bench.report._model import RequestOutput, RunView

CONTEXT_CHARS = 24  # text shown on each side of a divergence


class Divergence(StrictModel):
    prompt_sha256: str
    char: int = Field(description="first differing character offset")
    token: int | None = None
    baseline: str
    speculative: str


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

    @property
    def lossless(self) -> bool | None:
        """True when every matched request was identical; None when nothing could be matched."""
        if self.matched == 0:
            return None
        return self.identical == self.matched


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


def lossless(runs: Sequence[RunView]) -> list[LosslessRow]:
    """One row per valid speculative run (current attempts only), in the runs' order."""
    current = [r for r in runs if r.attempt is None and r.valid]
    rows: list[LosslessRow] = []
    for run in current:
        if run.method == "NONE":
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
        rows.append(
            row.model_copy(
                update={
                    "matched": len(pairs),
                    "identical": len(same),
                    "first": first,
                    "note": note,
                }
            )
        )
    return rows
