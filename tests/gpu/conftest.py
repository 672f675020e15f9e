"""GPU-only tests: marked ``gpu`` (CI never selects them). Without a GPU they skip, unless
SPECBENCH_REQUIRE_GPU=1 (set on the device machine), where a missing GPU is a failure."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def nvml_ok() -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as err:
        if os.environ.get("SPECBENCH_REQUIRE_GPU") == "1":
            pytest.fail(f"SPECBENCH_REQUIRE_GPU=1 but NVML is unusable: {err}")
        pytest.skip(f"no NVIDIA GPU here: {err}")
