"""The record of the suite run on the patched SGLang release (tests/contract/
test_sglang_upstream_suite.py writes it into the upstream cache; the matrix copies it into the
artifacts, the report reads it): which upstream tests the published artifacts hold for the
patched code path (for 0.5.19: none), what ran (specbench's probes, and any such upstream
test), what passed with and without the patch."""

from __future__ import annotations

from typing import Literal

from bench.core import StrictModel

Outcome = Literal["passed", "failed", "error", "skipped"]
Tree = Literal["patched", "pristine"]


class GpuOnlyFile(StrictModel):
    """A selected upstream test file that is not run here: it needs a GPU."""

    file: str  # relative to the source root, e.g. sglang/srt/.../unit_test.py
    tests: list[str]  # its test functions / methods (test_*), by static scan
    reasons: list[str]  # "line N: <text>" for each CUDA marker found


class UpstreamSelection(StrictModel):
    """Which upstream tests the pinned artifacts hold for the patched code path."""

    artifact: str  # the wheel's file name
    artifact_sha256: str
    sdist: str | None  # the release's sdist file name on the index; None: there is none
    scanned_test_files: int
    code_path_modules: list[str]  # patched modules + the package's readers of the fields
    selected: list[str]
    needs_gpu: list[GpuOnlyFile]
    cpu_runnable: list[str]


class SuiteTest(StrictModel):
    id: str  # junit classname::name, e.g. specbench_probes.probe_x::test_y
    origin: Literal["upstream", "specbench"]
    outcome: Outcome
    targets_patch: bool
    message: str | None = None


class SuiteRun(StrictModel):
    """One pytest subprocess over one tree."""

    tree: Tree
    command: list[str]
    returncode: int
    seconds: float
    passed: int
    failed: int
    errors: int
    skipped: int
    tests: list[SuiteTest]


class SuiteCounts(StrictModel):
    """The headline figures for provenance: the patched run plus what could not run here."""

    passed: int
    failed: int  # failures + errors
    skipped: int
    needs_gpu: int  # test functions in selected upstream files that need a GPU (not run)
    upstream_passed: int  # of ``passed``, tests that came from the upstream artifact
    specbench_passed: int  # of ``passed``, our probes


class SuiteRecord(StrictModel):
    """The JSON record (``<upstream cache>/records/sglang-suite.json``)."""

    schema_version: Literal[1] = 1
    engine: Literal["sglang"] = "sglang"
    upstream_version: str
    reproduce: str  # the command that runs the suite and writes this record (repo root)
    python: str
    pytest: str
    patches: list[str]
    patch_sha256: str
    summary: SuiteCounts
    selection: UpstreamSelection
    patched: SuiteRun
    pristine: SuiteRun
    differs_without_patch: list[str]  # test ids whose outcome changes when unpatched
