"""vLLM- and SGLang-shaped servers with a known schedule, for tests and the demo.

Never a measurement: every response carries ``x-specbench-emulator: 1`` and everything the
emulator produces is SIMULATED. ``python -m bench.emulator`` imports only pydantic, aiohttp
and pyyaml (plus the standard library), so it runs in a slim container.

The public names load on first use (PEP 562), so importing a submodule such as
``bench.emulator.formats`` does not pull in the server, and the server's own modules can import
their siblings without a cycle through this file.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.emulator.profile import FailMode, Profile, load_profile, shipped_profiles
    from bench.emulator.runner import EmulatorHandle, serve_in_thread

_HOME = {
    "FailMode": "bench.emulator.profile",
    "Profile": "bench.emulator.profile",
    "load_profile": "bench.emulator.profile",
    "shipped_profiles": "bench.emulator.profile",
    "EmulatorHandle": "bench.emulator.runner",
    "serve_in_thread": "bench.emulator.runner",
}

__all__ = [
    "EmulatorHandle",
    "FailMode",
    "Profile",
    "load_profile",
    "serve_in_thread",
    "shipped_profiles",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'bench.emulator' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
