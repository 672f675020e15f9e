"""A session resource that is built at most once, whatever happens.

Called from a ``pytest_runtest_setup`` hook, before any fixture of the test is set up: a failed
build (the vLLM CPU image, say) errors the first test that needs it, with the build's log, and
every later test is skipped with a pointer to that first test; the build never runs again. A
session-scoped fixture cannot do this: pytest caches its exception and re-raises it, log and
all, in every test that uses it (each of the engine tier's tests printed the broken build)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import pytest

T = TypeVar("T")


class BuildOnce(Generic[T]):
    def __init__(self, what: str) -> None:
        self.what = what
        self.built: tuple[T] | None = None
        self.failed_in: str | None = None

    def get(self, nodeid: str, build: Callable[[], T]) -> T:
        """The built value; builds it on the first call (``nodeid``: the test asking)."""
        if self.built is not None:
            return self.built[0]
        if self.failed_in is not None:
            pytest.skip(f"{self.what} failed, see {self.failed_in}")
        try:
            value = build()
        except Exception as err:  # any failure: recorded once, never retried
            self.failed_in = nodeid
            why = str(err)
        else:
            self.built = (value,)
            return value
        pytest.fail(f"{self.what} failed:\n{why}", pytrace=False)

    @property
    def value(self) -> T:
        assert self.built is not None, f"{self.what}: not built (pytest_runtest_setup builds it)"
        return self.built[0]


def docker_reachable() -> bool:
    """True when a Docker engine answers a ping (the docker_client fixture says why not)."""
    import docker

    try:
        client = docker.from_env()
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False
