"""The kernel build a CPU engine ran, read from its server log.

vLLM's CPU wheel ships three kernel builds and picks one at run time
(``CpuPlatform.import_kernels``, vllm/platforms/cpu.py:631 in 0.32.0): ``_C`` for AVX-512 with
BF16 (AMX where the CPU has it), ``_C_AVX512``, else ``_C_AVX2``. vLLM does not log its choice,
so the engine tier's image (docker/vllm-cpu/vllm-serve-shim.py) loads the kernels through that
same dispatch, reads the library that got mapped from /proc/self/maps, and logs one line before
the server starts. This module is the one reader of that line; a unit test renders the shim's
own format string and matches it here.
"""

from __future__ import annotations

import re
from typing import Final

from bench.schema import CpuKernel

#: ``specbench-vllm-cpu: kernel build _C_AVX2 (AVX2); cpu flags: avx2 fma f16c``
CPU_KERNEL_REGEX: Final = (
    r"specbench-vllm-cpu: kernel build (?P<library>_C(?:_AVX512|_AVX2)?) "
    r"\((?P<isa>[^)]+)\); cpu flags:(?P<flags>[ a-z0-9_]*)$"
)


def cpu_kernel_from_log(text: str) -> CpuKernel | None:
    """The last kernel line of ``text`` (a resumed log holds one per server start)."""
    found = None
    for m in re.finditer(CPU_KERNEL_REGEX, text, re.MULTILINE):
        found = CpuKernel(
            library=m.group("library"), isa=m.group("isa"), cpu_flags=m.group("flags").split()
        )
    return found
