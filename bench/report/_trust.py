"""Which payloads of a run folder a report may use (issue 47, classes 2 and 3).

A payload is used for a figure only when nothing contradicts it:

- its own evidence agrees with every figure it states (``check_payload``: the offline validator,
  bench/schema/_invariants.py among it);
- SHA256SUMS vouches for its bytes: a payload that differs from its entry (edited or truncated
  after the run wrote it), or that a folder with a SHA256SUMS does not list (added by hand), is
  not the run's.

Any other payload is listed (``Unreadable``, with the reason, at the top of the report and under
Correctness issues), counted in every summary and used for no figure; ``publish`` refuses the
folder. Files SHA256SUMS does not list are named too (``unvouched``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import sha256_file
from bench.report._folder import Read, stem_parts
from bench.report._model import Unreadable
from bench.schema import SUMS, Experiment, check_payload

#: the folder `specbench report DIR` writes into by default: specbench's output, not the run's
REPORT_DIR = "report"


def contradictions(r: Read, d: Path) -> list[str]:
    """The validator's errors on a payload, but for the verdict 'this run is invalid' (an
    invalid run is evidence the report shows, not a file that contradicts itself)."""
    return [
        f"{p.path}: {p.reason}"
        for p in check_payload(r.payload, str(d / r.rel))
        if p.severity == "error" and p.path != "$.evidence.validity.valid"
    ]


@dataclass
class Digests:
    """sha256 of each file of a run folder, each computed once per report (a run's logs can
    be large, and the file list, the payloads' trust and the notice each need them)."""

    root: Path
    known: dict[str, str] = field(default_factory=dict)

    def __call__(self, rel: str) -> str:
        if rel not in self.known:
            self.known[rel] = sha256_file(self.root / rel)
        return self.known[rel]


def distrust(r: Read, d: Path, listed: dict[str, str], digest: Digests) -> str | None:
    """Why payload ``r`` may not be used (None: it may)."""
    found = contradictions(r, d)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        return f"its own evidence contradicts it: {found[0]}{more}"
    if not listed:
        return None  # no manifest (a folder of `specbench run` payloads)
    want = listed.get(r.rel)
    if want is None:
        return f"not listed in {SUMS}: the run did not write it (added by hand?)"
    if digest(r.rel) != want:
        return f"differs from its {SUMS} entry: edited or truncated after the run wrote it"
    return None


def split_trusted(
    d: Path, read: Sequence[Read], listed: dict[str, str], exp: Experiment | None, digest: Digests
) -> tuple[list[Read], list[Unreadable]]:
    """The payloads a report may use, and the others, each with its reason."""
    kept: list[Read] = []
    out: list[Unreadable] = []
    for r in read:
        why = distrust(r, d, listed, digest)
        if why is None:
            kept.append(r)
        else:
            out.append(excluded(r.rel, f"{why}. Not used for any figure", exp))
    return kept, out


def excluded(rel: str, reason: str, exp: Experiment | None) -> Unreadable:
    """A payload no figure uses, with what its name and the lock say it was meant to hold."""
    parts = stem_parts(Path(rel).stem)
    cfg = (
        next((c for c in exp.configurations if parts and c.name == parts[0]), None)
        if exp is not None
        else None
    )
    return Unreadable(
        path=rel,
        reason=reason,
        config=parts[0] if parts else None,
        concurrency=parts[1] if parts else None,
        method=cfg.method if cfg is not None else None,
    )


def unvouched(d: Path, listed: dict[str, str], matrix: bool, digest: Digests) -> tuple[str, ...]:
    """What the report must say before any figure, beside the payloads it does not use: the
    run's other files that SHA256SUMS does not list, that differ from their entry or that are
    gone (the lock, hardware.json, the logs: what the figures are read with), specbench's own
    report folder apart; or a matrix folder with no SHA256SUMS at all."""
    if not listed:
        return (f"{SUMS} is missing: nothing vouches for the run's files",) if matrix else ()
    present = {
        f.relative_to(d).as_posix(): f
        for f in sorted(d.rglob("*"))
        if f.is_file() and f.name != SUMS and f.relative_to(d).parts[0] != REPORT_DIR
    }
    out = []
    for rel in sorted(set(present) | set(listed)):
        if rel.startswith("payloads/"):
            continue  # a payload SHA256SUMS does not vouch for is used for nothing (distrust)
        if rel not in listed:
            out.append(f"{rel}: not listed in {SUMS}")
        elif rel not in present:
            out.append(f"{rel}: listed in {SUMS}, missing")
        elif digest(rel) != listed[rel]:
            out.append(f"{rel}: differs from its {SUMS} entry (edited after the run wrote it)")
    return tuple(out)
