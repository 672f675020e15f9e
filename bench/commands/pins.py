"""CLI commands: ``pins show`` / ``pins record`` / ``pins forget`` over an experiment's pins lock
(``<experiment>.lock.yaml``, bench.schema pins). The provisioning roles call ``record`` on the
controller with what each host resolved, and ``show --json`` for the pins a host runs with."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from bench.core import InputError, exists, parse_yaml
from bench.engines import parse_experiment
from bench.schema import (
    Experiment,
    PinnedExperiment,
    PinsLock,
    Resolved,
    apply_lock,
    check_host,
    experiment_path,
    forget_pins,
    lock_path_for,
    locked,
    read_experiment_document,
    read_lock,
    record_pins,
    write_lock,
)

pins_app = typer.Typer(
    help="The experiment's pins lock: what the first run resolved, per image, model, dataset "
    "and file pinned by URL.",
    no_args_is_help=True,
)

ExperimentArg = Annotated[Path, typer.Argument(help="experiment file (YAML)")]
LockOpt = Annotated[
    Path | None, typer.Option("--lock", help="the pins lock (default: <experiment>.lock.yaml)")
]
DocumentOpt = Annotated[
    str | None,
    typer.Option(
        "--document",
        help="'-': read the experiment document (JSON or YAML) from stdin instead of the file "
        "(the file still names the lock)",
    ),
]


def _experiment(path: Path, document: str | None) -> Experiment:
    """The experiment: from its file, or its document on stdin (an Ansible run's variable)."""
    if document is None:
        data, source = read_experiment_document(path)
    elif document == "-":
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError as err:
            raise InputError("--document", f"stdin is not UTF-8 text: {err.reason}") from None
        data, source = parse_yaml(text, "--document (stdin)"), f"{path} (stdin)"
    else:
        raise InputError("--document", f"only '-' (stdin) is accepted, not {document!r}")
    return parse_experiment(data, source)


def _lock_path(experiment: Path, lock: Path | None, *, must_exist: bool = True) -> Path:
    """The lock's path. One named with --lock is a file (``show`` and ``forget``: one that
    exists, unless ``show --lock-may-be-new``), or for ``record`` a file to come in a folder
    that exists: a mistyped --lock is never read as 'nothing pinned'."""
    if lock is None:
        return lock_path_for(experiment_path(experiment))
    if lock.is_dir():
        raise InputError("--lock", f"{lock} is a folder, not a file")
    if not lock.parent.is_dir():
        raise InputError("--lock", f"no such folder: {lock.parent}")
    if must_exist and not exists(lock):
        raise InputError("--lock", f"no such file: {lock}")
    return lock


def _read_named(path: Path, lock: Path | None, experiment: str) -> PinsLock:
    """The lock; one named with --lock that exists must be a lock (an empty file is not)."""
    return read_lock(path, experiment, named=lock is not None and exists(path))


def _pairs(flag: str, values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in values or []:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value or key in out:
            raise InputError(flag, f"{pair!r}: want KEY=VALUE, once per key")
        out[key] = value
    return out


def _datasets(exp: Experiment) -> dict[str, dict[str, str]]:
    ps = exp.workload.prompt_set
    if ps is None or ps.dataset is None:
        return {}
    return {ps.name: ps.dataset.model_dump(mode="json")}


def _urls(exp: Experiment) -> dict[str, dict[str, str]]:
    acc = exp.workload.accuracy
    if acc is None or acc.source is None:
        return {}
    return {acc.name: acc.source.model_dump(mode="json")}


def _dataset_pins(values: list[str] | None) -> dict[str, tuple[str, str]]:
    """``--dataset NAME=REVISION:SHA256`` values, by name."""
    out: dict[str, tuple[str, str]] = {}
    for name, value in _pairs("--dataset", values).items():
        rev, sep, sha = value.partition(":")
        if not sep or not rev or not sha:
            raise InputError("--dataset", f"{name}={value!r}: want NAME=REVISION:SHA256")
        out[name] = (rev, sha)
    return out


def _render(p: PinnedExperiment) -> str:
    lines = [f"pins of {p.experiment.name} for host {p.host} (lock: {p.lock_path})"]
    for pin in p.pins:
        value = pin.value or "UNPINNED"
        lines.append(f"  {pin.kind} {pin.key:<14} {pin.field:<12} {value:<72} {pin.source}")
    if p.unpinned:
        lines.append(
            f"{len(p.unpinned)} pin(s) unresolved: the first `make provision` resolves them "
            "into the lock; a real matrix refuses them without --allow-unpinned"
        )
    return "\n".join(lines)


@pins_app.command("show")
def show(
    experiment: ExperimentArg,
    host: Annotated[str | None, typer.Option(help="the host (default: this hostname)")] = None,
    lock: LockOpt = None,
    document: DocumentOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    lock_may_be_new: Annotated[
        bool,
        typer.Option(
            "--lock-may-be-new",
            help="the --lock file may not exist yet (a first provision): read as no pins",
        ),
    ] = False,
) -> None:
    """Every image and model pin for one host, and where it comes from."""
    exp = _experiment(experiment, document)
    path = _lock_path(experiment, lock, must_exist=lock is not None and not lock_may_be_new)
    name = check_host(host) if host is not None else socket.gethostname()
    pinned = apply_lock(exp, _read_named(path, lock, exp.name), name, path)
    if as_json:
        out = {
            "lock": str(path),
            "host": pinned.host,
            "pins": [p.model_dump(mode="json") for p in pinned.pins],
            "unpinned": [f"{p.ref} ({p.field})" for p in pinned.unpinned],
            # the experiment's images and models with the pins applied, as the file spells
            # them (no null fields: the provisioning roles test `build is defined`)
            "images": {
                k: i.model_dump(mode="json", exclude_none=True)
                for k, i in pinned.experiment.images.items()
            },
            "models": {
                k: m.model_dump(mode="json", exclude_none=True)
                for k, m in pinned.experiment.models.items()
            },
            # a dataset prompt set, by its name, as pinned (the models stage fetches it)
            "datasets": _datasets(pinned.experiment),
            # a file pinned by URL (an accuracy task's source), by the task's name, as pinned
            "urls": _urls(pinned.experiment),
        }
        typer.echo(json.dumps(out, indent=1))
    else:
        typer.echo(_render(pinned))


@pins_app.command("record")
def record(
    experiment: ExperimentArg,
    host: Annotated[str, typer.Option(help="the host that resolved them")],
    lock: LockOpt = None,
    document: DocumentOpt = None,
    image_digest: Annotated[
        list[str] | None, typer.Option(help="KEY=sha256:... registry digest of a pulled image")
    ] = None,
    base_digest: Annotated[
        list[str] | None, typer.Option(help="KEY=sha256:... registry digest of a build's base")
    ] = None,
    image_id: Annotated[
        list[str] | None, typer.Option(help="KEY=sha256:... this host's build's image ID")
    ] = None,
    model_revision: Annotated[
        list[str] | None, typer.Option(help="KEY=<40 hex> the commit a model resolved to")
    ] = None,
    dataset: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=<40 hex>:<64 hex> the commit a dataset prompt set resolved to and its "
            "file's sha256"
        ),
    ] = None,
    url: Annotated[
        list[str] | None,
        typer.Option(
            "--url",
            help="NAME=<64 hex> the sha256 of the file an accuracy task pinned by URL served",
        ),
    ] = None,
    resolved_from: Annotated[str, typer.Option(help="the branch models resolved from")] = "main",
) -> None:
    """Add what a host resolved to the lock; refuse a value that differs from a pin (exit 2,
    with the fix). Prints {"changed": ..., "lock": ...}."""
    check_host(host)
    exp = _experiment(experiment, document)
    path = _lock_path(experiment, lock, must_exist=False)
    found = Resolved(
        image_digests=_pairs("--image-digest", image_digest),
        base_digests=_pairs("--base-digest", base_digest),
        image_ids=_pairs("--image-id", image_id),
        model_revisions=_pairs("--model-revision", model_revision),
        datasets=_dataset_pins(dataset),
        urls=_pairs("--url", url),
        resolved_from=resolved_from,
    )
    # everything checked before anything is written: a refused value leaves no folder, no lock
    # and no guard file behind; then again under the lock (another host may have recorded since)
    record_pins(exp, _read_named(path, lock, exp.name), host, found, path)
    with locked(path):
        old = _read_named(path, lock, exp.name)
        new = record_pins(exp, old, host, found, path)
        changed = new != old
        if changed:
            write_lock(path, new)
    typer.echo(json.dumps({"changed": changed, "lock": str(path)}))


@pins_app.command("forget")
def forget(
    experiment: ExperimentArg,
    image: Annotated[list[str] | None, typer.Option(help="an image key to resolve anew")] = None,
    model: Annotated[list[str] | None, typer.Option(help="a model key to resolve anew")] = None,
    dataset: Annotated[
        list[str] | None, typer.Option(help="a dataset prompt set's name to resolve anew")
    ] = None,
    url: Annotated[
        list[str] | None,
        typer.Option("--url", help="an accuracy task pinned by URL, by name, to resolve anew"),
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="only this host's image ID of the named builds")
    ] = None,
    lock: LockOpt = None,
) -> None:
    """Drop entries from the lock, so that the next run resolves them anew (moving a pin on
    purpose)."""
    if not image and not model and not dataset and not url:
        raise InputError("--image/--model/--dataset/--url", "name at least one entry to forget")
    if host is not None:
        check_host(host)
    exp = _experiment(experiment, None)
    path = _lock_path(experiment, lock)
    with locked(path):
        new, gone = forget_pins(
            _read_named(path, lock, exp.name), image or [], model or [], host, dataset or [],
            url or [],
        )  # fmt: skip
        write_lock(path, new)
    for line in gone:
        typer.echo(f"forgot {line} in {path}")
    typer.echo("the next run resolves them anew and records them here")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.add_typer(pins_app, name="pins")
