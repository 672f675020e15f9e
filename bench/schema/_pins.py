"""The pins lock: ``<experiment>.lock.yaml`` next to an experiment file, written by the first run.

An experiment file may leave a pin ``unresolved`` (an image digest, a local build's base digest
or image ID, a model revision): it could not be looked up where the file was written. The first
run on a host resolves it (pulls by tag and reads the registry digest, builds and reads the
image ID, asks the hub which commit ``main`` is) and records it here, the way a package manager
writes its lock on first install. Later runs are pinned to the lock and refuse a mismatch.

One source of truth per pin: a value written in the experiment file wins and is never copied
here; the lock holds only what the experiment leaves ``unresolved``. A lock entry that disagrees
with a value the experiment now fixes, or that was resolved for another tag or repository, is
refused with the entry to delete. A local build's image ID is per host (every host's build gets
its own ID); everything else is one value for the whole fleet.

To move a pin on purpose: ``specbench pins forget EXPERIMENT --image KEY`` (or ``--model KEY``,
``--dataset NAME``, ``--url NAME``) and run again, which resolves it anew; or write the value
into the experiment file and forget the lock's entry.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import AfterValidator, Field, ValidationError, field_validator

from bench.core import (
    InputError,
    StrictModel,
    describe_validation_error,
    exists,
    parse_yaml,
    read_text,
    write_text,
)
from bench.schema._experiment import (
    UNRESOLVED,
    DatasetFile,
    Experiment,
    UrlPin,
    WorkloadSpec,
    pinned_url,
)

PINS_SCHEMA: Final = "specbench.pins/1"

#: Where a pin of a run came from: the committed experiment file, the lock written by a run,
#: or nowhere (run by tag with ``--allow-unpinned``).
PinSource = Literal["experiment", "lock", "unpinned"]

DIGEST_FORM = re.compile(r"^sha256:[0-9a-f]{64}$")
REVISION_FORM = re.compile(r"^[0-9a-f]{40}$")
SHA256_FORM = re.compile(r"^[0-9a-f]{64}$")


def _sha256(v: str) -> str:
    if not SHA256_FORM.fullmatch(v):
        raise ValueError("must be 64 lowercase hex digits")
    return v


#: a resolved file's sha256: 64 lowercase hex digits
Sha256 = Annotated[str, AfterValidator(_sha256)]
#: a host as an inventory or a hostname names it (a name, an IPv4 or IPv6 address); never
#: empty, no space, no control character: it is a key of the lock and a line of `pins show`
HOST_FORM = re.compile(r"^[A-Za-z0-9_\[][A-Za-z0-9_.:%\[\]-]{0,252}$")


def check_host(host: str, where: str = "--host") -> str:
    """``host`` if it can name a host in the lock; else InputError naming ``where``."""
    if not HOST_FORM.fullmatch(host):
        raise InputError(
            where, f"{host[:80]!r} is not a host name (letters, digits, '.', '-', '_', ':')"
        )
    return host


def _digest(v: str | None) -> str | None:
    if v is not None and not DIGEST_FORM.fullmatch(v):
        raise ValueError("must be 'sha256:<64 hex>'")
    return v


class ImageLock(StrictModel):
    """What a run resolved for one image of the experiment."""

    image: str = Field(description="the repository:tag it was resolved for")
    digest: str | None = Field(default=None, description="registry digest of a pulled image")
    base_digest: str | None = Field(default=None, description="registry digest of a build's base")
    image_ids: dict[str, str] = Field(
        default_factory=dict, description="host -> image ID of that host's local build"
    )

    @field_validator("digest", "base_digest")
    @classmethod
    def _digests(cls, v: str | None) -> str | None:
        return _digest(v)

    @field_validator("image_ids")
    @classmethod
    def _ids(cls, v: dict[str, str]) -> dict[str, str]:
        for host, image_id in v.items():
            if not HOST_FORM.fullmatch(host):
                raise ValueError(f"{host!r}: not a host name")
            if not DIGEST_FORM.fullmatch(image_id):
                raise ValueError(f"{host}: must be 'sha256:<64 hex>'")
        return v


class ModelLock(StrictModel):
    """What a run resolved for one model: the commit its branch pointed at."""

    hf_id: str
    revision: str
    resolved_from: str = Field(default="main", description="the branch or tag it was resolved from")

    @field_validator("revision")
    @classmethod
    def _rev(cls, v: str) -> str:
        if not REVISION_FORM.fullmatch(v):
            raise ValueError("must be a 40-hex commit")
        return v


class DatasetLock(ModelLock):
    """What a run resolved for a dataset prompt set (issue 37), like a model's weights: the
    commit its branch pointed at and the sha256 of the prompt file at that commit."""

    file: DatasetFile
    sha256: Sha256


class UrlLock(StrictModel):
    """What a run resolved for a file pinned by URL (issue 48, an accuracy task's ``source``):
    the sha256 of the file the URL served, for an experiment that leaves it 'unresolved'."""

    url: Annotated[str, AfterValidator(pinned_url)]
    sha256: Sha256


class PinsLock(StrictModel):
    """The whole lock file of one experiment."""

    schema_: Literal["specbench.pins/1"] = Field(default=PINS_SCHEMA, alias="schema")
    experiment: str = Field(description="the experiment's name")
    images: dict[str, ImageLock] = Field(default_factory=dict)
    models: dict[str, ModelLock] = Field(default_factory=dict)
    datasets: dict[str, DatasetLock] = Field(
        default_factory=dict,
        exclude_if=lambda v: not v,
        description="dataset prompt sets, by the prompt set's name (left out while none)",
    )
    urls: dict[str, UrlLock] = Field(
        default_factory=dict,
        exclude_if=lambda v: not v,
        description="files pinned by URL, by the accuracy task's name (left out while none)",
    )


class Pin(StrictModel):
    """One pin of a run as it was applied: what, its value, where the value came from."""

    kind: Literal["image", "model", "dataset", "url"]
    key: str = Field(description="the key in the experiment's images or models")
    ref: str = Field(description="repository:tag, or the Hugging Face id")
    field: Literal["digest", "image ID", "base digest", "revision", "sha256"]
    value: str | None = Field(description="None: unpinned")
    source: PinSource


class PinnedExperiment(StrictModel):
    """An experiment with its lock applied for one host, and where each pin came from."""

    experiment: Experiment
    pins: list[Pin]
    lock_path: str
    host: str

    @property
    def unpinned(self) -> list[Pin]:
        return [p for p in self.pins if p.source == "unpinned"]


# -- the file --------------------------------------------------------------------------------


def lock_path_for(experiment_path: Path | str) -> Path:
    """``bench/experiments/x.yaml`` -> ``bench/experiments/x.lock.yaml``."""
    p = Path(experiment_path)
    stem = p.name.removesuffix(".yaml").removesuffix(".yml")
    return p.with_name(f"{stem}.lock.yaml")


_HEADER = """\
# specbench pins lock of the experiment {name} ({schema}), written by the runs that resolved
# its 'unresolved' pins. Commit it next to the experiment: later runs are pinned to it and refuse
# a mismatch. To move a pin on purpose: `specbench pins forget <experiment> --image KEY` (or
# --model KEY, --dataset NAME, --url NAME) and run again. A value written in the experiment file
# wins and is not kept here.
"""


def read_lock(path: Path, experiment: str, *, named: bool = False) -> PinsLock:
    """The lock at ``path`` (an empty one when the file does not exist). Exit 2 on a bad file.
    ``named``: the user named this file (``--lock``): it must be there and be a lock, never
    read as 'nothing pinned' (a mistyped path would unpin every pin)."""
    if not exists(path):
        if named:
            raise InputError(str(path), "no such pins lock (--lock names an existing lock)")
        return PinsLock(experiment=experiment)
    data = parse_yaml(read_text(path, what="pins lock"), str(path))
    if data is None and named:
        raise InputError(str(path), "an empty file, not a pins lock (--lock names a lock)")
    try:
        lock = PinsLock.model_validate(data or {"experiment": experiment})
    except ValidationError as err:
        raise describe_validation_error(str(path), err) from None
    if lock.experiment != experiment:
        raise InputError(
            f"{path}: experiment",
            f"the lock is for {lock.experiment!r}, not {experiment!r}: one lock per experiment",
        )
    return lock


def write_lock(path: Path, lock: PinsLock) -> None:
    body = yaml.safe_dump(lock.model_dump(mode="json", by_alias=True), sort_keys=False)
    write_text(path, _HEADER.format(name=lock.experiment, schema=PINS_SCHEMA) + body)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder of ``path`` while it is read, changed and written:
    the hosts of a fleet record their pins into one file at the same time. The folder itself is
    locked, so no guard file is left beside the lock."""
    fd = os.open(path.parent if str(path.parent) else Path("."), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- applying it -----------------------------------------------------------------------------


def _conflict(path: Path, where: str, fixed: str, locked_value: str, entry: str) -> InputError:
    return InputError(
        f"{path}: {where}",
        f"the experiment pins {fixed}, the lock says {locked_value}: one source per pin. Run "
        f"`specbench pins forget <experiment> {entry}` (or delete that entry) to keep the "
        "experiment's value",
    )


def _pick(
    path: Path, where: str, fixed: str, locked_value: str | None, entry: str
) -> tuple[str | None, PinSource]:
    if fixed != UNRESOLVED:
        if locked_value is not None and locked_value != fixed:
            raise _conflict(path, where, fixed, locked_value, entry)
        return fixed, "experiment"
    if locked_value is not None:
        return locked_value, "lock"
    return None, "unpinned"


def apply_lock(exp: Experiment, lock: PinsLock, host: str, path: Path) -> PinnedExperiment:
    """The experiment with the lock's values in place of its 'unresolved' pins, for ``host``.

    A lock entry resolved for another tag (or Hugging Face id) than the experiment now names is
    stale: refused, with the entry to forget."""
    images = dict(exp.images)
    models = dict(exp.models)
    pins: list[Pin] = []
    for key, img in exp.images.items():
        entry = lock.images.get(key)
        flag = f"--image {key}"
        if entry is not None and entry.image != img.image:
            raise InputError(
                f"{path}: images.{key}.image",
                f"resolved for {entry.image}, the experiment now names {img.image}: run "
                f"`specbench pins forget <experiment> {flag}` and run again to resolve it",
            )
        update: dict[str, object] = {}
        if img.build is None:
            value, src = _pick(
                path, f"images.{key}.digest", img.digest, entry.digest if entry else None, flag
            )
            pins.append(Pin(kind="image", key=key, ref=img.image, field="digest", value=value,
                            source=src))  # fmt: skip
            update["digest"] = value or UNRESOLVED
        else:
            locked_id = entry.image_ids.get(host) if entry else None
            where = f"images.{key}.image_ids.{host}"
            value, src = _pick(path, where, img.digest, locked_id, f"{flag} --host {host}")
            pins.append(Pin(kind="image", key=key, ref=img.image, field="image ID", value=value,
                            source=src))  # fmt: skip
            update["digest"] = value or UNRESOLVED
            base, bsrc = _pick(
                path, f"images.{key}.base_digest", img.build.base_digest,
                entry.base_digest if entry else None, flag,
            )  # fmt: skip
            pins.append(Pin(kind="image", key=key, ref=img.build.base_image, field="base digest",
                            value=base, source=bsrc))  # fmt: skip
            update["build"] = img.build.model_copy(update={"base_digest": base or UNRESOLVED})
        images[key] = img.model_copy(update=update)
    for key, m in exp.models.items():
        mentry = lock.models.get(key)
        flag = f"--model {key}"
        if mentry is not None and mentry.hf_id != m.hf_id:
            raise InputError(
                f"{path}: models.{key}.hf_id",
                f"resolved for {mentry.hf_id}, the experiment now names {m.hf_id}: run "
                f"`specbench pins forget <experiment> {flag}` and run again to resolve it",
            )
        rev, src = _pick(
            path, f"models.{key}.revision", m.revision, mentry.revision if mentry else None, flag
        )
        pins.append(Pin(kind="model", key=key, ref=m.hf_id, field="revision", value=rev,
                        source=src))  # fmt: skip
        models[key] = m.model_copy(update={"revision": rev or UNRESOLVED})
    workload, dataset_pins = _apply_dataset(exp, lock, path)
    workload, url_pins = _apply_url(workload, lock, path)
    pinned = exp.model_copy(update={"images": images, "models": models, "workload": workload})
    pins += dataset_pins + url_pins
    return PinnedExperiment(experiment=pinned, pins=pins, lock_path=str(path), host=host)


def _apply_dataset(exp: Experiment, lock: PinsLock, path: Path) -> tuple[Any, list[Pin]]:
    """The workload with a dataset prompt set's revision and sha256 from the lock where the
    experiment leaves them 'unresolved', and their pins."""
    ps = exp.workload.prompt_set
    if ps is None or ps.dataset is None:
        return exp.workload, []
    d = ps.dataset
    entry = lock.datasets.get(ps.name)
    flag = f"--dataset {ps.name}"
    if entry is not None and (entry.hf_id, entry.file) != (d.hf_id, d.file):
        raise InputError(
            f"{path}: datasets.{ps.name}",
            f"resolved for {entry.hf_id} {entry.file}, the experiment now names {d.hf_id} "
            f"{d.file}: run `specbench pins forget <experiment> {flag}` and run again to "
            "resolve it",
        )
    where = "workload.prompt_set.dataset"
    rev, src = _pick(path, f"{where}.revision", d.revision, entry.revision if entry else None, flag)
    sha, ssrc = _pick(path, f"{where}.sha256", d.sha256, entry.sha256 if entry else None, flag)
    ref = f"{d.hf_id}:{d.file}"
    pins = [
        Pin(kind="dataset", key=ps.name, ref=ref, field="revision", value=rev, source=src),
        Pin(kind="dataset", key=ps.name, ref=ref, field="sha256", value=sha, source=ssrc),
    ]
    dataset = d.model_copy(update={"revision": rev or UNRESOLVED, "sha256": sha or UNRESOLVED})
    prompt_set = ps.model_copy(update={"dataset": dataset})
    return exp.workload.model_copy(update={"prompt_set": prompt_set}), pins


def _apply_url(
    workload: WorkloadSpec, lock: PinsLock, path: Path
) -> tuple[WorkloadSpec, list[Pin]]:
    """The workload with the sha256 of an accuracy task pinned by URL from the lock where the
    experiment leaves it 'unresolved', and its pin."""
    acc = workload.accuracy
    if acc is None or acc.source is None:
        return workload, []
    src, entry, flag = acc.source, lock.urls.get(acc.name), f"--url {acc.name}"
    if entry is not None and entry.url != src.url:
        raise InputError(
            f"{path}: urls.{acc.name}",
            f"resolved for {entry.url}, the experiment now names {src.url}: run `specbench "
            f"pins forget <experiment> {flag}` and run again to resolve it",
        )
    where = "workload.accuracy.source.sha256"
    sha, src_of = _pick(path, where, src.sha256, entry.sha256 if entry else None, flag)
    pin = Pin(kind="url", key=acc.name, ref=src.url, field="sha256", value=sha, source=src_of)
    accuracy = acc.model_copy(update={"source": UrlPin(url=src.url, sha256=sha or UNRESOLVED)})
    return workload.model_copy(update={"accuracy": accuracy}), [pin]


# -- recording and forgetting ----------------------------------------------------------------
