"""Read a matrix run's artifacts folder into the report's ``RunSet``: every file read and checked
here (payloads, logs, lock, status, SHA256SUMS, hardware, provenance, the suite record), the
views built from them by ``bench.report._views``.

Payloads are the primary source (engine, method, figures, verdict) and carry what was run:
the server argv, the ``docker run`` line and the admission cap, recorded by the matrix when it
started each server (``evidence.launch``). ``experiment.lock.json`` (a ``RunLock``) gives what
payloads do not carry: the configurations' flags, deviations and concurrency levels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core import (
    InputError,
    exists,
    read_head,
    read_json_model,
    read_optional_json,
)
from bench.report._extras import read_plan
from bench.report._folder import Read, check_one_run, refuse_foreign_schema
from bench.report._machine import (
    cpu_kernel_table,
    hardware_tables,
    pins_table,
    provenance_tables,
    resolved_table,
    source_fields,
    what_ran_table,
)
from bench.report._model import (
    FileEntry,
    RunSet,
    SuiteView,
    Unreadable,
)
from bench.report._not_measured import not_measured
from bench.report._roofline import build_roofline
from bench.report._trust import Digests, excluded, split_trusted, unvouched
from bench.report._views import (
    experiment_infos,
    hardware_lines,
    in_experiment_order,
    payloads_in_order,
    recorded_commands,
    run_identity,
    run_ids,
    run_view,
    time_scale,
    unpinned,
    with_recorded_caps,
    workload_setup,
)
from bench.schema import (
    LOCK_FILE,
    STATUS_FILE,
    Experiment,
    Hardware,
    Payload,
    RunLock,
    RunStatus,
    SuiteRecord,
    check_payload,
    read_payload,
    read_sums,
    target_of,
    workload_of,
)

#: how much of a server log the report reads (the load lines it quotes come first)
MAX_LOG_BYTES = 64 * 1024 * 1024


def _read_json(path: Path) -> dict[str, Any] | None:
    """An optional JSON artifact: None when absent; a folder or a FIFO in its place, or a file
    that is not a JSON object, is refused (exit 2, the file named), never taken for absent."""
    data = read_optional_json(path)
    if data is not None and not isinstance(data, dict):
        raise InputError(str(path), "not a JSON object")
    return data


def _sums(path: Path) -> dict[str, str]:
    return read_sums(path) if exists(path) else {}


def _validator_verdict(payload: Payload, path: Path) -> str:
    """The offline validator's verdict in a few words: ``check_payload`` on the payload already
    read (what ``check_payload_file`` does after parsing, without parsing the file again)."""

    problems = check_payload(payload, str(path))
    errors = [p for p in problems if p.severity == "error"]
    if not errors:
        return "validator: pass"
    return f"validator: {len(errors)} error(s), first {errors[0].path}: {errors[0].reason}"


def _payload_files(d: Path) -> list[Path]:
    if not d.is_dir():
        raise InputError(str(d), "not a directory")
    pdir = d / "payloads"
    files = sorted(pdir.glob("*.json")) if pdir.is_dir() else []
    if not files:
        raise InputError(str(d), "no payloads/*.json: not a specbench artifacts folder")
    return files


def _logs(d: Path) -> dict[str, list[str]]:
    logs: dict[str, list[str]] = {}
    for lf in sorted((d / "logs").glob("*.log")) if (d / "logs").is_dir() else []:
        head = read_head(lf, MAX_LOG_BYTES, what="server log")
        logs[lf.stem] = head.decode("utf-8", errors="replace").splitlines()
    return logs


def _parse(
    files: list[Path], exp: Experiment | None
) -> tuple[list[Read], list[Unreadable], dict[str, str]]:
    """Every payload file parsed (``Read``) or listed as unreadable, with its verdict."""
    read: list[Read] = []
    unreadable: list[Unreadable] = []
    verdicts: dict[str, str] = {}
    for f in files:
        rel = f"payloads/{f.name}"
        try:
            p = read_payload(f)
        except InputError as err:
            refuse_foreign_schema(f, str(f))
            verdicts[rel] = f"FAILS validation: {err.reason}"
            unreadable.append(excluded(rel, err.reason, exp))
            continue
        config, attempt = run_identity(p, f.stem)
        read.append(Read(rel, p, config, p.engineFlags.concurrency, attempt))
    return read, unreadable, verdicts


def _verdict(r: Read, d: Path) -> str:
    rv = r.payload.evidence.validity
    codes = ", ".join(x.code for x in rv.reasons if x.severity == "invalid")
    verdict = _validator_verdict(r.payload, d / r.rel)
    verdict += "; run valid" if rv.valid else f"; run INVALID ({codes})"
    return verdict + ("; SIMULATED" if r.payload.simulated else "")


def _hardware(d: Path, read: list[Read]) -> Hardware | None:
    """hardware.json (a folder or a file that is not one: refused); else the payloads'."""
    path = d / "hardware.json"
    if exists(path):
        return read_json_model(path, Hardware)
    return read[0].payload.hardware if read else None


def _file_entries(
    d: Path, listed: dict[str, str], verdicts: dict[str, str], digest: Digests
) -> list[FileEntry]:
    files: list[FileEntry] = []
    for f in sorted(p for p in d.rglob("*") if p.is_file() and p.name != "SHA256SUMS"):
        rel = f.relative_to(d).as_posix()
        sha = digest(rel)
        want = listed.get(rel)
        verdict = verdicts.get(rel, "present")
        if want is None:
            verdict += "; not listed in SHA256SUMS" if listed else ""
        elif want != sha:
            verdict += "; SHA256 MISMATCH"
        files.append(FileEntry(path=rel, sha256=sha, listed_sha256=want, verdict=verdict))
    for rel in sorted(set(listed) - {f.path for f in files}):
        # a listed payload that is gone was refused above; any other file is stated missing
        files.append(FileEntry(path=rel, listed_sha256=listed[rel], verdict=MISSING))
    return files


def _usable(
    d: Path, read: list[Read], listed: dict[str, str], exp: Experiment | None, digest: Digests
) -> tuple[list[Read], list[Unreadable], dict[str, str]]:
    """The payloads a figure may use; the others listed with the reason (bench.report._trust)."""
    kept, excluded = split_trusted(d, read, listed, exp, digest)
    verdicts = {r.rel: _verdict(r, d) for r in read}
    for u in excluded:
        verdicts[u.path] = f"FAILS validation: {u.reason}"
    if not kept:
        first = excluded[0] if excluded else None
        where = str(d / first.path) if first else str(d / "payloads")
        raise InputError(where, f"no payload can be used: {first.reason if first else 'none'}")
    return kept, excluded, verdicts


def load_artifacts(artifacts_dir: Path) -> RunSet:
    """Read every artifact the report uses. A payload that cannot be read, that contradicts its
    own evidence or that SHA256SUMS does not vouch for is listed with the reason and used for
    no figure, instead of stopping the report; a folder that is not one run is refused."""
    d = artifacts_dir
    payload_files = _payload_files(d)
    logs = _logs(d)
    lock = _read_lock(d)
    exp = lock.experiment if lock is not None else None
    read, unreadable, verdicts = _parse(payload_files, exp)
    listed = _sums(d / "SHA256SUMS")
    hw = _hardware(d, read)
    status = _read_status(d)
    check_one_run(d, lock, status, read, listed, hw)
    if not read:
        raise InputError(str(d / "payloads"), "no payload passed validation")
    digest = Digests(d)
    kept, excluded, more = _usable(d, read, listed, exp, digest)
    verdicts |= more
    unreadable += excluded
    payloads = [r.payload for r in kept]
    runs = [run_view(r.payload, Path(r.rel).stem, logs) for r in kept]
    configs = with_recorded_caps(experiment_infos(exp) if exp is not None else (), runs)
    in_experiment_order(runs, configs)
    hw = hw or payloads[0].hardware
    prov = _read_json(d / "provenance.json")
    files = _file_entries(d, listed, verdicts, digest)
    commands, source = recorded_commands(runs, matrix=lock is not None)
    first = payloads[0]
    wl = first.evidence.workload
    drafts = {c.name: c.draft_model for c in configs}
    roof = build_roofline(d, exp, hw, tuple(runs), wl.prompt_tokens, wl.max_tokens, drafts)
    by_key = {r.key: p for r, p in zip(runs, payloads_in_order(runs, kept), strict=True)}
    tables = [
        *hardware_tables(hw),
        *cpu_kernel_table(by_key),
        *resolved_table(by_key),
        *what_ran_table(by_key),
        *(provenance_tables(prov) if prov else []),
        *(pins_table(lock) if lock is not None else []),
    ]
    title = (exp.title or exp.name) if exp is not None else f"Speculative decoding on {first.hfId}"
    return RunSet(
        plan=read_plan(d),
        source_kind="artifacts",
        source=str(d),
        title=title,
        experiment=exp.name if exp is not None else None,
        hf_id=first.hfId,
        model_revision=first.modelRevision,
        quantization=first.quantization,
        hardware_lines=hardware_lines(hw),
        provenance_lines=() if prov else ("provenance.json: absent from the artifacts",),
        **source_fields(prov),
        machine_tables=tuple(tables),
        roofline=roof,
        workload=workload_setup(first),
        measured_workload=workload_of(
            first, target_of(first, lock, first.evidence.run.config_name)
        ),
        configs=configs,
        runs=tuple(runs),
        files=tuple(files),
        commands=commands,
        commands_source=source,
        notes=(),
        emulator_time_scale=time_scale(lock),
        upstream_suite=read_suite(d / SUITE_RECORD),
        unreadable=tuple(sorted(unreadable, key=lambda u: u.path)),
        unvouched=unvouched(d, listed, lock is not None, digest),
        run_ids=run_ids(lock, payloads),
        unpinned=unpinned(lock),
        not_measured=not_measured(configs, status, runs, unreadable),
    )


#: where ``specbench matrix`` puts its copy of the SGLang upstream-suite record
SUITE_RECORD = "upstream/sglang-suite.json"


def read_suite(path: Path) -> SuiteView | None:
    """The upstream-suite record if the artifacts carry one (a SuiteRecord); a record that does
    not validate stops the report with exit 2 and the field."""
    if not exists(path):
        return None
    rec = read_json_model(path, SuiteRecord)
    return SuiteView(
        file=SUITE_RECORD,
        upstream_version=rec.upstream_version,
        patch_sha256=rec.patch_sha256,
        passed=rec.summary.passed,
        failed=rec.summary.failed,
        needs_gpu=rec.summary.needs_gpu,
        upstream_passed=rec.summary.upstream_passed,
        specbench_passed=rec.summary.specbench_passed,
        scanned_test_files=rec.selection.scanned_test_files,
        selected_files=len(rec.selection.selected),
        sdist=rec.selection.sdist,
        passed_tests=tuple(t.id for t in rec.patched.tests if t.outcome == "passed"),
        reproduce=rec.reproduce,
    )


def _read_lock(d: Path) -> RunLock | None:
    """experiment.lock.json as the matrix wrote it; None for a folder without one (payloads
    from ``specbench run``). A lock that does not validate stops the report (exit 2)."""
    path = d / LOCK_FILE
    return read_json_model(path, RunLock) if exists(path) else None


def _read_status(d: Path) -> RunStatus | None:
    """status.json as the matrix wrote it; one that does not validate stops the report."""
    path = d / STATUS_FILE
    return read_json_model(path, RunStatus) if exists(path) else None


#: the verdict of a file SHA256SUMS lists that the folder no longer holds
MISSING = "MISSING: listed in SHA256SUMS, not in the folder"
