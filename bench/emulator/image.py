"""Build the emulator's container image offline: a wheelhouse on the host, no network inside.

The image is ``FROM`` the local base image (``specbench/base:bookworm``, built by
docker/base/build.sh). Here, the emulator's three dependencies (pinned by uv.lock) and
a wheel of this project are put in a temporary build context; the Dockerfile installs them
with ``pip install --no-index`` into a venv, and the build itself runs with ``network=none``.

    python -m bench.emulator.image [--tag specbench/emulator:dev]   # or docker/emulator/build.sh
    build_emulator_image(docker_client, tag)                          # from tests
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.core import EMULATOR_IMAGE, parse_toml, read_text

DEFAULT_TAG = EMULATOR_IMAGE
BASE_IMAGE = "specbench/base:bookworm"
#: what the emulator imports at run time (plus the standard library)
RUNTIME_REQUIREMENTS = ("aiohttp", "pydantic", "pyyaml")
REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "docker" / "emulator" / "Dockerfile"


def build_wheelhouse(dest: Path, python: str = sys.executable) -> list[Path]:
    """Put the runtime wheels (pinned by uv.lock) and our own wheel in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    pip = [python, "-m", "pip", "--disable-pip-version-check", "-q"]
    pins = locked_versions(REPO_ROOT / "uv.lock")
    with tempfile.TemporaryDirectory(prefix="specbench-pins-") as tmp:
        constraints = Path(tmp) / "pins.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
        subprocess.run(
            [
                *pip,
                "download",
                "--only-binary=:all:",
                "-d",
                str(dest),
                "-c",
                str(constraints),
                *RUNTIME_REQUIREMENTS,
            ],
            check=True,
        )
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(dest), str(REPO_ROOT)], check=True)
    return sorted(dest.glob("*.whl"))


def locked_versions(lock: Path) -> dict[str, str]:
    """Every package's version in a uv lock file (the project itself excluded)."""
    data = parse_toml(read_text(lock, what="uv lock"), str(lock))
    return {
        str(pkg["name"]): str(pkg["version"])
        for pkg in data["package"]
        if "version" in pkg and pkg.get("source", {}).get("editable") is None
    }


def prepare_context(ctx: Path) -> Path:
    """A complete build context in ``ctx``: Dockerfile + wheels/."""
    build_wheelhouse(ctx / "wheels")
    shutil.copy(DOCKERFILE, ctx / "Dockerfile")
    return ctx


def build_emulator_image(
    client: Any | None = None, tag: str = DEFAULT_TAG, base_image: str = BASE_IMAGE
) -> str:
    """Build the image with the Docker SDK (``client`` from docker.from_env() if None) and
    return its tag. The base image must exist locally (docker/base/build.sh)."""
    # optional at import time: the docker SDK loads only when a container is really started
    import docker

    client = client or docker.from_env()  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="specbench-emulator-") as tmp:
        ctx = prepare_context(Path(tmp))
        client.images.build(
            path=str(ctx),
            tag=tag,
            buildargs={"BASE_IMAGE": base_image},
            network_mode="none",
            rm=True,
            forcerm=True,
        )
    return tag


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.emulator.image")
    ap.add_argument("--tag", default=DEFAULT_TAG)
    ap.add_argument("--base-image", default=BASE_IMAGE)
    args = ap.parse_args(argv)
    print(build_emulator_image(tag=args.tag, base_image=args.base_image))
    return 0


if __name__ == "__main__":
    sys.exit(main())
