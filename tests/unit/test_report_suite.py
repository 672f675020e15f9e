"""The report says what the suite record of the patched SGLang shows ran: for 0.5.19, no upstream
test (none in the published artifacts exercises the draft-quantization path) and our probes
(issue 22, item 1)."""

from __future__ import annotations

from pathlib import Path

from report_factory import seed_matrix, write_artifacts

from bench.report import render_report
from bench.schema import SuiteCounts, SuiteRecord, SuiteRun, SuiteTest, UpstreamSelection

PROBES = 7


def record(selected: list[str], upstream_passed: int) -> SuiteRecord:
    tests = [
        SuiteTest(id=f"specbench_probes.p::test_{i}", origin="specbench", outcome="passed",
                  targets_patch=i == 0)
        for i in range(PROBES)
    ] + [
        SuiteTest(id=f"upstream.t::test_{i}", origin="upstream", outcome="passed",
                  targets_patch=False)
        for i in range(upstream_passed)
    ]  # fmt: skip
    run = SuiteRun(tree="patched", command=["pytest"], returncode=0, seconds=1.0,
                   passed=len(tests), failed=0, errors=0, skipped=0, tests=tests)  # fmt: skip
    return SuiteRecord(
        upstream_version="0.5.19", reproduce="pytest tests/contract", python="3.11",
        pytest="9.2", patches=["0001.patch"], patch_sha256="a" * 64,
        summary=SuiteCounts(passed=len(tests), failed=0, skipped=0, needs_gpu=0,
                            upstream_passed=upstream_passed, specbench_passed=PROBES),
        selection=UpstreamSelection(artifact="sglang.whl", artifact_sha256="0" * 64, sdist=None,
                                    scanned_test_files=41, code_path_modules=[],
                                    selected=selected, needs_gpu=[], cpu_runnable=selected),
        patched=run, pristine=run.model_copy(update={"tree": "pristine"}),
        differs_without_patch=[],
    )  # fmt: skip


def render(tmp_path: Path, rec: SuiteRecord) -> str:
    art = write_artifacts(tmp_path / "art", [s for s in seed_matrix() if s.concurrency == 1])
    (art / "upstream").mkdir()
    (art / "upstream" / "sglang-suite.json").write_text(rec.model_dump_json())
    return " ".join(render_report(art, tmp_path / "out").read_text(encoding="utf-8").split())


def test_no_upstream_test_on_the_path_is_said_plainly(tmp_path: Path) -> None:
    text = render(tmp_path, record(selected=[], upstream_passed=0))
    assert (
        "no upstream test in the published SGLang 0.5.19 artifacts covers the "
        "draft-quantization path (41 test files of the wheel scanned; the release publishes "
        "no sdist), so none ran; 7 specbench probes passed against the patched wheel"
    ) in text
    assert "cannot be reproduced from the published artifacts" in text
    assert "SGLang's own suite" not in text


def test_upstream_tests_on_the_path_are_counted_as_such(tmp_path: Path) -> None:
    text = render(tmp_path, record(selected=["sglang/t.py"], upstream_passed=2))
    assert "9 passed, 0 failed; 2 of the passes are upstream tests of the published" in text
    assert "no upstream test in the published" not in text
