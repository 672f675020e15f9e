"""Changing a pins lock: ``record_pins`` adds what a run resolved (an image's registry digest
or a local build's image ID, a model's commit, a dataset prompt set's commit and file sha256,
the sha256 of a file pinned by URL),
refusing a value that differs from the experiment's pin or the lock's; ``forget_pins`` drops
entries so that the next run resolves them anew. The lock's format, reading and applying are in
_pins.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

from pydantic import Field, ValidationError

from bench.core import InputError, StrictModel, describe_validation_error
from bench.schema._experiment import UNRESOLVED, Experiment
from bench.schema._pins import (
    DIGEST_FORM,
    REVISION_FORM,
    SHA256_FORM,
    DatasetLock,
    ImageLock,
    ModelLock,
    PinsLock,
    UrlLock,
    apply_lock,
)

_Entry = TypeVar("_Entry", DatasetLock, UrlLock)


class Resolved(StrictModel):
    """What one host resolved in one run (the input of ``specbench pins record``)."""

    image_digests: dict[str, str] = Field(default_factory=dict)
    base_digests: dict[str, str] = Field(default_factory=dict)
    image_ids: dict[str, str] = Field(default_factory=dict)
    model_revisions: dict[str, str] = Field(default_factory=dict)
    #: a dataset prompt set's (commit, sha256 of its file), by the prompt set's name
    datasets: dict[str, tuple[str, str]] = Field(default_factory=dict)
    #: the sha256 of a file pinned by URL (an accuracy task's source), by the task's name
    urls: dict[str, str] = Field(default_factory=dict)
    resolved_from: str = "main"


def record_pins(
    exp: Experiment, lock: PinsLock, host: str, found: Resolved, path: Path
) -> PinsLock:
    """The lock with what ``host`` resolved added. A value for a pin the experiment fixes is
    checked against it; a value the lock already holds must be the same (a registry tag or a
    branch that moved since, or a rebuilt image, is refused with the fix)."""
    images = {k: v.model_copy() for k, v in lock.images.items()}
    _record_digests(exp, images, found, path)
    _record_image_ids(exp, images, host, found, path)
    models = _record_models(exp, dict(lock.models), found, path)
    datasets = _record_datasets(exp, dict(lock.datasets), found)
    urls = _record_urls(exp, dict(lock.urls), found)
    new = lock.model_copy(
        update={"images": images, "models": models, "datasets": datasets, "urls": urls}
    )
    # never write a lock that its own reader or the experiment's pins would refuse: validated
    # as read back, then applied (model_copy does not validate what it puts in)
    try:
        PinsLock.model_validate(new.model_dump(mode="json", by_alias=True))
    except ValidationError as err:
        raise describe_validation_error(f"{path} (as it would be written)", err) from None
    apply_lock(exp, new, host, path)
    return new


def _image_entry(
    exp: Experiment, images: dict[str, ImageLock], key: str, field: str, path: Path
) -> ImageLock:
    """The lock's entry for image ``key`` (a new one where it has none), refused where the
    experiment names no such image or the entry was resolved for another image."""
    img = exp.images.get(key)
    if img is None:
        raise InputError(field, f"{key!r} is not an image of {exp.name} ({sorted(exp.images)})")
    entry = images.get(key) or ImageLock(image=img.image)
    if entry.image != img.image:
        raise InputError(
            f"{path}: images.{key}.image",
            f"resolved for {entry.image}, the experiment now names {img.image}: run "
            f"`specbench pins forget <experiment> --image {key}` first",
        )
    return entry


def _check_pin(where: str, fixed: str, old: str | None, new: str, fix: str) -> bool:
    """True when ``new`` is to be written; raises on a mismatch. A value of the wrong kind
    (a commit where a digest belongs, or the reverse) is refused before anything is written:
    the lock's own reader would refuse it afterwards."""
    if where.endswith(".revision"):
        if not REVISION_FORM.fullmatch(new):
            raise InputError(
                f"--model-revision {where.split('.')[1]}",
                f"{new!r} is not a 40-hex commit"
                + (" (a digest belongs in --image-digest)" if DIGEST_FORM.fullmatch(new) else ""),
            )
    elif not DIGEST_FORM.fullmatch(new):
        flag = {"digest": "--image-digest", "base_digest": "--base-digest"}.get(
            where.split(".")[2], "--image-id"
        )
        raise InputError(
            f"{flag} {where.split('.')[1]}",
            f"{new!r} is not 'sha256:<64 hex>'"
            + (
                " (a 40-hex commit belongs in --model-revision)"
                if REVISION_FORM.fullmatch(new)
                else ""
            ),
        )
    return _compare_pin(where, fixed, old, new, fix)


def _record_digests(
    exp: Experiment, images: dict[str, ImageLock], found: Resolved, path: Path
) -> None:
    """Add to ``images`` the registry digests: of a pulled image, and of a local build's base."""
    for flag, values, attr, of_build in (
        ("--image-digest", found.image_digests, "digest", False),
        ("--base-digest", found.base_digests, "base_digest", True),
    ):
        for key, dig in values.items():
            entry = _image_entry(exp, images, key, flag, path)
            img = exp.images[key]
            if (img.build is not None) != of_build:
                what = "not a local build" if of_build else "a local build: give its --image-id"
                raise InputError(flag, f"{key} is {what}")
            build = img.build
            ref, fixed = (build.base_image, build.base_digest) if build else (img.image, img.digest)
            fix = (
                f"The registry's {ref} has moved. To take the new one on purpose: "
                f"`specbench pins forget <experiment> --image {key}` and run again"
            )
            if _check_pin(f"images.{key}.{attr}", fixed, getattr(entry, attr), dig, fix):
                images[key] = entry.model_copy(update={attr: dig})


def _record_image_ids(
    exp: Experiment, images: dict[str, ImageLock], host: str, found: Resolved, path: Path
) -> None:
    """Add to ``images`` the image ID of each local build on ``host``."""
    for key, image_id in found.image_ids.items():
        entry = _image_entry(exp, images, key, "--image-id", path)
        img = exp.images[key]
        if img.build is None:
            raise InputError("--image-id", f"{key} is pulled, not built: give its --image-digest")
        fix = (
            f"{host}'s build of {img.image} is not the one pinned (same tag: same patch, so "
            "another base or Docker). If this build is the one you mean: `specbench pins "
            f"forget <experiment> --image {key} --host {host}` and run again"
        )
        old = entry.image_ids.get(host)
        if _check_pin(f"images.{key}.image_ids.{host}", img.digest, old, image_id, fix):
            images[key] = entry.model_copy(
                update={"image_ids": {**entry.image_ids, host: image_id}}
            )


def _record_models(
    exp: Experiment, models: dict[str, ModelLock], found: Resolved, path: Path
) -> dict[str, ModelLock]:
    """``models`` with each model's resolved commit added."""
    for key, rev in found.model_revisions.items():
        m = exp.models.get(key)
        if m is None:
            raise InputError("--model-revision", f"{key!r} is not a model of {exp.name}")
        mentry = models.get(key)
        if mentry is not None and mentry.hf_id != m.hf_id:
            raise InputError(
                f"{path}: models.{key}.hf_id",
                f"resolved for {mentry.hf_id}, the experiment now names {m.hf_id}: run "
                f"`specbench pins forget <experiment> --model {key}` first",
            )
        fix = (
            f"{m.hf_id}@{found.resolved_from} has moved. To take the new commit on purpose: "
            f"`specbench pins forget <experiment> --model {key}` and run again"
        )
        old_rev = mentry.revision if mentry else None
        if _check_pin(f"models.{key}.revision", m.revision, old_rev, rev, fix):
            models[key] = ModelLock(hf_id=m.hf_id, revision=rev, resolved_from=found.resolved_from)
    return models


def _record_datasets(
    exp: Experiment, datasets: dict[str, DatasetLock], found: Resolved
) -> dict[str, DatasetLock]:
    """``datasets`` with each dataset prompt set's resolved commit and file sha256 added."""
    for name, (rev, sha) in found.datasets.items():
        ps = exp.workload.prompt_set
        if ps is None or ps.dataset is None or ps.name != name:
            raise InputError("--dataset", f"{name!r} is not a dataset prompt set of {exp.name}")
        d, held = ps.dataset, datasets.get(name)
        fix = (
            f"{d.hf_id}@{found.resolved_from} has moved. To take the new commit on purpose: "
            f"`specbench pins forget <experiment> --dataset {name}` and run again"
        )
        where = "workload.prompt_set.dataset"
        old_rev, old_sha = (held.revision, held.sha256) if held else (None, None)
        keep_rev = _check_value(f"{where}.revision", d.revision, old_rev, rev, fix, REVISION_FORM)
        keep_sha = _check_value(f"{where}.sha256", d.sha256, old_sha, sha, fix, SHA256_FORM)
        if keep_rev or keep_sha:
            datasets[name] = DatasetLock(
                hf_id=d.hf_id, file=d.file, revision=rev, sha256=sha,
                resolved_from=found.resolved_from,
            )  # fmt: skip
    return datasets


def _record_urls(exp: Experiment, urls: dict[str, UrlLock], found: Resolved) -> dict[str, UrlLock]:
    """``urls`` with the sha256 of each file pinned by URL that the host fetched added."""
    for name, sha in found.urls.items():
        acc = exp.workload.accuracy
        if acc is None or acc.source is None or acc.name != name:
            raise InputError(
                "--url", f"{name!r} is not an accuracy task pinned by URL of {exp.name}"
            )
        src, held = acc.source, urls.get(name)
        fix = (
            f"{src.url} served another file. To take it on purpose: `specbench pins forget "
            f"<experiment> --url {name}` and run again"
        )
        if held is not None and held.url != src.url:
            raise InputError(
                f"urls.{name}",
                f"resolved for {held.url}, the experiment now names {src.url}: run `specbench "
                f"pins forget <experiment> --url {name}` first",
            )
        where = "workload.accuracy.source.sha256"
        old = held.sha256 if held else None
        if _check_value(where, src.sha256, old, sha, fix, SHA256_FORM):
            urls[name] = UrlLock(url=src.url, sha256=sha)
    return urls


def _check_value(
    where: str, fixed: str, old: str | None, new: str, fix: str, form: re.Pattern[str]
) -> bool:
    """A dataset's commit or file sha256, as ``record_pins`` checks a model's revision: True
    when it is to be written; a malformed value or a mismatch is refused."""
    if not form.fullmatch(new):
        raise InputError(where, f"{new!r} is not of the form {form.pattern}")
    return _compare_pin(where, fixed, old, new, fix)


def _compare_pin(where: str, fixed: str, old: str | None, new: str, fix: str) -> bool:
    """A resolved value against the experiment's pin and the lock's: True when it is to be
    written; a mismatch with either is refused with ``fix``."""
    if fixed != UNRESOLVED:
        if new != fixed:
            raise InputError(where, f"found {new}, the experiment pins {fixed}. {fix}")
        return False
    if old is not None and old != new:
        raise InputError(where, f"found {new}, the lock pins {old}. {fix}")
    return old is None


def forget_pins(
    lock: PinsLock,
    images: list[str],
    models: list[str],
    host: str | None,
    datasets: list[str] | None = None,
    urls: list[str] | None = None,
) -> tuple[PinsLock, list[str]]:
    """The lock without the named entries (with ``host``: only that host's image IDs of the
    named builds; ``datasets``: prompt sets by name; ``urls``: files pinned by URL, by their
    task's name); and what was removed, as lines."""
    out_images = dict(lock.images)
    out_models = dict(lock.models)
    out_datasets = _without("--dataset", datasets or [], lock.datasets)
    out_urls = _without("--url", urls or [], lock.urls)
    gone_datasets = [f"datasets.{n}" for n in datasets or []] + [f"urls.{n}" for n in urls or []]
    gone: list[str] = []
    for key in images:
        entry = out_images.get(key)
        if entry is None:
            raise InputError("--image", f"the lock has no entry {key!r} ({sorted(lock.images)})")
        if host is None:
            del out_images[key]
            gone.append(f"images.{key}")
            continue
        if host not in entry.image_ids:
            raise InputError("--host", f"images.{key} has no image ID for {host!r}")
        ids = {h: i for h, i in entry.image_ids.items() if h != host}
        out_images[key] = entry.model_copy(update={"image_ids": ids})
        gone.append(f"images.{key}.image_ids.{host}")
    for key in models:
        if key not in out_models:
            raise InputError("--model", f"the lock has no entry {key!r} ({sorted(lock.models)})")
        del out_models[key]
        gone.append(f"models.{key}")
    new = {"images": out_images, "models": out_models, "datasets": out_datasets, "urls": out_urls}
    return lock.model_copy(update=new), gone + gone_datasets


def _without(flag: str, names: list[str], entries: dict[str, _Entry]) -> dict[str, _Entry]:
    """``entries`` without ``names`` (each must be there: exit 2 naming ``flag``)."""
    for name in names:
        if name not in entries:
            raise InputError(flag, f"the lock has no entry {name!r} ({sorted(entries)})")
    return {k: v for k, v in entries.items() if k not in names}
