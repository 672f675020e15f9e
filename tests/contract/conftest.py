"""Contract-tier fixtures: the pinned upstream sources (bench.engines.upstream cache) and their
parsers.

The cache is $SPECBENCH_UPSTREAM_CACHE (default .cache/upstream); the first run downloads the two
pinned wheels with ``pip download --no-deps``. In CI a failure to get them fails the tier;
elsewhere (offline laptop) it skips with the reason.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # stubs.py, upstream_parsers.py

from upstream_parsers import UpstreamParser, sglang_parser, vllm_parser

from bench.engines.upstream import UpstreamSource, ensure_sources

REPO = Path(__file__).resolve().parents[2]
PATCHES = sorted((REPO / "docker" / "sglang" / "patches").glob("*.patch"))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def upstream() -> dict[str, UpstreamSource]:
    """Extracted .py sources of the pinned wheels, keyed by engine ("vllm", "sglang")."""
    try:
        return ensure_sources()
    except Exception as err:
        msg = f"pinned upstream sources unavailable: {err}"
        if in_ci():
            pytest.fail(msg + " (CI=true: contract tests must not be skipped)")
        pytest.skip(msg)


@pytest.fixture(scope="session")
def sglang_src(upstream: dict[str, UpstreamSource]) -> Path:
    """Root holding the pinned ``sglang/`` package."""
    return upstream["sglang"].root


@pytest.fixture(scope="session")
def vllm_src(upstream: dict[str, UpstreamSource]) -> Path:
    """Root holding the pinned ``vllm/`` package."""
    return upstream["vllm"].root


@pytest.fixture(scope="session")
def sglang_cli(sglang_src: Path) -> UpstreamParser:
    return sglang_parser(sglang_src)


@pytest.fixture(scope="session")
def vllm_cli(vllm_src: Path) -> UpstreamParser:
    return vllm_parser(vllm_src)
