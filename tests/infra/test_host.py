"""testinfra checks of a host provisioned by ansible/site.yml (the verify role runs them).

Checks that hold on every host run everywhere; GPU-host checks skip on the emulated/CI host
with the reason, and fail (never pass) on a real host that lacks what they check.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

Expect = dict[str, Any]


def test_docker_engine_answers(host: Any) -> None:
    out = host.run("docker version --format '{{.Server.Version}}'")
    assert out.rc == 0, out.stderr
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", out.stdout.strip()), out.stdout


def test_specbench_bundle_runs(host: Any, provisioned: Expect) -> None:
    from bench import __version__

    out = host.run(f"{provisioned['specbench']} version")
    assert out.rc == 0, out.stderr
    assert out.stdout.strip() == __version__


def test_hf_token_file_is_private(host: Any, provisioned: Expect) -> None:
    secrets = host.file(f"{provisioned['specbench_home']}/secrets")
    assert secrets.is_directory
    assert secrets.mode == 0o700
    token = host.file(f"{provisioned['specbench_home']}/secrets/hf_token")
    if token.exists:
        assert token.mode == 0o600
        assert token.user == "root"


def test_emulator_image_present(host: Any, provisioned: Expect) -> None:
    if provisioned["backend"] != "emulated":
        pytest.skip("the emulator image is built for the emulated backend only")
    image = provisioned["emulator_image"]
    out = host.run(f"docker image inspect --format '{{{{.Id}}}}' {image}")
    assert out.rc == 0, f"{image} missing: {out.stderr}"


@pytest.mark.gpu
def test_driver_version_is_the_pin(host: Any, gpu_host: Expect) -> None:
    """The exact build when one is set; else the build the driver role recorded (the branch's
    newest when it ran), of the pinned branch and no older than the floor."""
    out = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    loaded = {line.strip() for line in out.splitlines()}
    if gpu_host["nvidia_driver_version"]:
        assert loaded == {gpu_host["nvidia_driver_version"]}
        return
    record = json.loads(host.file(gpu_host["nvidia_driver_record_file"]).content_string)
    build = str(record["version"]).rsplit("-", 1)[0]
    assert loaded == {build}, f"loaded {loaded}, recorded {record['version']}"
    assert build.startswith(f"{gpu_host['nvidia_driver_branch']}.")
    floor = gpu_host["nvidia_driver_min_version"]
    assert tuple(map(int, build.split("."))) >= tuple(map(int, floor.split("."))), build


@pytest.mark.gpu
def test_persistence_mode_enabled(host: Any, gpu_host: Expect) -> None:
    """Ubuntu's nvidia-persistenced runs with --no-persistence-mode; the driver role's drop-in
    turns it on (issue 29): every GPU says so in `nvidia-smi -q`."""
    out = host.check_output("nvidia-smi -q")
    modes = re.findall(r"^\s*Persistence Mode\s*:\s*(\S+)\s*$", out, re.M)
    assert modes == ["Enabled"] * int(gpu_host["gpu_count"]), modes


@pytest.mark.gpu
def test_expected_gpus_visible(host: Any, gpu_host: Expect) -> None:
    out = host.check_output("nvidia-smi --query-gpu=name --format=csv,noheader")
    names = [line.strip() for line in out.splitlines() if line.strip()]
    assert names == [gpu_host["gpu_name"]] * int(gpu_host["gpu_count"])


@pytest.mark.gpu
def test_toolkit_packages_at_one_pinned_version(host: Any, gpu_host: Expect) -> None:
    for pkg in (
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
        "libnvidia-container-tools",
        "libnvidia-container1",
    ):
        p = host.package(pkg)
        assert p.is_installed, pkg
        assert p.version == gpu_host["nvidia_container_toolkit_version"], pkg


@pytest.mark.gpu
def test_docker_engine_is_the_pin(host: Any, gpu_host: Expect) -> None:
    out = host.check_output("docker version --format '{{.Server.Version}}'")
    assert out.strip() == gpu_host["docker_version"]


@pytest.mark.gpu
def test_nvidia_runtime_registered_with_docker(host: Any, gpu_host: Expect) -> None:
    runtimes = json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))
    assert "nvidia" in runtimes


@pytest.mark.gpu
def test_gpus_visible_inside_a_container(host: Any, images_host: Expect) -> None:
    image = images_host["images"][0]
    ref = image["image"] + (f"@{image['digest']}" if image["digest"] != "unresolved" else "")
    out = host.run(f"docker run --rm --gpus all --entrypoint nvidia-smi {ref} -L")
    assert out.rc == 0, out.stderr
    assert len(re.findall(r"^GPU \d+:", out.stdout, re.M)) == int(images_host["gpu_count"])


@pytest.mark.gpu
def test_engine_images_at_pinned_digests(host: Any, images_host: Expect) -> None:
    for image in images_host["images"]:
        assert image["digest"] != "unresolved", f"{image['image']}: digest not pinned"
        ref = f"{image['image']}@{image['digest']}"
        out = host.run(f"docker image inspect --format '{{{{json .RepoDigests}}}}' {ref}")
        assert out.rc == 0, f"{ref} missing"
        repo = image["image"].rsplit(":", 1)[0]
        assert f"{repo}@{image['digest']}" in json.loads(out.stdout)


@pytest.mark.gpu
def test_model_revisions_present(host: Any, models_host: Expect) -> None:
    for model in models_host["models"]:
        folder = f"{models_host['models_dir']}/{model['path'].rsplit('/', 1)[-1]}"
        marker = host.file(f"{folder}/.specbench-revision")
        assert marker.exists, f"{model['hf_id']}: not downloaded to {folder}"
        assert marker.content_string.strip() == model["revision"]
        assert host.file(f"{folder}/config.json").exists
