"""A SYNTHETIC ACCEPTANCE control's settings, made when it is about to start (issue 48).

The control (``<name>-synthetic``, bench.engines expands it after ``<name>``) runs the same
engine and flags as its source with the engine's own knob forcing the acceptance measured for
the source in this run: pooled over the source's valid payloads (every level), its mean
acceptance length ``1 + accepted / drafts`` and, where the counters give them, its per-position
unconditional rates ``accepted at position i / drafts``. Nothing is written by hand: a source
with no valid measured acceptance leaves its control failed, with why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.core import InputError, RunError
from bench.engines import synthetic_knob
from bench.matrix._artifacts import Artifacts
from bench.schema import Configuration, Experiment, SyntheticAcceptance, read_payload


@dataclass(frozen=True)
class Control:
    """The configuration as it is started, its record, and the environment its knob needs."""

    cfg: Configuration
    record: SyntheticAcceptance | None = None
    env: dict[str, str] = field(default_factory=dict)


def measured_acceptance(
    arts: Artifacts, exp: Experiment, name: str
) -> tuple[float, list[float], str]:
    """``name``'s pooled acceptance in this run's artifacts: (mean acceptance length,
    per-position unconditional rates ([] unless every payload counted them), the source)."""
    cfg = exp.configuration(name)
    deltas = []
    for k in exp.levels_for(cfg):
        path = arts.payload(name, k)
        try:
            p = read_payload(path) if path.is_file() else None
        except InputError:
            p = None
        acc = p.evidence.acceptance if p is not None else None
        if p is not None and p.evidence.validity.valid and acc is not None and acc.drafts:
            deltas.append((path.name, acc))
    drafts = sum(a.drafts for _, a in deltas)
    if drafts == 0:
        raise RunError(
            f"no valid measured acceptance of {name} in this run to force: its control needs "
            f"{name} measured first (it runs before its control in the experiment's order)"
        )
    accepted = sum(a.accepted_tokens for _, a in deltas)
    rates: list[float] = []
    if all(a.accepted_per_position for _, a in deltas):
        width = max(len(a.accepted_per_position) for _, a in deltas)
        per_pos = [0] * width
        for _, a in deltas:
            for i, n in enumerate(a.accepted_per_position):
                per_pos[i] += n
        rates = [n / drafts for n in per_pos]
    used = ", ".join(n for n, _ in deltas)
    source = f"{used}: {accepted} accepted draft tokens over {drafts} drafts"
    return 1.0 + accepted / drafts, rates, source


def control(arts: Artifacts, exp: Experiment, cfg: Configuration) -> Control:
    """``cfg`` unchanged, or, for a control, its flags and environment with the synthetic
    acceptance of its source set, and the record every payload of it carries."""
    if cfg.synthetic_of is None:
        return Control(cfg)
    length, rates, source = measured_acceptance(arts, exp, cfg.synthetic_of)
    knob = synthetic_knob(cfg, length, rates)
    record = SyntheticAcceptance(
        of=cfg.synthetic_of,
        acceptance_length=round(length, 6),
        rates=[round(r, 6) for r in knob.rates],
        knob=knob.knob,
        source=source,
    )
    return Control(cfg.model_copy(update={"args": knob.args}), record, knob.env)
