"""The images role's real path against a real registry: a first run resolves by tag and records
the pins lock; later runs are pinned to it; a changed image is refused with the fix (issue 29).

A Docker distribution registry (Debian's docker-registry, the upstream registry 2.8) serves on
127.0.0.1 (Docker treats 127.0.0.0/8 as an insecure registry by default). It holds two stand-ins
under the experiment's image names, moved to that registry: the local base image as the vLLM
image, and test_sglang_image.py's stand-in base (specbench/base + the pinned sglang wheel) as the
SGLang base. site.yml runs for real against this machine (local connection) with the real
backend and `--tags images`: the images role pulls by tag, reads each registry digest from
Docker, builds the patched SGLang image from the real docker/sglang/Dockerfile on that base, and
records everything through `specbench pins record` in the test's pins lock.

1. First run: the lock holds each registry digest (the one Docker recorded for the pull), the
   base digest and this host's image ID of the build.
2. Second run: nothing changes, pulls are by digest; then the registry's tag moves to another
   image: the run is still pinned to the lock (nothing pulled, nothing recorded).
3. The patched image's tag now points at another build: refused with `specbench pins forget`;
   after the forget the run records the new ID.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from needs import missing_tool
from test_ansible_fresh_host import _changed_tasks as _changed
from test_ansible_fresh_host import _failures
from test_sglang_image import standin  # noqa: F401  (the stand-in SGLang base, a fixture)

from bench.schema import read_lock

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "ansible"
REGISTRY_BIN = "/usr/bin/docker-registry"
EXPERIMENT = "qwen38-27b-gptq-2x3090"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not os.path.exists(REGISTRY_BIN):
        missing_tool(REGISTRY_BIN, "apt-get install docker-registry; .ci/run installs it")
    tmp = tmp_path_factory.mktemp("registry")
    addr = f"127.0.0.1:{_free_port()}"
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(tmp / "data")}},
        "http": {"addr": addr},
    }
    (tmp / "config.yml").write_text(yaml.safe_dump(config))
    with open(tmp / "registry.log", "w") as log:
        proc = subprocess.Popen([REGISTRY_BIN, "serve", str(tmp / "config.yml")], stdout=log,
                                stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", int(addr.split(":")[1])), timeout=1):
                    break
            except OSError:
                assert proc.poll() is None, (tmp / "registry.log").read_text()
                assert time.monotonic() < deadline, "the registry did not listen"
                time.sleep(0.2)
        yield addr
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _docker(*args: str) -> str:
    r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"docker {' '.join(args)}: {r.stderr}"
    return r.stdout.strip()


def _push(local: str, remote: str) -> str:
    """Put ``local`` in the registry as ``remote`` and drop the local tag (so that the role's pull
    by tag really pulls); returns the registry digest."""
    _docker("tag", local, remote)
    out = _docker("push", remote)
    _docker("rmi", remote)
    digest = next(w for w in out.split() if w.startswith("sha256:"))
    return digest


class Images:
    def __init__(self, tmp: Path, registry: str, sglang_base: str) -> None:
        self.tmp = tmp
        self.lock = tmp / "pins.lock.yaml"
        self.vllm = f"{registry}/e2e/vllm-openai:v0.33.0"
        self.base = f"{registry}/e2e/sglang:v0.5.19"
        self.vllm_digest = _push("specbench/base:bookworm", self.vllm)
        self.base_digest = _push(sglang_base, self.base)
        experiment = yaml.safe_load((REPO / "bench/experiments" / f"{EXPERIMENT}.yaml").read_text())
        experiment["images"]["vllm"]["image"] = self.vllm
        experiment["images"]["sglang"]["build"]["base_image"] = self.base
        experiment["images"]["sglang-stock"]["image"] = self.base
        self.experiment = experiment
        self.patched = experiment["images"]["sglang"]["image"]

    def run(self, name: str) -> Any:
        import ansible_runner

        private = self.tmp / "runner" / name
        private.mkdir(parents=True)
        return ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(ANSIBLE),
            playbook="site.yml",
            inventory={"all": {"hosts": {"localhost": {
                "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}},
            extravars={
                "bench_backend": "real",
                "experiment": self.experiment,
                "pins_lock_file": str(self.lock),
                # the build context is this repository (the bundle's copy on a GPU host)
                "images_src": str(REPO),
            },
            cmdline="--tags images --skip-tags preflight,prerequisites,bundle,verify",
            envvars={
                "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
                "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg"),
            },
            quiet=True,
            timeout=900,
        )  # fmt: skip


@pytest.fixture(scope="module")
def images(
    docker_client: Any,
    registry: str,
    standin: str,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Images]:
    tmp = tmp_path_factory.mktemp("images")
    imgs = Images(tmp, registry, standin)
    try:
        yield imgs
    finally:
        for ref in (imgs.patched, f"{imgs.vllm.rsplit(':', 1)[0]}@{imgs.vllm_digest}",
                    f"{imgs.base.rsplit(':', 1)[0]}@{imgs.base_digest}"):  # fmt: skip
            subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, timeout=120)


def test_first_run_resolves_by_tag_and_records_the_lock(images: Images) -> None:
    r = images.run("first")
    assert r.rc == 0, "\n".join(_failures(r))
    lock = read_lock(images.lock, EXPERIMENT)
    assert lock.images["vllm"].digest == images.vllm_digest
    assert lock.images["sglang-stock"].digest == images.base_digest
    assert lock.images["sglang"].base_digest == images.base_digest
    built = _docker("image", "inspect", "--format", "{{.Id}}", images.patched)
    assert lock.images["sglang"].image_ids == {"localhost": built}
    assert lock.models == {}  # the models stage did not run
    assert "Record what this host resolved in the pins lock on the controller." in _changed(r)


def test_later_runs_are_pinned_to_the_lock(images: Images) -> None:
    before = images.lock.read_text()
    r = images.run("second")
    assert r.rc == 0, "\n".join(_failures(r))
    assert _changed(r) == [], _changed(r)
    assert images.lock.read_text() == before
    # the registry's tag moves to another image: the run stays on the pinned digest
    moved = _push(images.patched, images.vllm)
    assert moved != images.vllm_digest
    r = images.run("moved")
    assert r.rc == 0, "\n".join(_failures(r))
    assert _changed(r) == [] and images.lock.read_text() == before
    pulled = _docker("image", "inspect", "--format", "{{json .RepoDigests}}",
                     f"{images.vllm.rsplit(':', 1)[0]}@{images.vllm_digest}")  # fmt: skip
    assert images.vllm_digest in pulled


def test_a_changed_local_build_is_refused_with_the_fix(images: Images) -> None:
    pinned = read_lock(images.lock, EXPERIMENT).images["sglang"].image_ids["localhost"]
    _docker("tag", "specbench/base:bookworm", images.patched)  # the tag: another build
    other = _docker("image", "inspect", "--format", "{{.Id}}", images.patched)
    r = images.run("changed")
    failures = _failures(r)
    assert r.rc != 0 and failures, failures
    assert "images.sglang.image_ids.localhost" in failures[0]
    assert f"found {other}, the lock pins {pinned}" in failures[0]
    assert "specbench pins forget <experiment> --image sglang --host localhost" in failures[0]
    assert read_lock(images.lock, EXPERIMENT).images["sglang"].image_ids["localhost"] == pinned
    # the fix the message gives, then the run records the build it found
    forget = subprocess.run(
        [sys.executable, "-m", "bench", "pins", "forget", f"bench/experiments/{EXPERIMENT}.yaml",
         "--image", "sglang", "--host", "localhost", "--lock", str(images.lock)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert forget.returncode == 0, forget.stderr
    r = images.run("forgotten")
    assert r.rc == 0, "\n".join(_failures(r))
    assert read_lock(images.lock, EXPERIMENT).images["sglang"].image_ids["localhost"] == other
