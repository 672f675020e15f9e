"""What tests/infra expects of the host it checks (testinfra's ``host`` fixture).

The verify role writes the expectations (backend, pins, images, models) to a JSON file and
points SPECBENCH_INFRA_EXPECT at it. Without it (a plain ``pytest tests/infra`` in CI) the
pins come from ansible/group_vars/all.yml and the experiment file, the backend from
SPECBENCH_INFRA_BACKEND, and checks of provisioned state skip with the reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXPECT_ENV = "SPECBENCH_INFRA_EXPECT"
BACKEND_ENV = "SPECBENCH_INFRA_BACKEND"


def _defaults() -> dict[str, Any]:
    pins = yaml.safe_load((REPO / "ansible" / "group_vars" / "all.yml").read_text())
    exp_path = REPO / pins["specbench_experiment"]
    exp = yaml.safe_load(exp_path.read_text())
    home = pins["specbench_home"]
    return {
        "backend": os.environ.get(BACKEND_ENV),
        "provisioned": False,
        "specbench_home": home,
        "specbench": f"{home}/venv/bin/specbench",
        "emulator_image": None,
        "nvidia_driver_version": pins["nvidia_driver_version"],
        "nvidia_driver_branch": pins["nvidia_driver_branch"],
        "nvidia_driver_min_version": pins["nvidia_driver_min_version"],
        "nvidia_driver_record_file": pins["nvidia_driver_record_file"],
        "nvidia_container_toolkit_version": pins["nvidia_container_toolkit_version"],
        "docker_version": pins["docker_version"],
        "gpu_count": 2,
        "gpu_name": "NVIDIA GeForce RTX 3090",
        "images": [v for v in exp["images"].values() if "build" not in v],
        "models": list(exp["models"].values()),
        "models_dir": f"{home}/models",
        "stages": ["provision", "images", "models"],
    }


@pytest.fixture(scope="session")
def expect() -> dict[str, Any]:
    path = os.environ.get(EXPECT_ENV)
    if not path:
        return _defaults()
    data: dict[str, Any] = json.loads(Path(path).read_text())
    data["provisioned"] = True
    return data


@pytest.fixture(scope="session")
def provisioned(expect: dict[str, Any]) -> dict[str, Any]:
    """Expectations of a host that site.yml provisioned; skip (with why) otherwise."""
    if not expect["provisioned"]:
        pytest.skip(
            f"needs a host provisioned by ansible/site.yml ({EXPECT_ENV} unset; the verify role "
            "sets it and runs these checks as the last provisioning step)"
        )
    return expect


@pytest.fixture(scope="session")
def gpu_host(expect: dict[str, Any]) -> dict[str, Any]:
    """Expectations of a real GPU host; skip (with why) on the emulated/CI host."""
    if expect["backend"] != "real":
        pytest.skip(
            "needs a GPU host (bench_backend=real): this host runs the emulated backend; run "
            f"the verify role against the GPU host, or set {BACKEND_ENV}=real with --hosts"
        )
    return expect


def _stage(expect: dict[str, Any], stage: str) -> dict[str, Any]:
    if stage not in expect.get("stages", [stage]):
        pytest.skip(
            f"the {stage} stage was not part of this run (tags: {expect.get('stages')}): "
            f"`--tags provision` runs before the {stage} exist; --tags verify checks them"
        )
    return expect


@pytest.fixture(scope="session")
def images_host(gpu_host: dict[str, Any]) -> dict[str, Any]:
    """A GPU host whose engine images this run pulled and built."""
    return _stage(gpu_host, "images")


@pytest.fixture(scope="session")
def models_host(gpu_host: dict[str, Any]) -> dict[str, Any]:
    """A GPU host whose models this run downloaded."""
    return _stage(gpu_host, "models")
