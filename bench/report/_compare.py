"""One report across hosts: the same experiment run on several GPU hosts (a fleet), compared
with the same significance rules as the single-host report.

Runs are comparable only when they ran the same experiment with the same workload; otherwise
``compare_hosts`` refuses and names the first differing field. Per configuration and
concurrency, each host's decode and TTFT (mean, 95% CI) stand side by side, each host against
the first one by a two-sided Welch test ("faster by x%" only when significant after the same
Holm-Bonferroni correction as the single-host report, over every host-pair test this comparison
makes), and each host's roofline efficiency (measured decode / its own bandwidth ceiling), which
normalises for memory bandwidth.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.core import InputError, StrictModel, exists, read_bytes
from bench.report._claims import Comparison, Family, claim_key, compare, raw_p
from bench.report._frontier import FrontierSection, fleet_frontier
from bench.report._load import load_artifacts
from bench.report._model import RunSet, RunView
from bench.schema import workload_differences


class Host(StrictModel):
    name: str
    path: str
    rs: RunSet


class HostCell(StrictModel):
    host: str
    run: RunView | None
    decode_vs_first: Comparison | None = None
    ttft_vs_first: Comparison | None = None
    efficiency: float | None = None


class CompareRow(StrictModel):
    config: str
    engine: str
    method: str
    concurrency: int
    cells: tuple[HostCell, ...]


class FleetComparison(StrictModel):
    experiment: str | None
    title: str
    hosts: tuple[Host, ...]
    rows: tuple[CompareRow, ...]
    missing: tuple[str, ...] = ()
    family_size: int = 0
    #: issue 48: tokens/s per user against tokens/s per GPU, every host's runs on one frontier
    frontier: FrontierSection = FrontierSection()

    @property
    def simulated(self) -> bool:
        return any(h.rs.simulated for h in self.hosts)

    @property
    def toy_model(self) -> bool:
        return any(h.rs.toy_model for h in self.hosts)


def _names(dirs: Sequence[Path]) -> list[str]:
    """Each run's host name: its folder name (reports/<run-id>/<host>/), made unique."""
    names = [d.resolve().name for d in dirs]
    if len(set(names)) == len(names):
        return names
    return [f"{d.resolve().parent.name}/{d.resolve().name}" for d in dirs]


def _artifacts_dir(d: Path) -> Path:
    """A host's run folder as site.yml fetches it (reports/<run-id>/<host>/: REPORT.md next to
    artifacts/) or the artifacts folder itself."""
    inner = d / "artifacts"
    return inner if not (d / "payloads").is_dir() and (inner / "payloads").is_dir() else d


def refuse_the_same_run_twice(dirs: Sequence[Path]) -> None:
    """Two arguments naming one run folder, or two copies of one run (byte-identical
    status.json: the matrix writes its run id and the time it finished there), would be
    "compared" with themselves: refused, naming both."""
    seen: dict[Path, Path] = {}
    statuses: dict[bytes, Path] = {}
    for d in dirs:
        art = _artifacts_dir(d).resolve()
        if art in seen:
            raise InputError(str(d), f"the same run folder as {seen[art]}: nothing to compare")
        seen[art] = d
        status = art / "status.json"
        if exists(status):
            raw = read_bytes(status, what="status.json")
            if raw in statuses:
                copy = (
                    f"a copy of the run in {statuses[raw]} (same status.json): nothing to compare"
                )
                raise InputError(str(d), copy)
            statuses[raw] = d


def refuse_copies(hosts: Sequence[Host]) -> None:
    """Two folders of one run (a copy, a copy resumed or re-reported: its status.json rewritten)
    share the run id of their lock (or of their payloads) and the payloads the run wrote: either
    is refused, naming both."""
    for i, other in enumerate(hosts):
        sums = _payload_sums(other.rs)
        for first in hosts[:i]:
            same = set(first.rs.run_ids) & set(other.rs.run_ids)
            if same:
                raise InputError(
                    other.path,
                    f"a copy of the run in {first.path} (the same run id {sorted(same)[0]!r}): "
                    "nothing to compare",
                )
            shared = sorted(set(_payload_sums(first.rs)) & set(sums))
            if shared:
                raise InputError(
                    other.path,
                    f"a copy of the run in {first.path} ({sums[shared[0]]} is byte for byte "
                    f"{_payload_sums(first.rs)[shared[0]]} there): nothing to compare",
                )


def _payload_sums(rs: RunSet) -> dict[str, str]:
    return {f.sha256: f.path for f in rs.files if f.sha256 and f.path.startswith("payloads/")}


def check_comparable(hosts: Sequence[Host]) -> None:
    """Refuse runs of different experiments or workloads, naming every differing field of the
    workload (prompt set, sampling, template kwargs, lengths, target model, each
    configuration's speculative depth; hardware and software may differ: that is what is
    compared), and an emulated (SIMULATED) run beside a real one."""
    first = hosts[0]
    for other in hosts[1:]:
        if first.rs.simulated != other.rs.simulated:
            sim, real = (first, other) if first.rs.simulated else (other, first)
            raise InputError(
                other.path,
                f"{sim.name} is an emulated run (SIMULATED payloads), {real.name} a real one: "
                "an emulator's figures do not compare with an engine's",
            )
        if first.rs.experiment != other.rs.experiment:
            raise InputError(
                other.path,
                f"experiment: {other.rs.experiment!r} on {other.name}, "
                f"{first.rs.experiment!r} on {first.name}: only runs of one experiment compare",
            )
        differs = workload_differs(first, other)
        if differs:
            raise InputError(
                other.path,
                f"the workload differs from {first.name}'s in {len(differs)} field(s): "
                f"{'; '.join(differs)}: only runs of one workload compare",
            )


def _depths(rs: RunSet) -> dict[str, int | None]:
    return {r.config: r.spec_tokens for r in rs.runs}


def workload_differs(first: Host, other: Host) -> list[str]:
    """Each workload field where ``other`` measured something else than ``first``, with both
    values (issue 47, class 4)."""
    a, b = first.rs.measured_workload, other.rs.measured_workload
    out = [
        f"{key}: {b.get(key)!r} on {other.name}, {a.get(key)!r} on {first.name}"
        for key in workload_differences(a, b)
    ]
    da, db = _depths(first.rs), _depths(other.rs)
    out += [
        f"{cfg} speculative depth: {db[cfg]!r} on {other.name}, {da[cfg]!r} on {first.name}"
        for cfg in sorted(set(da) & set(db))
        if da[cfg] != db[cfg]
    ]
    return out


def _efficiency(rs: RunSet, run: RunView, host: str) -> float | None:
    if rs.roofline is None:
        return None
    key = run.key.removeprefix(f"{host}/")
    row = next((r for r in rs.roofline.rows if r.key == key), None)
    return row.fraction if row is not None else None


def compare_hosts(dirs: Sequence[Path]) -> FleetComparison:
    """Load every run folder, check they compare, and line their runs up by configuration."""
    if len(dirs) < 2:
        raise InputError("RUN_DIR", "give at least two run folders to compare")
    refuse_the_same_run_twice(dirs)
    hosts = [
        Host(name=n, path=str(d), rs=load_artifacts(_artifacts_dir(d)))
        for n, d in zip(_names(dirs), dirs, strict=True)
    ]
    refuse_copies(hosts)
    check_comparable(hosts)
    lined = _line_up(hosts)
    family = _host_family(lined)
    rows: list[CompareRow] = []
    missing: list[str] = []
    for config, c, cells in lined:
        row = _compare_row(config, c, cells, hosts, family, missing)
        if row is not None:
            rows.append(row)
    for h in hosts:  # every payload a host's folder holds and could not be read is named
        missing += [
            f"{u.path} on {h.name}: could not be read ({u.reason})" for u in h.rs.unreadable
        ]
    return FleetComparison(
        experiment=hosts[0].rs.experiment,
        title=hosts[0].rs.title,
        hosts=tuple(hosts),
        rows=tuple(rows),
        missing=tuple(missing),
        family_size=family.size,
        frontier=fleet_frontier([(h.name, h.rs.runs) for h in hosts]),
    )


#: one configuration at one concurrency, and each host's valid current run of it (None: none)
_Lined = tuple[str, int, list[tuple[str, RunView | None]]]


def _line_up(hosts: Sequence[Host]) -> list[_Lined]:
    """Every (configuration, concurrency) any host ran, in the order the hosts name them, with
    each host's valid current run. Runs are named by host so that every host-pair test is its
    own member of the family."""
    keys: list[tuple[str, int]] = []
    for h in hosts:
        for r in h.rs.runs:
            if r.attempt is None and (r.config, r.concurrency) not in keys:
                keys.append((r.config, r.concurrency))
    lined: list[_Lined] = []
    for config, c in keys:
        cells = []
        for h in hosts:
            run = next(
                (
                    r
                    for r in h.rs.runs
                    if r.config == config and r.concurrency == c and r.attempt is None and r.valid
                ),
                None,
            )
            cells.append(
                (h.name, run.model_copy(update={"key": f"{h.name}/{run.key}"}) if run else None)
            )
        lined.append((config, c, cells))
    return lined


def _host_family(lined: list[_Lined]) -> Family:
    """The family of this comparison's tests: each host's decode and TTFT against the first
    host that has the run."""
    raw: dict[tuple[str, str, str], float] = {}
    for _, _, cells in lined:
        present = [r for _, r in cells if r is not None]
        for run in present[1:]:
            for metric in ("decode", "ttft"):
                fa = run.decode if metric == "decode" else run.ttft
                fb = present[0].decode if metric == "decode" else present[0].ttft
                p = raw_p(fa, fb)
                if p is not None:
                    raw[claim_key(metric, run, present[0])] = p
    return Family.of(raw)


def _compare_row(
    config: str,
    c: int,
    cells: list[tuple[str, RunView | None]],
    hosts: Sequence[Host],
    family: Family,
    missing: list[str],
) -> CompareRow | None:
    """One configuration's row: each host's cell, compared with the first host that has a
    valid run (None when no host has one); a host without one is added to ``missing``."""
    out_cells: list[HostCell] = []
    ref: RunView | None = None
    for name, run in cells:
        if run is None:
            missing.append(f"{config} at concurrency {c}: no valid run on {name}")
            out_cells.append(HostCell(host=name, run=None))
            continue
        rs = next(h.rs for h in hosts if h.name == name)
        cell = HostCell(host=name, run=run, efficiency=_efficiency(rs, run, name))
        if ref is None:
            ref = run
        else:
            cell = cell.model_copy(
                update={
                    "decode_vs_first": compare(run, ref, "decode", family=family),
                    "ttft_vs_first": compare(run, ref, "ttft", family=family),
                }
            )
        out_cells.append(cell)
    if ref is None:
        return None
    return CompareRow(
        config=config,
        engine=ref.engine,
        method=ref.method,
        concurrency=c,
        cells=tuple(out_cells),
    )
