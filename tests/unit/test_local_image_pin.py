"""A locally built image (the patched SGLang image) is pinned by image ID: the experiment runs it
by tag and the Docker launcher refuses a tag that points at another build; the driver install
record reaches provenance."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.core import InputError, RunError
from bench.engines import get_engine, load_experiment
from bench.machine import capture_provenance, cpu_only
from bench.matrix import DockerLauncher

SEED = "bench/experiments/qwen38-27b-gptq-2x3090.yaml"
PINNED = "sha256:" + "ab" * 32


class FakeImages:
    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def get(self, ref: str) -> Any:
        if ref not in self.ids:
            raise LookupError(f"no such image: {ref}")
        return SimpleNamespace(id=self.ids[ref])


def _sglang_spec(digest: str) -> Any:
    exp = load_experiment(SEED)
    images = dict(exp.images)
    images["sglang"] = images["sglang"].model_copy(update={"digest": digest})
    exp = exp.model_copy(update={"images": images})
    cfg = exp.configuration("sglang-mtp")
    return exp, get_engine("sglang").container_spec(
        cfg, exp, host_port=1, model_cache="/m", run_id="r"
    )


def test_local_build_runs_by_tag_and_is_checked_by_id() -> None:
    exp, spec = _sglang_spec(PINNED)
    img = exp.images["sglang"]
    assert img.ref == img.image and "@" not in spec.image  # Docker cannot resolve tag@<image id>
    assert spec.image_id == PINNED
    launcher = DockerLauncher(client=SimpleNamespace(images=FakeImages({img.image: PINNED})))
    launcher.check_image(spec)  # the pinned build: accepted
    other = DockerLauncher(
        client=SimpleNamespace(images=FakeImages({img.image: "sha256:" + "cd" * 32}))
    )
    with pytest.raises(RunError, match="pinned sha256:abab"):
        other.check_image(spec)
    missing = DockerLauncher(client=SimpleNamespace(images=FakeImages({})))
    with pytest.raises(RunError, match="is not on this host"):
        missing.check_image(spec)


def test_each_host_runs_its_own_build_of_a_local_image(tmp_path: Path) -> None:
    """Issue #21/#29: a fleet's second host builds the same inputs to another image ID; the pins
    lock keeps one ID per host, and each host's matrix is pinned to its own build."""
    from bench.schema import PinsLock, apply_lock

    other_id = "sha256:" + "cd" * 32
    exp = load_experiment(SEED)
    img = exp.images["sglang"]
    lock = PinsLock.model_validate(
        {"experiment": exp.name,
         "images": {"sglang": {"image": img.image, "image_ids": {"a": PINNED, "b": other_id}}}}
    )  # fmt: skip
    path = tmp_path / "x.lock.yaml"
    here = apply_lock(exp, lock, "b", path).experiment
    assert exp.images["sglang"].local_image_id is None  # the file's pin is left alone
    assert here.images["sglang"].local_image_id == other_id
    assert apply_lock(exp, lock, "a", path).experiment.images["sglang"].local_image_id == PINNED
    spec = get_engine("sglang").container_spec(
        here.configuration("sglang-mtp"), here, host_port=1, model_cache="/m", run_id="r"
    )
    DockerLauncher(client=SimpleNamespace(images=FakeImages({img.image: other_id}))).check_image(
        spec
    )
    with pytest.raises(RunError, match="pinned sha256:cdcd") as err:
        DockerLauncher(client=SimpleNamespace(images=FakeImages({img.image: PINNED}))).check_image(
            spec
        )
    assert "specbench pins forget <experiment> --image KEY --host HOST" in str(err.value)


def test_pulled_images_keep_tag_at_digest() -> None:
    exp = load_experiment(SEED)
    vllm = exp.images["vllm"].model_copy(update={"digest": PINNED})
    assert vllm.ref == f"{vllm.image}@{PINNED}" and vllm.local_image_id is None
    _, spec = _sglang_spec("unresolved")
    assert spec.image_id is None


def test_driver_record_reaches_provenance(tmp_path: Path) -> None:
    record = tmp_path / "nvidia-driver.json"
    record.write_text(
        json.dumps(
            {
                "schema": "specbench.nvidia-driver/1",
                "path": "prebuilt",
                "source": "ubuntu",
                "branch": "580",
                "version": "580.95.05-0ubuntu1",
                "kernel": "6.8.0-49-generic",
                "packages": {"nvidia-utils-580-server": "580.95.05-0ubuntu1"},
                "secure_boot": True,
            }
        )
    )
    kw: dict[str, Any] = {"probe_docker": False, "probe_toolkit": False, "hardware": cpu_only()}
    p = capture_provenance(driver_record=record, **kw)
    assert p.driverInstall is not None and p.driverInstall.path == "prebuilt"
    assert p.driverInstall.packages == {"nvidia-utils-580-server": "580.95.05-0ubuntu1"}
    assert capture_provenance(driver_record=tmp_path / "absent.json", **kw).driverInstall is None
    record.write_text("{not json")
    broken = capture_provenance(driver_record=record, **kw)
    assert broken.driverInstall is None and any(
        "unreadable driver record" in n for n in broken.notes
    )


class FakeContainer:
    def __init__(self, name: str, status: str, log: list[str]) -> None:
        self.name, self.status, self.log = name, status, log
        self.id = self.short_id = f"{name}-{len(log)}"

    def reload(self) -> None:
        pass

    def start(self) -> None:
        self.log.append(f"start {self.id}")
        self.status = "running"

    def remove(self, force: bool = False) -> None:
        self.log.append(f"remove {self.id}")


class FakeContainers:
    """One name at a time, as Docker: create refuses a name in use (a Conflict)."""

    def __init__(self, existing: FakeContainer | None, log: list[str]) -> None:
        self.existing, self.log = existing, log

    def get(self, name: str) -> FakeContainer:
        if self.existing is None or self.existing.name != name:
            raise LookupError(f"no such container: {name}")
        return self.existing

    def create(self, **kwargs: Any) -> FakeContainer:
        if self.existing is not None and f"remove {self.existing.id}" not in self.log:
            raise RuntimeError(f'Conflict: the container name "/{kwargs["name"]}" is in use')
        self.log.append(f"create {kwargs['name']}")
        return FakeContainer(kwargs["name"], "created", self.log)


def _launcher(existing_status: str | None, log: list[str]) -> tuple[DockerLauncher, Any]:
    exp, spec = _sglang_spec(PINNED)
    existing = None if existing_status is None else FakeContainer(spec.name, existing_status, log)
    client = SimpleNamespace(
        images=FakeImages({exp.images["sglang"].image: PINNED}),
        containers=FakeContainers(existing, log),
    )
    return DockerLauncher(client=client), spec


def test_a_resumed_run_never_removes_a_live_container_of_its_own_run(tmp_path: Path) -> None:
    """Issue #21: a resume with the same run id force-removed the live container of that name."""
    log: list[str] = []
    launcher, spec = _launcher("running", log)
    with pytest.raises(RunError, match=f"a container named {spec.name} is running"):
        launcher.start(spec, tmp_path / "server.log")
    assert not any(e.startswith("remove") for e in log), log


def test_a_name_taken_between_the_check_and_the_create_is_left_alone(tmp_path: Path) -> None:
    log: list[str] = []
    launcher, spec = _launcher(None, log)
    launcher.client.containers.existing = None
    # another matrix creates it after our check: our create meets a conflict
    real_create = launcher.client.containers.create

    def racing_create(**kwargs: Any) -> Any:
        launcher.client.containers.existing = FakeContainer(spec.name, "running", log)
        return real_create(**kwargs)

    launcher.client.containers.create = racing_create
    with pytest.raises(RunError, match="Conflict"):
        launcher.start(spec, tmp_path / "server.log")
    assert not any(e.startswith("remove") for e in log), log


def test_a_stopped_leftover_of_the_same_name_is_replaced(tmp_path: Path) -> None:
    log: list[str] = []
    launcher, spec = _launcher("exited", log)
    server = launcher.start(spec, tmp_path / "server.log")
    assert log == [f"remove {spec.name}-0", f"create {spec.name}", f"start {spec.name}-2"]
    assert server.container.status == "running"


def test_pins_record_options_are_key_equals_value_once_per_key() -> None:
    from bench.commands.pins import _pairs

    other_id = "sha256:" + "cd" * 32
    assert _pairs("--image-id", [f"sglang={other_id}"]) == {"sglang": other_id}
    for bad in (
        [other_id],
        [f"={other_id}"],
        ["sglang="],
        [f"sglang={other_id}", f"sglang={PINNED}"],
    ):
        with pytest.raises(InputError, match="want KEY=VALUE"):
            _pairs("--image-id", bad)
