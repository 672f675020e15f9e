"""The images role's pulls of pinned images under --check (issue #21): community.docker's
docker_image_pull reported every `name:tag@digest` as changed, even with the image present.

The role's own `name:` template (roles/images/tasks/real.yml), rendered by Ansible for a pinned
image, is handed to the collection's own ImagePuller in check mode over a Docker daemon stand-in
that has the image (as a pull by digest leaves it: a RepoDigest, no tag).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "ansible" / "roles" / "images" / "tasks" / "real.yml"
DIGEST = "sha256:" + "e" * 64


PULL = "Ensure the engine images and the bases of the local builds are present."


def _name(task: str, item: dict[str, Any]) -> str:
    """The task's `name:` for ``item``, the role's vars over `pins` holding that one image."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    tasks = yaml.safe_load(TASKS.read_text())
    raw = next(t for t in tasks if t["name"] == task)["community.docker.docker_image_pull"]["name"]
    role_vars = yaml.safe_load((TASKS.parents[1] / "vars" / "main.yml").read_text())
    variables = {k: trust_as_template(v) for k, v in role_vars.items()}
    variables |= {"item": item, "pins_for_host": {"images": {item["key"]: item["value"]}}}
    templar = Templar(loader=DataLoader(), variables=variables)
    name: str = templar.template(trust_as_template(raw)).strip()
    return name


class Daemon:
    """The Docker API calls find_image makes, over one image pulled by digest."""

    def __init__(self, repo: str) -> None:
        # what a pull by digest leaves: a RepoDigest, no tag
        self.image = {
            "Id": "sha256:" + "f" * 64,
            "RepoTags": [],
            "RepoDigests": [f"{repo}@{DIGEST}"],
        }

    def images(self, name: str) -> list[dict[str, Any]]:
        repo = name.rsplit("@", 1)[0]
        return [self.image] if self.image["RepoDigests"][0].startswith(repo + "@") else []

    def inspect_image(self, image_id: str) -> dict[str, Any]:
        return {**self.image, "Os": "linux", "Architecture": "amd64"}


def _check_mode_changed(name: str, repo: str) -> bool:
    from ansible_collections.community.docker.plugins.module_utils.common import (
        AnsibleDockerClientBase,
    )
    from ansible_collections.community.docker.plugins.modules.docker_image_pull import (
        ImagePuller,
    )

    daemon = Daemon(repo)
    client = SimpleNamespace(
        check_mode=True,
        module=SimpleNamespace(
            params={"name": name, "tag": "latest", "platform": None, "pull": "not_present"}
        ),
        fail=pytest.fail,
        log=lambda msg: None,
        images=daemon.images,
        inspect_image=daemon.inspect_image,
    )
    client.find_image = lambda name, tag: AnsibleDockerClientBase.find_image(client, name, tag)
    client._image_lookup = lambda name, tag: AnsibleDockerClientBase._image_lookup(
        client, name, tag
    )
    result: dict[str, Any] = ImagePuller(client).pull()
    return bool(result["changed"])


def test_a_present_pinned_engine_image_is_unchanged_in_check_mode() -> None:
    item = {"key": "vllm", "value": {"image": "vllm/vllm-openai:v0.33.0", "digest": DIGEST}}
    name = _name(PULL, item)
    assert not _check_mode_changed(name, "vllm/vllm-openai"), name
    assert name == f"vllm/vllm-openai@{DIGEST}"
    # an image that is not there is still pulled (changed)
    assert _check_mode_changed(name, "other/repo")


def test_a_present_pinned_build_base_is_unchanged_in_check_mode() -> None:
    build = {"base_image": "lmsysorg/sglang:v0.5.19", "base_digest": DIGEST}
    item = {"key": "sglang", "value": {"image": "specbench/sglang:x", "build": build}}
    name = _name(PULL, item)
    assert not _check_mode_changed(name, "lmsysorg/sglang"), name
    assert name == f"lmsysorg/sglang@{DIGEST}"


def test_an_unpinned_image_is_pulled_by_tag() -> None:
    item = {"key": "vllm", "value": {"image": "vllm/vllm-openai:v0.33.0", "digest": "unresolved"}}
    assert _name(PULL, item) == ("vllm/vllm-openai:v0.33.0")
