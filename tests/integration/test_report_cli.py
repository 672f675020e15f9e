"""specbench report / publish / verify-bundle through the CLI on synthetic artifacts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from report_factory import seed_matrix, write_artifacts

from bench.schema import ValidityReason


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=120
    )


def test_report_command_writes_report(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "art", seed_matrix(sweep=False))
    res = cli(
        "report", str(art), "--out", str(tmp_path / "out"), "--reference", "reports/reference"
    )
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "out" / "REPORT.md").read_text()
    assert "## Side by side with the published reference" in text
    assert "| vllm-dflash | 109.36 | 109.36 | 0.00% |" in text


def test_publish_refuses_simulated_and_invalid_only(tmp_path: Path) -> None:
    sim = write_artifacts(tmp_path / "sim", seed_matrix(sweep=False))
    res = cli("publish", str(sim), "--out", str(tmp_path / "b1"))
    assert res.returncode == 2 and "SIMULATED" in res.stderr
    specs = seed_matrix(simulated=False, sweep=False)[:1]
    specs[0].reasons = [ValidityReason(code="zero-acceptance", message="no acceptance")]
    bad = write_artifacts(tmp_path / "bad", specs)
    res = cli("publish", str(bad), "--out", str(tmp_path / "b2"))
    assert res.returncode == 2 and "no payload is valid" in res.stderr
    assert not (tmp_path / "b1").exists() and not (tmp_path / "b2").exists()


def test_toy_model_runs_are_labelled_and_never_published(tmp_path: Path) -> None:
    specs = seed_matrix(simulated=False, sweep=False)
    for s in specs:
        s.toy_model = True
    art = write_artifacts(tmp_path / "art", specs)
    res = cli("report", str(art), "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "out" / "REPORT.md").read_text()
    assert text.startswith("> **REAL ENGINE, TOY MODEL:") and "SIMULATED" not in text
    res = cli("publish", str(art), "--out", str(tmp_path / "bundle"))
    assert res.returncode == 2 and "toy model" in res.stderr
    assert not (tmp_path / "bundle").exists()


def test_publish_and_verify_bundle(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "art", seed_matrix(simulated=False, sweep=False))
    bundle = tmp_path / "bundle"
    res = cli("publish", str(art), "--out", str(bundle), "--tarball")
    assert res.returncode == 0, res.stderr
    assert (bundle / "REPORT.md").is_file() and (bundle / "artifacts" / "SHA256SUMS").is_file()
    # issue 48: the bundle says how to cite it (CFF 1.2.0's required keys), listed in the sums
    cff = yaml.safe_load((bundle / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "dataset"
    assert {"message", "title", "authors"} <= set(cff) and cff["authors"][0]["name"]
    assert cff["version"] in cff["title"] and cff["version"].startswith("test-")
    assert "CITATION.cff" in (bundle / "SHA256SUMS").read_text(encoding="utf-8")
    assert cli("verify-bundle", str(bundle)).returncode == 0
    tar = tmp_path / "bundle.tar.gz"
    ok = cli("verify-bundle", str(tar))
    assert ok.returncode == 0, ok.stdout
    (bundle / "decode.svg").write_bytes(b"tampered")
    (bundle / "extra.txt").write_text("x")
    res = cli("verify-bundle", str(bundle))
    assert res.returncode == 1
    assert "decode.svg: SHA256 mismatch" in res.stdout
    assert "extra.txt: present but not listed" in res.stdout


def _pinned_lock(specs: list[object], unpinned: bool) -> str:
    """A real run's lock whose pins came from the pins lock, one left unpinned if asked."""
    from report_factory import lock_for

    from bench.schema import Pin, RunLock

    lock = RunLock.model_validate_json(lock_for(specs))  # type: ignore[arg-type]
    digest = "sha256:" + "a" * 64
    pins = [
        Pin(kind="image", key="vllm", ref="vllm/vllm-openai:v0.33.0", field="digest",
            value=digest, source="lock"),
        Pin(kind="model", key="target", ref="btbtyler09/Qwen3.8-27B-GPTQ-4bit", field="revision",
            value=None if unpinned else "1" * 40, source="unpinned" if unpinned else "lock"),
    ]  # fmt: skip
    return lock.model_copy(
        update={"simulated": False, "pins": pins, "pins_lock": "/x/seed.lock.yaml",
                "unresolved_pins": ["models.target.revision (x)"] if unpinned else []}
    ).model_dump_json(by_alias=True)  # fmt: skip


def test_report_names_each_pins_source_and_publish_refuses_an_unpinned_run(
    tmp_path: Path,
) -> None:
    """Issue 29: the report says where each pin came from; an --allow-unpinned run is marked
    UNPINNED and publish refuses it with the way to pin it."""
    specs = seed_matrix(simulated=False, sweep=False)
    art = write_artifacts(tmp_path / "art", specs, lock=_pinned_lock(specs, unpinned=True))
    res = cli("report", str(art), "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "out" / "REPORT.md").read_text()
    assert "> **UNPINNED**: this run went without 1 pin(s)" in text
    assert "model target (btbtyler09/Qwen3.8-27B-GPTQ-4bit): revision" in text
    assert "| image vllm | vllm/vllm-openai:v0.33.0 | digest |" in text
    assert "| pins lock (seed.lock.yaml) |" in text and "UNPINNED (--allow-unpinned)" in text
    res = cli("publish", str(art), "--out", str(tmp_path / "bundle"))
    assert res.returncode == 2 and "went without 1 pin(s)" in res.stderr
    assert "lock.yaml" in res.stderr and not (tmp_path / "bundle").exists()

    pinned = write_artifacts(tmp_path / "ok", specs, lock=_pinned_lock(specs, unpinned=False))
    res = cli("publish", str(pinned), "--out", str(tmp_path / "bundle2"))
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "bundle2" / "REPORT.md").read_text()
    assert "UNPINNED" not in text and "Pins: where each came from" in text
