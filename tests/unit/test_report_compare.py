"""specbench compare: one experiment across hosts, the significance rule per host pair, and the
refusal of runs that do not compare (hand-made artifacts with known answers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_factory import Spec, write_artifacts

from bench.core import InputError
from bench.report import compare_hosts, render_comparison


def specs(decode: list[float]) -> list[Spec]:
    return [
        Spec("vllm-mtp", "vllm", "MTP", decode, [70.0, 70.5, 71.0, 70.2], simulated=False),
        Spec(
            "vllm-baseline",
            "vllm",
            "NONE",
            [50.0, 50.2, 49.9, 50.1],
            [60.0, 60.4, 60.1, 60.2],
            acceptance=None,
            simulated=False,
        ),
    ]


SAME = [92.7, 92.8, 92.9, 92.8]
FASTER = [102.0, 102.1, 101.9, 102.0]  # +9.96% of 92.8


def test_hosts_side_by_side_with_the_significance_rule(tmp_path: Path) -> None:
    a = write_artifacts(tmp_path / "gpu1", specs(SAME))
    b = write_artifacts(tmp_path / "gpu2", specs(list(SAME)))
    c = write_artifacts(tmp_path / "gpu3", specs(FASTER))
    cmp = compare_hosts([a, b, c])
    assert [h.name for h in cmp.hosts] == ["gpu1", "gpu2", "gpu3"]
    row = next(r for r in cmp.rows if r.config == "vllm-mtp")
    ref, same, fast = row.cells
    assert ref.decode_vs_first is None
    assert same.decode_vs_first is not None
    assert same.decode_vs_first.significance == "not_significant"
    assert fast.decode_vs_first is not None and fast.decode_vs_first.significance == "significant"
    assert fast.decode_vs_first.better == "a"
    assert fast.decode_vs_first.pct == pytest.approx((102.0 / 92.8 - 1) * 100)
    # the family: 2 configurations x 2 hosts against the first x (decode, TTFT) = 8 tests
    assert cmp.family_size == 8
    assert fast.decode_vs_first.p_adjusted is not None and fast.decode_vs_first.p_value is not None
    assert fast.decode_vs_first.p_adjusted >= fast.decode_vs_first.p_value
    text = render_comparison([a, b, c], tmp_path / "out").read_text()
    assert "| vllm-mtp | 1 | gpu2 | 92.80" in text and "not significant (Holm-adjusted p=1)" in text
    assert "| vllm-mtp | 1 | gpu3 | 102.00" in text and "9.91% faster (Holm-adjusted p=" in text
    # the other way round, the change is relative to the first host: 92.8 / 102.0 - 1 = -9.02%
    back = render_comparison([c, a], tmp_path / "back").read_text()
    assert "| vllm-mtp | 1 | gpu1 | 92.80" in back and "9.02% slower (Holm-adjusted p=" in back
    assert (tmp_path / "out" / "fleet-decode.svg").is_file()


def test_different_experiments_or_workloads_are_refused(tmp_path: Path) -> None:
    a = write_artifacts(tmp_path / "gpu1", specs(SAME))
    b = write_artifacts(tmp_path / "gpu2", specs(SAME))
    lock = json.loads((b / "experiment.lock.json").read_text())
    lock["experiment"]["name"] = "another-experiment"
    (b / "experiment.lock.json").write_text(json.dumps(lock))
    with pytest.raises(InputError) as err:
        compare_hosts([a, b])
    assert err.value.reason.startswith("experiment: 'another-experiment' on gpu2")
    with pytest.raises(InputError, match="at least two"):
        compare_hosts([a])


def test_a_fetched_host_folder_compares_by_its_artifacts(tmp_path: Path) -> None:
    """site.yml fetches reports/<run-id>/<host>/ (REPORT.md next to artifacts/): that folder is
    what `specbench compare` is given, and its name is the host's."""
    a = write_artifacts(tmp_path / "run" / "gpu1" / "artifacts", specs(SAME))
    b = write_artifacts(tmp_path / "run" / "gpu2" / "artifacts", specs(FASTER))
    cmp = compare_hosts([a.parent, b.parent])
    assert [h.name for h in cmp.hosts] == ["gpu1", "gpu2"]
    row = next(r for r in cmp.rows if r.config == "vllm-mtp")
    assert row.cells[1].decode_vs_first is not None
    assert row.cells[1].decode_vs_first.significance == "significant"
    with pytest.raises(InputError, match="not a specbench artifacts folder"):
        compare_hosts([tmp_path / "run", a.parent])


def test_the_same_run_twice_is_refused(tmp_path: Path) -> None:
    import shutil

    a = write_artifacts(tmp_path / "gpu1", specs(SAME))
    with pytest.raises(InputError, match="the same run folder as"):
        compare_hosts([a, a])
    with pytest.raises(InputError, match="the same run folder as"):
        compare_hosts([a, tmp_path / "gpu1" / ".." / "gpu1"])
    (a / "status.json").write_text('{"run_id": "r1", "written_at": "2026-12-06T02:00:00Z"}\n')
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    with pytest.raises(InputError, match="a copy of the run in"):
        compare_hosts([a, copy])
