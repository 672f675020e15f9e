"""Is a run folder one run? The checks ``report``, ``compare`` and ``publish`` make before they
state anything about a folder (issue 42, class 6).

A matrix folder (one with ``experiment.lock.json``) is one run: every payload carries the lock's
run id and its emulate mode, is named ``<config>-c<k>.json`` (``.<attempt>`` before ``.json``
for a superseded attempt) after what it holds, and is a configuration and level the lock lists;
no configuration and level has two payloads; every payload SHA256SUMS or status.json lists is
there; status.json is the lock's run. A folder that breaks one of these is refused (exit 2),
naming the artifact: a report of it would state a claim twice, mix two runs or leave a
configuration out without saying so. A payload of a schema this specbench does not read (a
newer one) is refused too: listing it as "failing validation" would make a newer run look
broken.

A payload that is merely unreadable (truncated, not JSON, fails its schema) is not a refusal:
the report lists it (``Unreadable``), and every summary accounts for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.core import InputError, read_json
from bench.schema import (
    PAYLOAD_SCHEMA,
    Hardware,
    Payload,
    RunLock,
    RunStatus,
    lock_findings,
    target_of,
    workload_differences,
    workload_of,
)

_STEM = re.compile(r"^(?P<config>.+)-c(?P<c>\d+)(?:\.(?P<attempt>[A-Za-z0-9_-]+))?$")


@dataclass(frozen=True)
class Read:
    """One payload the report read: its path under the folder and what it holds."""

    rel: str
    payload: Payload
    config: str
    concurrency: int
    attempt: str | None


def stem_parts(stem: str) -> tuple[str, int, str | None] | None:
    """``<config>-c<k>[.<attempt>]`` -> (config, k, attempt); None for another name."""
    m = _STEM.match(stem)
    return (m.group("config"), int(m.group("c")), m.group("attempt")) if m else None


def refuse_foreign_schema(path: Path, rel: str) -> None:
    """Called for a payload that did not validate: one that names another payload schema (a
    newer specbench wrote it) is refused, naming the file; a broken one is left to be listed."""
    try:
        data = read_json(path, what="payload")
    except InputError:
        return
    version = data.get("schemaVersion") if isinstance(data, dict) else None
    if isinstance(version, str) and version != PAYLOAD_SCHEMA:
        raise InputError(
            rel,
            f"schemaVersion {version!r}: this specbench reads {PAYLOAD_SCHEMA} only (a newer "
            "specbench wrote it?): render the report with the specbench that made the run",
        )


def check_one_run(
    d: Path,
    lock: RunLock | None,
    status: RunStatus | None,
    read: Sequence[Read],
    listed: dict[str, str],
    hardware: Hardware | None = None,
) -> None:
    """Refuse (InputError, exit 2, the artifact named) a folder that is not one run."""

    def where(rel: str) -> str:
        return str(d / rel)  # the artifact as the user can find it

    if lock is not None and status is not None and status.run_id != lock.run_id:
        raise InputError(
            where("status.json"),
            f"run {status.run_id!r}, but experiment.lock.json is run {lock.run_id!r}: the files "
            "of two runs in one folder",
        )
    seen: dict[tuple[str, int, str | None], str] = {}
    for r in read:
        run_id = r.payload.evidence.run.run_id
        if lock is not None:
            if run_id is not None and run_id != lock.run_id:
                raise InputError(
                    where(r.rel),
                    f"a payload of run {run_id!r}, but experiment.lock.json is run "
                    f"{lock.run_id!r}: the payloads of another run do not belong in this folder",
                )
            if r.payload.simulated != lock.simulated:
                what = "SIMULATED (emulator output)" if r.payload.simulated else "a real run's"
                run = "a real run" if not lock.simulated else "an emulated (SIMULATED) run"
                raise InputError(
                    where(r.rel),
                    f"{what} payload in {run} (experiment.lock.json simulated: "
                    f"{str(lock.simulated).lower()}): emulated and real payloads never mix",
                )
            _check_named(where(r.rel), r, lock)
        key = (r.config, r.concurrency, r.attempt)
        if key in seen:
            attempt = f" (attempt {r.attempt})" if r.attempt else ""
            raise InputError(
                where(r.rel),
                f"a second payload of {r.config} at concurrency {r.concurrency}{attempt}, "
                f"beside {seen[key]}: one configuration and level is one payload (a copy "
                "would state every claim twice); remove one",
            )
        seen[key] = r.rel
    _check_listed(d, status, listed)
    _check_same_run(d, lock, read, hardware)


def _check_same_run(
    d: Path, lock: RunLock | None, read: Sequence[Read], hardware: Hardware | None
) -> None:
    """Every payload ran on the run's hardware (hardware.json) and measured the run's workload
    (the lock's, and the other payloads'): a speedup or a ranking never sets two workloads or
    two machines side by side (issue 47, class 3)."""
    if not read:
        return
    first = read[0]
    for r in read:
        where = str(d / r.rel)
        if hardware is not None and r.payload.hardware != hardware:
            raise InputError(
                f"{where}: hardware",
                f"{_hardware_line(r.payload.hardware)}, but hardware.json (the run's machine) is "
                f"{_hardware_line(hardware)}: a payload of another machine does not belong here",
            )
        if lock is not None:
            found = lock_findings(r.payload, lock, r.config)
            if found:
                field, why = found[0]
                raise InputError(
                    f"{where}: {field}", f"{why}: the payload measured another workload"
                )
        a = workload_of(first.payload, target_of(first.payload, lock, first.config))
        b = workload_of(r.payload, target_of(r.payload, lock, r.config))
        for key in workload_differences(a, b):
            raise InputError(
                f"{where}: {key}",
                f"{b[key]!r}, but {first.rel} measured {a[key]!r}: one run folder is one "
                "workload (a speedup against another workload means nothing)",
            )
        _check_same_tensors(where, first, r)


def _served_tensors(r: Read) -> str | None:
    served = r.payload.evidence.served
    return served.target.tensors_sha256 if served is not None else None


def _check_same_tensors(where: str, first: Read, r: Read) -> None:
    """Payloads that say what their server read served one target's tensors, whatever the
    layout each engine loaded it in."""
    a, b = _served_tensors(first), _served_tensors(r)
    if a is not None and b is not None and a != b:
        raise InputError(
            f"{where}: evidence.served.target.tensors_sha256",
            f"{b}, but {first.rel}'s server read tensors {a}: one run folder is one target",
        )


def _hardware_line(hw: Hardware) -> str:
    return f"{hw.gpuCount}x {hw.gpuName}, {hw.cpu}, {hw.ramGb:g} GB RAM"


def _check_named(where: str, r: Read, lock: RunLock) -> None:
    exp = lock.experiment
    cfg = next((c for c in exp.configurations if c.name == r.config), None)
    if cfg is None:
        raise InputError(
            where,
            f"configuration {r.config!r} is not in the run's experiment.lock.json (has: "
            f"{', '.join(exp.names())}): a payload of another experiment",
        )
    if r.concurrency not in exp.levels_for(cfg):
        raise InputError(
            where,
            f"{r.config} at concurrency {r.concurrency}, a level experiment.lock.json does not "
            f"list for it ({exp.levels_for(cfg)})",
        )
    name = Path(r.rel).stem
    parts = stem_parts(name)
    if parts is None or parts[:2] != (r.config, r.concurrency):
        raise InputError(
            where,
            f"holds {r.config} at concurrency {r.concurrency}, but the matrix names that payload "
            f"{r.config}-c{r.concurrency}.json: renamed or copied by hand",
        )


def _check_listed(d: Path, status: RunStatus | None, listed: dict[str, str]) -> None:
    """Every payload the run listed is there."""
    wanted = {rel: "SHA256SUMS" for rel in listed if rel.startswith("payloads/")}
    for name, cs in status.configurations.items() if status is not None else ():
        for p in cs.payloads:
            wanted.setdefault(f"payloads/{p}", f"status.json (configuration {name})")
    for rel, by in sorted(wanted.items()):
        if not (d / rel).is_file():
            raise InputError(
                str(d / rel),
                f"listed in {by} but missing: the folder no longer holds what the run wrote "
                "(restore the payload, or run `specbench matrix --resume` to measure it again)",
            )
