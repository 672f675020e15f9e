"""The real docker/sglang/Dockerfile, built on a local stand-in for lmsysorg/sglang:v0.5.19:
specbench/base:bookworm + the pinned sglang wheel installed with ``pip --no-deps`` (no torch, no
network). The patch-applying steps of the real Dockerfile run here; a corrupted patch or a wrong
expected checksum must fail the build."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from needs import missing_tool

from bench.engines.upstream import cache_dir, ensure_source, pinned_packages

REPO = Path(__file__).resolve().parents[2]
SGLANG_DIR = REPO / "docker" / "sglang"
BASE = "specbench/base:bookworm"
STANDIN = "specbench/sglang-standin:{version}"
STANDIN_DOCKERFILE = """\
FROM {base}
COPY deps/ /tmp/deps/
COPY {wheel} /tmp/
RUN set -e; for d in /tmp/deps/*.deb; do [ -e "$d" ] && dpkg -i "$d"; done; \\
    if [ -f /tmp/deps/patch ]; then install -m 0755 /tmp/deps/patch /usr/local/bin/patch; fi; \\
    python3 -m venv /opt/venv \\
    && /opt/venv/bin/pip install --no-deps --no-index --no-compile -q /tmp/{wheel} \\
    && rm -rf /tmp/deps /tmp/{wheel}
ENV PATH=/opt/venv/bin:$PATH
"""


def _patch_tool(dest: Path) -> None:
    """GNU patch for the stand-in (the official image has it; debootstrap minbase does not):
    the Debian package via apt-get download, cached; else the host's binary."""
    debs = cache_dir() / "debs"
    if not list(debs.glob("patch_*.deb")):
        debs.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", "patch"], cwd=debs, capture_output=True, check=False)
    found = sorted(debs.glob("patch_*.deb"))
    if found:
        shutil.copyfile(found[-1], dest / found[-1].name)
        return
    host = shutil.which("patch")
    if host is None:
        missing_tool("GNU patch (.deb or binary) for the stand-in", "apt-get install patch")
    shutil.copyfile(host, dest / "patch")


def _docker_build(client: Any, context: Path, tag: str, **buildargs: str) -> list[str]:
    """Build, returning the log lines; raises docker.errors.BuildError on failure."""
    _, logs = client.images.build(
        path=str(context), tag=tag, buildargs=buildargs, rm=True, forcerm=True
    )
    return [str(chunk.get("stream", "")) for chunk in logs]


@pytest.fixture(scope="module")
def standin(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    try:
        docker_client.images.get(BASE)
    except Exception:
        pytest.fail(f"{BASE} missing: run `make base-image` (docker/base/build.sh) first")
    pkg = next(p for p in pinned_packages() if p.engine == "sglang")
    tag = STANDIN.format(version=pkg.version)
    src = ensure_source(pkg)
    wheel = cache_dir() / "wheels" / src.wheel
    ctx = tmp_path_factory.mktemp("standin")
    (ctx / "deps").mkdir()
    _patch_tool(ctx / "deps")
    shutil.copyfile(wheel, ctx / wheel.name)  # follows a symlinked cache entry
    (ctx / "Dockerfile").write_text(STANDIN_DOCKERFILE.format(base=BASE, wheel=wheel.name))
    _docker_build(docker_client, ctx, tag)
    return tag


def _context(tmp: Path, corrupt: bool = False) -> Path:
    """Only what the Dockerfile needs: itself and patches/."""
    ctx = tmp / "ctx"
    shutil.copytree(SGLANG_DIR / "patches", ctx / "patches")
    shutil.copyfile(SGLANG_DIR / "Dockerfile", ctx / "Dockerfile")
    if corrupt:
        patch = sorted((ctx / "patches").glob("*.patch"))[0]
        text = patch.read_text(encoding="utf-8")
        context = next(ln for ln in text.splitlines() if ln.startswith(" ") and len(ln) > 30)
        patch.write_text(text.replace(context, context + "  # drifted", 1), encoding="utf-8")
    return ctx


def _patches_sha256(ctx: Path) -> str:
    h = hashlib.sha256()
    for p in sorted((ctx / "patches").glob("*.patch")):
        h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def built(docker_client: Any, standin: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    ctx = _context(tmp_path)
    digest = _patches_sha256(ctx)
    tag = "specbench/sglang-e2e:patched"
    _docker_build(docker_client, ctx, tag, BASE_IMAGE=standin, PATCH_SHA256=digest)
    yield tag, digest
    docker_client.images.remove(tag, force=True)


def test_build_applies_the_patch(docker_client: Any, built: tuple[str, str]) -> None:
    tag, digest = built
    labels = docker_client.images.get(tag).labels
    assert labels["specbench.engines.upstream.version"] == "0.5.19"
    assert labels["specbench.patch.sha256"] == digest
    out = docker_client.containers.run(
        tag,
        [
            "python3",
            "-c",
            "import importlib.util as u, pathlib; "
            "p = pathlib.Path(u.find_spec('sglang').origin).parent / 'srt/configs/model_config.py';"
            "print(p.read_text().count('_draft_explicitly_unquantized_qwen3_5_mtp'))",
        ],
        remove=True,
    )
    assert int(out.decode().strip()) >= 3  # definition + two call sites


def test_build_fails_on_a_corrupted_patch(docker_client: Any, standin: str, tmp_path: Path) -> None:
    import docker.errors

    ctx = _context(tmp_path, corrupt=True)
    with pytest.raises(docker.errors.BuildError) as err:
        _docker_build(docker_client, ctx, "specbench/sglang-e2e:corrupt", BASE_IMAGE=standin)
    log = "".join(str(c.get("stream", "")) for c in err.value.build_log)
    assert "FAILED" in log and "hunk" in log.lower(), log[-2000:]


def test_build_fails_on_a_wrong_patch_checksum(
    docker_client: Any, standin: str, tmp_path: Path
) -> None:
    import docker.errors

    ctx = _context(tmp_path)
    with pytest.raises(docker.errors.BuildError) as err:
        _docker_build(
            docker_client, ctx, "specbench/sglang-e2e:badsum", BASE_IMAGE=standin,
            PATCH_SHA256="0" * 64,
        )  # fmt: skip
    log = "".join(str(c.get("stream", "")) for c in err.value.build_log)
    assert "!= expected" in log, log[-2000:]
