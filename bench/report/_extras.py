"""The payload's issue-48 records as the report's RunView sees them: how the engine verified its
drafts, a control's forced acceptance, the accuracy task, the GPUs, and each request's own
acceptance length from the engine's per-request counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core import InputError, read_json_model
from bench.schema import PLAN_FILE, Payload, PlanRecord


def read_plan(artifacts: Path) -> PlanRecord | None:
    """plan.json of a run (None: a run from before it, or an unreadable one: the appendix then
    says the wall time is unknown)."""
    path = artifacts / PLAN_FILE
    if not path.is_file():
        return None
    try:
        return read_json_model(path, PlanRecord)
    except InputError:
        return None


def request_accept_lengths(p: Payload) -> tuple[float, ...]:
    """Each valid measured request's acceptance length from the engine's own counts:
    1 + accepted / verify steps (the same definition as the counters', per request)."""
    out = []
    for it in p.evidence.iterations:
        if it.warmup:
            continue
        for r in it.requests:
            st = r.spec_tokens
            if r.valid and st is not None and st.verify_steps > 0:
                out.append(1.0 + st.accepted_tokens / st.verify_steps)
    return tuple(out)


def extra_fields(p: Payload) -> dict[str, Any]:
    """RunView's issue-48 fields of one payload."""
    ev = p.evidence
    return {
        "tensor_parallel": p.engineFlags.tensorParallel,
        "speculation": ev.speculation,
        "synthetic": ev.synthetic,
        "accuracy": ev.accuracy,
        "request_accept_lengths": request_accept_lengths(p),
    }
