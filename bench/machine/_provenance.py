"""``provenance.json``: what produced a set of artifacts, beyond the hardware.

Git SHA and dirty flag, specbench version, the experiment file's hash, the engine images with
their digests and upstream versions (passed in by the matrix, which got them from Docker), the
driver and CUDA versions, OS and kernel, Docker and NVIDIA container-toolkit versions. Every
field is optional: a fact that cannot be known here is left null, never guessed. Every source is
injectable so the matrix and the tests decide what is probed.
"""

from __future__ import annotations

import platform
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from pydantic import ConfigDict, Field

from bench import __version__
from bench.core import (
    InputError,
    StrictModel,
    exists,
    parse_json,
    read_json_model,
    sha256_file,
)
from bench.machine._dump import capture_host
from bench.machine._smi import Runner, run_command
from bench.schema import Hardware

PROVENANCE_SCHEMA: Final = "specbench.provenance/1"
REPO_ROOT: Final = Path(__file__).resolve().parents[2]


class GitInfo(StrictModel):
    sha: str | None = None
    dirty: bool | None = Field(default=None, description="tracked files modified vs. HEAD")
    branch: str | None = None
    via: str | None = Field(
        default=None,
        description="how the SHA is known for a copied tree: the source record its sender "
        "wrote (SOURCE_RECORD), which wins over a .git beside it; None: read from the "
        "checkout itself",
    )


#: written beside bench/ by whoever copies the tree to a host without .git (the GPU scripts:
#: ``git rev-parse HEAD`` and ``git status --porcelain`` at the moment the tree was sent)
SOURCE_RECORD: Final = ".specbench-source.json"


class ExperimentRef(StrictModel):
    path: str
    sha256: str


class ImageRef(StrictModel):
    """One engine image. ``digest`` is the registry digest (sha256:...) or, for a locally built
    image, its image ID; ``upstreamVersion`` is the engine version found inside the image."""

    ref: str
    engine: str | None = None
    digest: str | None = None
    imageId: str | None = None
    upstreamVersion: str | None = None


class DockerInfo(StrictModel):
    clientVersion: str | None = None
    serverVersion: str | None = None
    apiVersion: str | None = None
    runtimes: list[str] = Field(default_factory=list)
    defaultRuntime: str | None = None


class ContainerToolkit(StrictModel):
    nvidiaCtk: str | None = Field(default=None, description="nvidia-ctk --version")
    nvidiaContainerCli: str | None = Field(default=None, description="nvidia-container-cli")


DRIVER_RECORD: Final = Path("/var/lib/specbench/nvidia-driver.json")


class DriverInstall(StrictModel):
    """How Ansible installed the NVIDIA driver (roles/nvidia_driver/tasks/record.yml): Canonical's
    signed prebuilt modules or DKMS, and the exact package versions."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_: Literal["specbench.nvidia-driver/1"] = Field(alias="schema")
    path: Literal["prebuilt", "dkms"]
    source: str | None = None
    branch: str | None = None
    open_kernel_modules: bool | None = None
    pinned: str | None = None
    version: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    kernel: str | None = None
    secure_boot: bool | str | None = None


class Provenance(StrictModel):
    schemaVersion: Literal["specbench.provenance/1"] = PROVENANCE_SCHEMA
    capturedAt: str
    specbenchVersion: str
    python: str
    command: list[str] = Field(default_factory=list)
    git: GitInfo | None = None
    experiment: ExperimentRef | None = None
    images: list[ImageRef] = Field(default_factory=list)
    driverVersion: str | None = None
    cudaDriverVersion: str | None = None
    os: str | None = None
    kernel: str | None = None
    arch: str | None = None
    docker: DockerInfo | None = None
    containerToolkit: ContainerToolkit | None = None
    driverInstall: DriverInstall | None = Field(
        default=None, description="the provisioning record of the driver install, if any"
    )
    notes: list[str] = Field(default_factory=list)


def git_info(repo_dir: Path, run: Runner = run_command) -> GitInfo | None:
    """SHA, dirty flag and branch of the checkout at ``repo_dir``; None outside a git checkout."""
    sha = run(["git", "-C", str(repo_dir), "rev-parse", "HEAD"])
    if not sha or not sha.strip():
        return None
    status = run(["git", "-C", str(repo_dir), "status", "--porcelain", "--untracked-files=no"])
    branch = run(["git", "-C", str(repo_dir), "rev-parse", "--abbrev-ref", "HEAD"])
    return GitInfo(
        sha=sha.strip(),
        dirty=bool(status.strip()) if status is not None else None,
        branch=branch.strip() if branch and branch.strip() != "HEAD" else None,
    )


def _source_record(path: Path, notes: list[str]) -> GitInfo | None:
    """The sender's record of a tree copied without .git; None when there is none."""
    if not exists(path):
        return None
    try:
        info = read_json_model(path, GitInfo)
    except InputError as err:
        notes.append(f"{path.name}: unreadable source record ({err.reason})")
        return None
    return info.model_copy(update={"via": info.via or f"{path.name} (the sender's record)"})


def _tree_source(repo_dir: Path, run: Runner, notes: list[str]) -> GitInfo | None:
    """The tree's SHA and dirty flag. A source record (SOURCE_RECORD) wins over a .git beside
    it: the sender wrote it for the files it copied, while a .git that came with a copy can be
    older than them (the GPU four-way of 2026-12-07 ran from a copy whose .git stood at an
    earlier commit, so git called the tree dirty). What git said then stays as a note."""
    checkout = git_info(repo_dir, run)
    record = _source_record(repo_dir / SOURCE_RECORD, notes)
    if record is None:
        return checkout
    if checkout is not None and (checkout.sha, checkout.dirty) != (record.sha, record.dirty):
        state = {True: " (dirty)", False: " (clean)", None: ""}[checkout.dirty]
        notes.append(
            f"git on this host says {checkout.sha}{state}; the tree was copied here at "
            f"{record.sha} ({SOURCE_RECORD}), and that record is the one kept"
        )
    return record


def docker_info(run: Runner = run_command) -> DockerInfo | None:
    """Versions from ``docker version`` and runtimes from ``docker info``; None without Docker."""
    raw = run(["docker", "version", "--format", "{{json .}}"])
    if not raw:
        return None
    try:
        ver = parse_json(raw, "docker version")
    except InputError:
        return None
    if not isinstance(ver, dict):
        return None
    client = ver.get("Client") or {}
    server = ver.get("Server") or {}
    runtimes: list[str] = []
    default: str | None = None
    info_raw = run(["docker", "info", "--format", "{{json .}}"])
    if info_raw:
        try:
            info = parse_json(info_raw, "docker info")
        except InputError:
            info = None
        if isinstance(info, dict):
            runtimes = sorted((info.get("Runtimes") or {}).keys())
            default = info.get("DefaultRuntime")
    return DockerInfo(
        clientVersion=client.get("Version"),
        serverVersion=server.get("Version"),
        apiVersion=server.get("ApiVersion") or client.get("ApiVersion"),
        runtimes=runtimes,
        defaultRuntime=default,
    )


def _version_in(text: str | None) -> str | None:
    if not text:
        return None
    m = re.search(r"(\d+\.\d+(?:\.\d+)?(?:[-~.+][0-9A-Za-z.]+)?)", text)
    return m.group(1) if m else None


def container_toolkit(run: Runner = run_command) -> ContainerToolkit | None:
    """NVIDIA container-toolkit versions (nvidia-ctk, nvidia-container-cli), if installed."""
    ctk = _version_in(run(["nvidia-ctk", "--version"]))
    cli = _version_in(run(["nvidia-container-cli", "--version"]))
    if ctk is None and cli is None:
        return None
    return ContainerToolkit(nvidiaCtk=ctk, nvidiaContainerCli=cli)


def _driver_from_nvml() -> tuple[str | None, str | None]:
    try:
        # optional: NVML exists only on a GPU host; without it capture records why
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVML here: the versions stay unknown
        return None, None
    try:
        drv = pynvml.nvmlSystemGetDriverVersion()
        cuda = int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
        return (
            drv.decode() if isinstance(drv, bytes) else str(drv),
            f"{cuda // 1000}.{(cuda % 1000) // 10}",
        )
    except Exception:
        return None, None
    finally:
        pynvml.nvmlShutdown()


def _driver_install(path: Path, notes: list[str]) -> DriverInstall | None:
    """The Ansible driver record when this host has one; a note when it does not parse."""
    if not exists(path):
        return None
    try:
        return read_json_model(path, DriverInstall)
    except InputError as err:
        notes.append(f"{path}: unreadable driver record ({err.reason})")
        return None


def capture_provenance(
    *,
    experiment_path: Path | None = None,
    images: Sequence[ImageRef] = (),
    hardware: Hardware | None = None,
    repo_dir: Path | None = REPO_ROOT,
    command: Sequence[str] | None = None,
    docker: DockerInfo | None = None,
    probe_docker: bool = True,
    probe_toolkit: bool = True,
    run: Runner = run_command,
    driver_record: Path = DRIVER_RECORD,
) -> Provenance:
    """Gather provenance. Pass what the caller already knows (``images`` with digests from Docker,
    ``hardware`` for driver/CUDA, ``docker``); the rest is probed unless switched off."""
    notes: list[str] = []
    exp = None
    if experiment_path is not None:
        exp = ExperimentRef(path=str(experiment_path), sha256=sha256_file(experiment_path))
    git = _tree_source(repo_dir, run, notes) if repo_dir is not None else None
    if git is None:
        notes.append("not run from a git checkout: git SHA unknown")
    driver = cuda = None
    if hardware is not None and hardware.extended is not None:
        driver, cuda = hardware.extended.driverVersion, hardware.extended.cudaDriverVersion
    if driver is None and (hardware is None or hardware.hwClass != "CPU_ONLY"):
        driver, cuda = _driver_from_nvml()
    if docker is None and probe_docker:
        docker = docker_info(run)
    host = capture_host()
    return Provenance(
        capturedAt=datetime.now(UTC).isoformat(timespec="seconds"),
        specbenchVersion=__version__,
        python=platform.python_version(),
        command=list(command) if command is not None else list(sys.argv),
        git=git,
        experiment=exp,
        images=list(images),
        driverVersion=driver,
        cudaDriverVersion=cuda,
        os=host.os,
        kernel=host.kernel,
        arch=host.arch,
        docker=docker,
        containerToolkit=container_toolkit(run) if probe_toolkit else None,
        driverInstall=_driver_install(driver_record, notes),
        notes=notes,
    )
