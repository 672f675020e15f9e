"""The engine tier: one image build, one pair of tiny models, one matrix run (one server start
per configuration, test_matrix_vllm_cpu.py's ``tiny_run``) that every test reads. Docker must be
reachable; in CI (CI=true) an unreachable engine fails the tier (tests/conftest.py).
"""

from __future__ import annotations

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
    for path in (folder, made.target.path, made.draft.path):
        path.chmod(0o755)
    return made


@pytest.fixture(scope="session")
def tiny_run(
    vllm_cpu_image: str, tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory
) -> TinyRun:
    """The whole tiny experiment, once, for every engine test (tiny_run.py)."""
    return make_tiny_run(vllm_cpu_image, tiny_models, tmp_path_factory)
