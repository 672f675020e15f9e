"""The engine tier: one image build, one pair of tiny models, one matrix run (one server start
per configuration, test_matrix_vllm_cpu.py's ``tiny_run``) that every test reads. Docker must be
reachable; in CI (CI=true) an unreachable engine fails the tier (tests/conftest.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import engine_server as es
import pytest
from build_once import BuildOnce, docker_reachable
from tiny_run import TinyRun, make_tiny_run

from bench.tinymodel import TinyModels, make_tiny_models

IMAGE_BUILD: BuildOnce[str] = BuildOnce("the vLLM CPU image build (docker/vllm-cpu/build.sh)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Build the image before any fixture of the first engine test: a failed build errors that
    test with its log and skips the others (tests/build_once.py). Without a reachable Docker
    engine nothing is built here: the docker_client fixture fails (CI) or skips the test."""
    if docker_reachable():
        IMAGE_BUILD.get(item.nodeid, lambda: es.build_image()[0])


@pytest.fixture(scope="session")
def vllm_cpu_image(docker_client: Any) -> str:
    return IMAGE_BUILD.value


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    folder = tmp_path_factory.mktemp("tiny-models")
    made = make_tiny_models(folder, seed=0)
    # The server runs as uid 10001: the mounted folders must be readable by others.
    for path in (
        folder,
        *(getattr(made, m).path for m in ("target", "draft", "chain", "dflash", "mtp")),
    ):
        path.chmod(0o755)
    return made


@pytest.fixture(scope="session")
def tiny_run(
    vllm_cpu_image: str, tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory
) -> TinyRun:
    """The whole tiny experiment, once, for every engine test (tiny_run.py)."""
    return make_tiny_run(vllm_cpu_image, tiny_models, tmp_path_factory)


class EngineRuns:
    """Lazily runs each configuration of engine_server.CONFIGS once (the seed methods' tests:
    test_seed_methods_vllm_cpu.py); one container at a time."""

    def __init__(self, client: Any, models: Path, work: Path) -> None:
        self.client, self.models, self.work = client, models, work
        self.done: dict[str, es.ConfigRun] = {}

    def __getitem__(self, config: str) -> es.ConfigRun:
        if config not in self.done:
            self.done[config], _ = es.run_config(self.client, config, self.models, self.work)
        return self.done[config]


@pytest.fixture(scope="session")
def engine_runs(
    docker_client: Any,
    vllm_cpu_image: str,
    tiny_models: TinyModels,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[EngineRuns]:
    runs = EngineRuns(docker_client, tiny_models.target.path.parent, tmp_path_factory.mktemp("w"))
    yield runs
    for leftover in docker_client.containers.list(all=True, filters={"name": f"{es.NAME_PREFIX}-"}):
        if leftover.name.startswith(f"{es.NAME_PREFIX}-{os.getpid()}-"):
            leftover.remove(force=True)
