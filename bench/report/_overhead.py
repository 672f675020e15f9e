"""Engine overhead at fixed acceptance (issue 48): each SYNTHETIC ACCEPTANCE control against the
configuration whose measured acceptance it forced and the same engine's baseline.

A speculative run's decode speedup over its baseline is what its acceptance buys (each verify
step emits the mean acceptance length AL of tokens, so at equal step cost it would be AL x)
divided by what speculation costs (a speculative step takes ``step cost`` times a plain step):
``speedup = AL / step cost``. The control measures the step cost at the acceptance the real
drafter reached, whatever its drafter proposes; the real run's speedup over the control's says
what the acceptance length alone does not explain (how acceptance is spread over steps and
requests, a drafter whose cost varies with the text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bench.core import StrictModel
from bench.report._model import RunView

#: the control's observed acceptance length must lie within this share of the one it was set to
#: (it is sampled per step, so a short window is never exact)
AL_TOLERANCE: Final = 0.05


class OverheadRow(StrictModel):
    control: str
    of: str
    engine: str
    method: str
    concurrency: int
    baseline: str | None = None
    baseline_tok_s: float | None = None
    real_tok_s: float | None = None
    real_al: float | None = None
    real_speedup: float | None = None
    set_al: float
    knob: str
    control_al: float | None = None
    control_tok_s: float | None = None
    control_speedup: float | None = None
    step_cost: float | None = None
    real_vs_control: float | None = None
    al_matches: bool | None = None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _row(ctl: RunView, runs: Sequence[RunView]) -> OverheadRow:
    assert ctl.synthetic is not None
    same = [r for r in runs if r.concurrency == ctl.concurrency]
    real = next((r for r in same if r.config == ctl.synthetic.of), None)
    base = next((r for r in same if r.engine == ctl.engine and r.method == "NONE"), None)
    base_tok = base.decode.mean if base else None
    c_al = ctl.mean_acceptance_length
    c_speed = _ratio(ctl.decode.mean, base_tok)
    r_speed = _ratio(real.decode.mean, base_tok) if real else None
    set_al = ctl.synthetic.acceptance_length
    return OverheadRow(
        control=ctl.config,
        of=ctl.synthetic.of,
        engine=ctl.engine,
        method=ctl.method,
        concurrency=ctl.concurrency,
        baseline=base.config if base else None,
        baseline_tok_s=base_tok,
        real_tok_s=real.decode.mean if real else None,
        real_al=real.mean_acceptance_length if real else None,
        real_speedup=r_speed,
        set_al=set_al,
        knob=ctl.synthetic.knob,
        control_al=c_al,
        control_tok_s=ctl.decode.mean,
        control_speedup=c_speed,
        step_cost=_ratio(c_al, c_speed),
        real_vs_control=_ratio(r_speed, c_speed),
        al_matches=abs(c_al - set_al) <= AL_TOLERANCE * set_al if c_al is not None else None,
    )


def overhead_rows(runs: Sequence[RunView]) -> list[OverheadRow]:
    """One row per valid control run (current attempts), against its source and baseline at
    the same concurrency."""
    current = [r for r in runs if r.attempt is None and r.valid]
    return [_row(r, current) for r in current if r.synthetic is not None]
