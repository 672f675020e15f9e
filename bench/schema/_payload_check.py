"""``specbench validate``'s checks of a payload: its schema, its own consistency, and every
figure against its evidence (bench/schema/_invariants.py).

Apart from _payload.py so that the models import nothing of the checks that read them: the
invariants import the models, this module imports both (no import cycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from bench.core import InputError, StrictModel, read_json
from bench.schema._invariants import payload_findings
from bench.schema._payload import Payload


class Problem(StrictModel):
    """One finding of ``specbench validate``: the file, the JSON path and the reason."""

    file: str
    path: str
    reason: str
    severity: Literal["error", "warning"] = "error"


def check_payload_file(path: Path) -> list[Problem]:
    """The offline dry-run validator: schema errors (all of them, each with its JSON path), then
    payload-level consistency. A payload whose validity block says invalid is an error."""
    f = str(path)
    try:
        data = read_json(path, what="payload")
    except InputError as err:
        why = err.reason.removeprefix("cannot read the payload: ").removeprefix(
            "cannot read JSON: "
        )
        return [Problem(file=f, path="$", reason=f"cannot read JSON: {why}")]
    try:
        p = Payload.model_validate(data)
    except ValidationError as err:
        return [
            Problem(
                file=f,
                path="$" + "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in e["loc"]),
                reason=e["msg"],
            )
            for e in err.errors()
        ]
    return check_payload(p, f)


def check_payload(p: Payload, f: str = "<payload>") -> list[Problem]:
    out: list[Problem] = []

    def err(where: str, reason: str, severity: Literal["error", "warning"] = "error") -> None:
        out.append(Problem(file=f, path=where, reason=reason, severity=severity))

    ev = p.evidence
    if not ev.validity.valid:
        why = "; ".join(
            f"{r.code}: {r.message}" for r in ev.validity.reasons if r.severity == "invalid"
        )
        err("$.evidence.validity.valid", f"run is invalid: {why}")
    if p.simulated:
        err("$.simulated", "produced against the emulator (SIMULATED): not publishable", "warning")
    wl = ev.workload
    if p.promptTokens != wl.prompt_tokens:
        err("$.promptTokens", f"{p.promptTokens} != evidence.workload.prompt_tokens")
    if p.outputTokens != wl.max_tokens:
        err("$.outputTokens", f"{p.outputTokens} != evidence.workload.max_tokens")
    if p.engineFlags.concurrency != wl.concurrency:
        err("$.engineFlags.concurrency", "differs from evidence.workload.concurrency")
    measured = [it for it in ev.iterations if not it.warmup]
    # a prompt set's categories are each measured as their own windows of `iterations`
    windows = len(wl.prompt_set.prompts) if wl.prompt_set is not None else 1
    if len(measured) != wl.iterations * windows:
        per = f" x {windows} categories" if wl.prompt_set is not None else ""
        err(
            "$.evidence.iterations",
            f"{len(measured)} measured iterations, workload says {wl.iterations}{per}",
        )
    if ev.validity.valid and not p.samples:
        err("$.samples", "a valid run needs at least one sample")
    for i, it in enumerate(ev.iterations):
        if it.warmup or not it.valid:
            continue
        for k, r in enumerate(it.requests):
            where = f"$.evidence.iterations[{i}].requests[{k}]"
            if r.completion_tokens != p.outputTokens:
                err(where + ".completion_tokens", f"{r.completion_tokens} != outputTokens")
            if r.first_token_at is None or r.last_token_at is None or r.decode_tok_s is None:
                err(where, "valid request without token times or decode rate")
    # every figure against its own evidence (issue 47)
    out += [Problem(file=f, path=w, reason=r) for w, r in payload_findings(p)]
    return out
