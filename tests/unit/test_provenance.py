"""Provenance with injected command answers; the H200 record validates."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bench.core import sha256_file
from bench.machine import (
    REPO_ROOT,
    SOURCE_RECORD,
    ImageRef,
    Provenance,
    Runner,
    build_hardware,
    capture_provenance,
    cpu_only,
    docker_info,
    git_info,
    read_dump,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "hardware"

DOCKER_VERSION = json.dumps(
    {
        "Client": {"Version": "28.2.2", "ApiVersion": "1.50"},
        "Server": {"Version": "28.2.2", "ApiVersion": "1.50"},
    }
)
DOCKER_INFO = json.dumps(
    {
        "Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}},
        "DefaultRuntime": "runc",
    }
)


def fake_run(answers: dict[str, str | None]) -> Runner:
    def run(argv: Sequence[str]) -> str | None:
        key = " ".join(a for a in argv if not a.startswith("/") and a != "-C")
        for k, v in answers.items():
            if key.startswith(k):
                return v
        return None

    return run


FULL = {
    "git rev-parse HEAD": "0123456789abcdef0123456789abcdef01234567\n",
    "git status": " M bench/x.py\n",
    "git rev-parse --abbrev-ref": "main\n",
    "docker version": DOCKER_VERSION,
    "docker info": DOCKER_INFO,
    "nvidia-ctk --version": "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: abc",
    "nvidia-container-cli --version": "cli-version: 1.17.8\nlib-version: 1.17.8",
}


def test_everything_known(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: x\n")
    hw = build_hardware(read_dump(FIX / "dual-3090-nvml-dump.json"))
    img = ImageRef(ref="vllm/vllm-openai:v0.33.0", engine="vllm", digest="sha256:" + "a" * 64,
                   upstreamVersion="0.33.0")  # fmt: skip
    p = capture_provenance(
        experiment_path=exp, images=[img], hardware=hw, repo_dir=tmp_path, command=["x"],
        run=fake_run(FULL),
    )  # fmt: skip
    assert p.git is not None
    assert (p.git.sha, p.git.dirty, p.git.branch) == (
        FULL["git rev-parse HEAD"].strip(),
        True,
        "main",
    )
    assert p.experiment is not None and p.experiment.sha256 == sha256_file(exp)
    assert p.images == [img]
    assert (p.driverVersion, p.cudaDriverVersion) == ("580.95.05", "13.0")
    assert p.docker is not None and p.docker.serverVersion == "28.2.2"
    assert p.docker.runtimes == ["nvidia", "runc"] and p.docker.apiVersion == "1.50"
    assert p.containerToolkit is not None
    assert (p.containerToolkit.nvidiaCtk, p.containerToolkit.nvidiaContainerCli) == (
        "1.17.8",
        "1.17.8",
    )
    assert p.command == ["x"] and p.notes == []


def test_nothing_known_is_null_not_guessed(tmp_path: Path) -> None:
    p = capture_provenance(repo_dir=tmp_path, hardware=cpu_only(), command=[], run=fake_run({}))
    assert p.git is None and "git SHA unknown" in p.notes[0]
    assert p.docker is None and p.containerToolkit is None
    assert p.driverVersion is None and p.experiment is None and p.images == []
    assert p.specbenchVersion and p.os


def test_a_copied_trees_source_record_wins_over_a_stale_git(tmp_path: Path) -> None:
    """A tree copied with an older .git: the sender's record names what was copied, git's
    view (another SHA, dirty) stays as a note; without a record, git's view is kept."""
    sent = {"sha": "f" * 40, "dirty": False, "branch": "main", "via": "gpu_fourway.sh prepare"}
    p = capture_provenance(repo_dir=tmp_path, hardware=cpu_only(), command=[], run=fake_run(FULL))
    assert p.git is not None and (p.git.sha, p.git.dirty, p.git.via) == (
        FULL["git rev-parse HEAD"].strip(),
        True,
        None,
    )
    (tmp_path / SOURCE_RECORD).write_text(json.dumps(sent))
    p = capture_provenance(repo_dir=tmp_path, hardware=cpu_only(), command=[], run=fake_run(FULL))
    assert p.git is not None and (p.git.sha, p.git.dirty, p.git.via) == (
        "f" * 40,
        False,
        "gpu_fourway.sh prepare",
    )
    assert p.notes == [
        f"git on this host says {FULL['git rev-parse HEAD'].strip()} (dirty); the tree was "
        f"copied here at {'f' * 40} ({SOURCE_RECORD}), and that record is the one kept"
    ]
    # no .git at all: the record, with how it is known
    del sent["via"]
    (tmp_path / SOURCE_RECORD).write_text(json.dumps(sent))
    p = capture_provenance(repo_dir=tmp_path, hardware=cpu_only(), command=[], run=fake_run({}))
    assert p.git is not None and p.git.via == f"{SOURCE_RECORD} (the sender's record)"
    assert p.notes == []


def test_clean_checkout_and_detached_head(tmp_path: Path) -> None:
    answers = dict(FULL, **{"git status": "", "git rev-parse --abbrev-ref": "HEAD\n"})
    g = git_info(tmp_path, fake_run(answers))
    assert g is not None and g.dirty is False and g.branch is None


def test_garbled_docker_answer_is_unknown() -> None:
    assert docker_info(fake_run({"docker version": "not json"})) is None


def test_h200_provenance_record_validates() -> None:
    p = Provenance.model_validate_json((FIX / "h200-provenance.json").read_text())
    hw = json.loads((FIX / "h200-hardware.json").read_text())
    assert p.driverVersion == hw["extended"]["driverVersion"]
    assert p.cudaDriverVersion == hw["extended"]["cudaDriverVersion"]


def test_this_checkout() -> None:
    p = capture_provenance(probe_docker=False, probe_toolkit=False, hardware=cpu_only())
    if (REPO_ROOT / ".git").exists():
        assert p.git is not None and p.git.sha is not None and len(p.git.sha) == 40
