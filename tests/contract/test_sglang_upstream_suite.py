"""The SGLang unit suite for the patched code path, run against the pinned release with and
without our patch (see upstream_suite.py for what is selected and why).

Writes the record to ``$SPECBENCH_SGLANG_SUITE_RECORD`` (default
``<upstream cache>/records/sglang-suite.json``) for the image provenance and the report."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import pytest
from conftest import PATCHES, in_ci
from upstream_suite import (
    PROBES_IN_TREE,
    RECORD_NAME,
    REPO_ROOT,
    build_tree,
    declared_tests,
    differing,
    exercises_the_path,
    find_sdist,
    probe_files,
    run_suite,
    select_upstream_tests,
    summarize,
)

from bench.core import write_text
from bench.engines.upstream import (
    SUITE_RECORD_NAME,
    UpstreamSource,
    patches_sha256,
    suite_record_path,
)
from bench.schema import SuiteRecord

assert SUITE_RECORD_NAME == RECORD_NAME  # the report and the matrix read what this writes


def record_path() -> Path:
    return suite_record_path()


@pytest.fixture(scope="module")
def record(
    upstream: dict[str, UpstreamSource], tmp_path_factory: pytest.TempPathFactory
) -> SuiteRecord:
    src = upstream["sglang"]
    work = tmp_path_factory.mktemp("sglang-suite")
    try:
        sdist = find_sdist(src.package.name, src.package.version, work / "sdist")
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        msg = f"package index unreachable for the sdist lookup: {err}"
        if in_ci():
            pytest.fail(msg + " (CI=true: contract tests must not be skipped)")
        pytest.skip(msg)
    selection = select_upstream_tests(src.root, PATCHES, src.wheel, src.wheel_sha256, sdist)
    runs = {
        kind: run_suite(
            build_tree(src.root, work / kind, PATCHES if kind == "patched" else []),
            kind,
            selection.cpu_runnable,
            work / f"{kind}-run",
        )
        for kind in ("patched", "pristine")
    }
    result = SuiteRecord(
        upstream_version=src.package.version,
        reproduce=f"python -m pytest {Path(__file__).relative_to(REPO_ROOT)}",
        python=platform.python_version(),
        pytest=pytest.__version__,
        patches=[p.name for p in PATCHES],
        patch_sha256=patches_sha256(),
        summary=summarize(runs["patched"], selection),
        selection=selection,
        patched=runs["patched"],
        pristine=runs["pristine"],
        differs_without_patch=differing(runs["patched"], runs["pristine"]),
    )
    write_text(record_path(), result.model_dump_json(indent=1) + "\n")
    return result


def test_the_release_has_no_sdist_to_scan(record: SuiteRecord) -> None:
    """The selection scans the wheel only, because the index has no sdist for the release.
    If one appears, its test files must be scanned too (upstream_suite.select_upstream_tests)."""
    assert record.selection.sdist is None, f"{record.selection.sdist}: scan its tests too"


def test_every_selected_upstream_test_is_run_or_listed_as_needing_a_gpu(
    record: SuiteRecord,
) -> None:
    sel = record.selection
    assert sel.scanned_test_files > 0, "no test files found in the pinned wheel"
    assert "sglang.srt.configs.model_config" in sel.code_path_modules
    gpu = {g.file for g in sel.needs_gpu}
    assert sorted(gpu | set(sel.cpu_runnable)) == sel.selected
    assert not gpu & set(sel.cpu_runnable)
    assert all(g.reasons for g in sel.needs_gpu)
    assert record.summary.needs_gpu >= len(sel.needs_gpu)
    ran = {t.id.split("::")[0] for t in record.patched.tests if t.origin == "upstream"}
    for rel in sel.cpu_runnable:  # each run file contributed at least one test
        assert any(rel.removesuffix(".py").replace("/", ".") in r for r in ran), rel


def test_patched_release_passes_the_whole_suite(record: SuiteRecord) -> None:
    run = record.patched
    bad = [(t.id, t.message) for t in run.tests if t.outcome in ("failed", "error")]
    assert not bad, bad
    assert run.failed == run.errors == 0 and run.returncode == 0
    assert run.passed == len(run.tests) - run.skipped
    assert record.summary.passed == run.passed and record.summary.failed == 0
    assert all(t.outcome == "passed" for t in run.tests if t.origin == "specbench")
    # Every probe function ran (a collection problem would drop it silently).
    ran = {t.id.split("[")[0] for t in run.tests if t.origin == "specbench"}
    for probe in probe_files():
        for name in declared_tests(probe):
            assert f"{PROBES_IN_TREE}.{probe.stem}::{name}" in ran, name


def test_without_the_patch_exactly_the_patch_targets_change(record: SuiteRecord) -> None:
    targets = {t.id for t in record.patched.tests if t.targets_patch}
    assert targets, "no probe of the patched behaviour"
    pristine = {t.id: t.outcome for t in record.pristine.tests}
    assert all(pristine[i] == "failed" for i in targets), pristine
    assert set(record.differs_without_patch) == targets
    assert record.pristine.returncode != 0


def test_record_is_written_and_reads_back(record: SuiteRecord) -> None:
    text = record_path().read_text(encoding="utf-8")
    assert SuiteRecord.model_validate_json(text) == record
    assert record.patch_sha256 == patches_sha256()


# -- the runner itself, on a stand-in tree (the pinned wheel has no CPU-runnable upstream test
# for this path, so the upstream branch of the runner is exercised here) ---------------------

STAND_IN_TEST = """
import torch  # not installed here: the plugin stubs it

from sglang.srt.configs.answer import ANSWER


def test_reads_the_tree():
    assert ANSWER == 42


def test_fails():
    assert ANSWER == 0
"""


def test_runner_runs_upstream_files_from_the_tree_without_the_package_init(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    pkg = tree / "sglang" / "srt" / "configs"
    pkg.mkdir(parents=True)
    (tree / "sglang" / "__init__.py").write_text("raise ImportError('runtime init ran')\n")
    (pkg / "answer.py").write_text("ANSWER = 42\n")
    (pkg / "test_answer.py").write_text(STAND_IN_TEST)
    rel = "sglang/srt/configs/test_answer.py"
    run = run_suite(tree, "patched", [rel], tmp_path / "run", with_probes=False)
    outcomes = {t.id.rsplit("::", 1)[1]: (t.origin, t.outcome) for t in run.tests}
    assert outcomes == {
        "test_reads_the_tree": ("upstream", "passed"),
        "test_fails": ("upstream", "failed"),
    }, run.tests
    assert (run.passed, run.failed, run.returncode) == (1, 1, 1)
    assert all(t.id.startswith("sglang.srt.configs.test_answer") for t in run.tests)


# -- selection by code path (issue 22, item 1) ------------------------------------------------

LMCACHE_TEST = "sglang/srt/mem_cache/storage/lmcache/unit_test.py"


def test_upstream_files_are_selected_by_the_path_they_exercise_not_by_an_import(
    upstream: dict[str, UpstreamSource], tmp_path: Path
) -> None:
    """The wheel's LMCache storage test imports ModelConfig (a patched module) but never
    reaches the draft's quantization: it is not selected. A file naming a field on the path is."""
    src = upstream["sglang"]
    lmcache = (src.root / LMCACHE_TEST).read_text(encoding="utf-8")
    assert "model_config import ModelConfig" in lmcache  # the import that once selected it
    sel = select_upstream_tests(src.root, PATCHES, src.wheel, src.wheel_sha256, None)
    assert sel.scanned_test_files > 0
    assert LMCACHE_TEST not in sel.selected
    assert sel.selected == [] and sel.needs_gpu == []  # 0.5.19's wheel has none on the path
    naming = tmp_path / "test_naming.py"
    naming.write_text("def test_x(a):\n    assert a.speculative_draft_model_quantization\n")
    importing = tmp_path / "test_importing.py"
    importing.write_text("from sglang.srt.configs.model_config import ModelConfig\n")
    assert exercises_the_path(naming) and not exercises_the_path(importing)
