"""Acceptance length both ways, and the per-position profile (issue 48).

- **Per verify step**: ``1 + accepted / drafts`` from the engine's counters over the measured
  windows: every verify step weighs the same (the counters' and the engines' own figure).
- **Per request**: the mean over measured requests of each request's own ``1 + accepted /
  verify steps``, from the engine's per-request counts (SGLang ``spec_tokens_details``, vLLM
  ``--per-request-spec-decode-metrics``): every request weighs the same, so a long request with
  many steps counts once. The two differ whenever acceptance differs between requests.
- **Per position** (where the counters count each position: vLLM's
  ``spec_decode_num_accepted_tokens_per_pos``): the marginal rate ``accepted at position i /
  drafts`` (the share of verify steps that accepted at least i+1 drafts) and the conditional
  rate ``accepted at i / accepted at i-1``; check: ``1 + sum of marginals`` equals the per-step
  acceptance length (both come from counters a consistent engine keeps in step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bench.core import StrictModel
from bench.report._model import RunView

#: the check's tolerance: the per-position counters and the accepted counter are scraped as one
#: snapshot, so they agree to rounding
CHECK_TOLERANCE: Final = 1e-6


class PositionRate(StrictModel):
    position: int  # 1-based
    accepted: int
    marginal: float
    conditional: float | None


class ProfileRow(StrictModel):
    config: str
    engine: str
    method: str
    concurrency: int
    k: int | None = None
    drafts: int = 0
    drafted_per_step: float | None = None
    per_step_al: float | None = None
    per_request_al: float | None = None
    requests: int = 0
    positions: tuple[PositionRate, ...] = ()
    check_al: float | None = None
    check_ok: bool | None = None
    labels: tuple[str, ...] = ()


def positions(per_pos: Sequence[int], drafts: int) -> tuple[PositionRate, ...]:
    """Marginal and conditional rates of each position."""
    out, before = [], drafts
    for i, n in enumerate(per_pos):
        out.append(
            PositionRate(
                position=i + 1,
                accepted=n,
                marginal=n / drafts,
                conditional=n / before if before else None,
            )
        )
        before = n
    return tuple(out)


def profile_row(run: RunView) -> ProfileRow | None:
    """One valid speculative run's profile (None without counted drafts)."""
    drafts = run.drafts or 0
    if run.method == "NONE" or not run.valid or drafts == 0 or run.accepted_tokens is None:
        return None
    per_step = 1.0 + run.accepted_tokens / drafts
    pos = positions(run.accepted_per_position, drafts)
    check = 1.0 + sum(p.marginal for p in pos) if pos else None
    req = run.request_accept_lengths
    return ProfileRow(
        config=run.config,
        engine=run.engine,
        method=run.method,
        concurrency=run.concurrency,
        k=run.spec_tokens,
        drafts=drafts,
        drafted_per_step=(run.draft_tokens or 0) / drafts,
        per_step_al=per_step,
        per_request_al=sum(req) / len(req) if req else None,
        requests=len(req),
        positions=pos,
        check_al=check,
        check_ok=abs(check - per_step) <= CHECK_TOLERANCE if check is not None else None,
        labels=tuple(run.speculation.labels) if run.speculation else (),
    )


def profile_rows(runs: Sequence[RunView]) -> list[ProfileRow]:
    rows = [profile_row(r) for r in runs if r.attempt is None]
    return [r for r in rows if r is not None]
