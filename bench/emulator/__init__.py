"""vLLM- and SGLang-shaped servers with a known schedule, for tests and the demo.

Never a measurement: every response carries ``x-specbench-emulator: 1`` and everything the
emulator produces is SIMULATED. ``python -m bench.emulator`` imports only pydantic, aiohttp
and pyyaml (plus the standard library), so it runs in a slim container.
"""

from __future__ import annotations

from bench.emulator.profile import FailMode, Profile, load_profile, shipped_profiles
from bench.emulator.runner import EmulatorHandle, serve_in_thread

__all__ = [
    "EmulatorHandle",
    "FailMode",
    "Profile",
    "load_profile",
    "serve_in_thread",
    "shipped_profiles",
]
