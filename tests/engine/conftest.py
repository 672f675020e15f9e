"""The engine tier: one image build, one pair of tiny models, one server per configuration.

Every configuration is started once, measured once (greedy prompts, ``specbench run``, the
counters) and stopped before the next starts: the tests only read those results. Docker must
be reachable; in CI (CI=true) an unreachable engine fails the tier (tests/conftest.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import engine_server as es
import pytest

from bench.tinymodel import TinyModels, make_tiny_models


@pytest.fixture(scope="session")
def vllm_cpu_image(docker_client: Any) -> str:
    tag, _ = es.build_image()
    return tag


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


class EngineRuns:
    """Lazily runs each configuration once; one container at a time."""

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
