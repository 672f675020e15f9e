"""Run folders that are not one run (issue 42, class 6): report and compare state what a folder
holds or refuse it (exit 2), naming the artifact; and a report accounts for every payload it
could not read (issue 39, class 6)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from report_factory import Spec, write_artifacts

from bench.cli import main
from bench.core import InputError
from bench.report import compare_hosts
from bench.report._context import build_context
from bench.report._load import load_artifacts


def specs(decode: float = 92.8, simulated: bool = False) -> list[Spec]:
    return [
        Spec("vllm-mtp", "vllm", "MTP", [decode, decode + 0.1, decode - 0.1], [70.0, 70.5, 70.2],
             simulated=simulated),
        Spec("vllm-baseline", "vllm", "NONE", [50.0, 50.2, 49.9], [60.0, 60.4, 60.1],
             acceptance=None, simulated=simulated),
    ]  # fmt: skip


def refused(art: Path, artifact: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        load_artifacts(art)
    assert err.value.where.endswith(artifact), err.value
    assert words in err.value.reason, err.value.reason


def edit(path: Path, **change: object) -> None:
    data = json.loads(path.read_text())
    for dotted, value in change.items():
        node = data
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    path.write_text(json.dumps(data))


def test_a_payload_of_another_run_is_refused(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", specs())
    load_artifacts(art)  # one run as written
    other = write_artifacts(tmp_path / "b", specs(decode=99.0))
    shutil.copy(other / "payloads" / "vllm-mtp-c1.json", art / "payloads" / "vllm-mtp-c1.json")
    refused(art, "payloads/vllm-mtp-c1.json", "a payload of run")


def test_a_payload_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", specs())
    edit(art / "payloads" / "vllm-mtp-c1.json", schemaVersion="specbench.payload/2")
    refused(art, "payloads/vllm-mtp-c1.json", "schemaVersion 'specbench.payload/2'")


def test_two_payloads_of_one_configuration_are_refused(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", specs())
    shutil.copy(art / "payloads" / "vllm-mtp-c1.json", art / "payloads" / "vllm-mtp-c1 (1).json")
    with pytest.raises(InputError) as err:
        load_artifacts(art)
    # the copy's name does not say what it holds, and it is a second vllm-mtp c=1 either way
    assert "vllm-mtp-c1 (1).json" in err.value.where
    # a copy whose content claims another level is refused for its name too
    (art / "payloads" / "vllm-mtp-c1 (1).json").unlink()
    src = art / "payloads" / "vllm-baseline-c1.json"
    shutil.copy(src, art / "payloads" / "vllm-baseline-c1.retry.json")
    shutil.copy(src, art / "payloads" / "vllm-baseline-c1.again.json")
    load_artifacts(art)  # superseded attempts, each its own key: one run
    shutil.copy(src, art / "payloads" / "vllm-mtp-c1.json")
    refused(art, "payloads/vllm-mtp-c1.json", "the matrix names that payload")


def test_two_payloads_of_one_level_without_a_lock_are_refused(tmp_path: Path) -> None:
    """A folder of `specbench run` payloads: the same configuration and level twice would be
    two claims of one figure."""
    art = write_artifacts(tmp_path / "a", specs())
    (art / "experiment.lock.json").unlink()
    shutil.copy(art / "payloads" / "vllm-mtp-c1.json", art / "payloads" / "copy.json")
    with pytest.raises(InputError) as err:
        load_artifacts(art)
    assert "a second payload of vllm-mtp at concurrency 1" in err.value.reason


def test_a_listed_payload_that_is_missing_is_refused(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", specs())
    (art / "payloads" / "vllm-baseline-c1.json").unlink()
    refused(art, "payloads/vllm-baseline-c1.json", "listed in SHA256SUMS but missing")
    # the same payload named by status.json only
    art2 = write_artifacts(tmp_path / "b", specs())
    lock = json.loads((art2 / "experiment.lock.json").read_text())
    status = {
        "schema": "specbench.status/1", "run_id": lock["run_id"], "simulated": False,
        "written_at": "2026-12-06T00:00:00Z",
        "configurations": {"vllm-baseline": {"status": "done", "payloads":
                                             ["vllm-baseline-c1.json", "vllm-baseline-c2.json"]}},
    }  # fmt: skip
    (art2 / "status.json").write_text(json.dumps(status))
    refused(art2, "payloads/vllm-baseline-c2.json", "listed in status.json")


def test_another_listed_file_that_is_missing_is_stated(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", specs())
    (art / "provenance.json").unlink()
    entry = next(f for f in load_artifacts(art).files if f.path == "provenance.json")
    assert entry.verdict.startswith("MISSING") and entry.sha256 is None


def test_status_of_another_run_and_mixed_emulation_are_refused(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "a", specs())
    status = {"schema": "specbench.status/1", "run_id": "someone-else", "simulated": False,
              "written_at": "2026-12-06T00:00:00Z", "configurations": {}}  # fmt: skip
    (art / "status.json").write_text(json.dumps(status))
    refused(art, "status.json", "run 'someone-else'")
    (art / "status.json").unlink()
    edit(art / "payloads" / "vllm-mtp-c1.json", simulated=True, evidence__run__simulated=True)
    refused(art, "payloads/vllm-mtp-c1.json", "SIMULATED (emulator output) payload in a real run")


def test_copies_of_one_run_do_not_compare(tmp_path: Path) -> None:
    a = write_artifacts(tmp_path / "gpu1", specs())
    b = write_artifacts(tmp_path / "gpu2", specs())
    compare_hosts([a, b])  # two runs
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    # the copy was re-reported (a status.json of its own): still the same run
    (copy / "status.json").write_text(
        json.dumps(
            {
                "schema": "specbench.status/1",
                "simulated": False,
                "configurations": {},
                "run_id": json.loads((a / "experiment.lock.json").read_text())["run_id"],
                "written_at": "2026-12-06T03:00:00Z",
            }
        )
    )
    with pytest.raises(InputError, match=r"a copy of the run in .*gpu1 \(the same run id"):
        compare_hosts([a, copy])
    # without their locks, the payloads the run wrote give the copy away
    (copy / "experiment.lock.json").unlink()
    (copy / "status.json").unlink()
    # and without its SHA256SUMS, which no longer vouches for the edited payloads (issue 47:
    # a payload that differs from its entry is used for no figure)
    (copy / "SHA256SUMS").unlink()
    for p in (copy / "payloads").iterdir():
        edit(p, evidence__run__run_id=None)
    shutil.copytree(copy, tmp_path / "copy2")
    with pytest.raises(InputError, match="byte for byte"):
        compare_hosts([copy, tmp_path / "copy2"])


def test_an_emulated_run_does_not_compare_with_a_real_one(tmp_path: Path) -> None:
    real = write_artifacts(tmp_path / "gpu1", specs())
    sim = write_artifacts(tmp_path / "emu", specs(simulated=True))
    with pytest.raises(InputError, match=r"emu is an emulated run .* gpu1 a real one"):
        compare_hosts([real, sim])


def test_the_cli_refuses_with_exit_2_naming_the_payload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    art = write_artifacts(tmp_path / "a", specs())
    shutil.copy(art / "payloads" / "vllm-mtp-c1.json", art / "payloads" / "dup.json")
    with pytest.raises(SystemExit) as ex:
        main(["report", str(art), "--out", str(tmp_path / "out")])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert "payloads/dup.json" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_an_unreadable_payload_is_accounted_for(tmp_path: Path) -> None:
    """Issue 39 class 6: the baseline's payload truncated. The report lists it and never says
    that no run was invalid or that no baseline was measured."""
    art = write_artifacts(tmp_path / "a", specs())
    p = art / "payloads" / "vllm-baseline-c1.json"
    p.write_bytes(p.read_bytes()[:100])
    rs = load_artifacts(art)
    (u,) = rs.unreadable
    assert (u.path, u.config, u.concurrency, u.method) == (
        "payloads/vllm-baseline-c1.json", "vllm-baseline", 1, "NONE"
    )  # fmt: skip
    assert "JSON" in u.reason
    ctx = build_context(rs)
    assert ctx.unreadable == [u]
    out = tmp_path / "out"
    main_ok(["report", str(art), "--out", str(out)])
    text = (out / "REPORT.md").read_text()
    assert "No run was invalid" not in text
    assert "No configuration without speculation was measured" not in text
    assert "payloads/vllm-baseline-c1.json" in text.split("## Correctness issues")[1]


def main_ok(argv: list[str]) -> None:
    try:
        main(argv)
    except SystemExit as ex:
        assert not ex.code, ex.code


def test_a_truncated_bundle_tarball_is_named_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 42 class 9: a .tar.gz cut short gave only "Aborted."."""
    import io
    import os
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = os.urandom(64 * 1024)  # incompressible: the cut lands inside the member
        info = tarfile.TarInfo("bundle/artifacts/payloads/x.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    cut = tmp_path / "bundle.tar.gz"
    cut.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    with pytest.raises(SystemExit) as ex:
        main(["verify-bundle", str(cut)])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert f"{cut}: truncated archive" in err and "Aborted" not in err


def test_compare_names_an_unreadable_payload(tmp_path: Path) -> None:
    a = write_artifacts(tmp_path / "gpu1", specs())
    b = write_artifacts(tmp_path / "gpu2", specs(decode=99.0))
    (b / "payloads" / "vllm-baseline-c1.json").write_text("{")
    cmp = compare_hosts([a, b])
    assert any(
        m.startswith("payloads/vllm-baseline-c1.json on gpu2: could not be read")
        for m in cmp.missing
    ), cmp.missing
