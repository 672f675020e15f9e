"""The pinned upstream engine sources: download the pinned wheels once, keep their .py files.

Contract tests and preflight checks read the exact vLLM/SGLang releases the bundle pins. The
versions come from the experiment file's ``engines`` section (one source of truth); the wheels
are fetched with ``pip download --no-deps`` into a cache and only their ``.py`` files (plus the
dist-info METADATA) are extracted. An existing cache is reused as is.

Cache layout (``$SPECBENCH_UPSTREAM_CACHE``, default ``<repo>/.cache/upstream``)::

    wheels/<name>-<version>-*.whl
    src/<name>-<version>/<name>/...        # importable root: put src/<name>-<version> on sys.path
    src/<name>-<version>/.specbench-complete  # written last: wheel file name + sha256

``python -m bench.engines.upstream [EXPERIMENT]`` fills the cache and prints the source roots
(CI runs it before the contract tier so that one job downloads the two wheels once).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from bench.core import (
    InputError,
    RunError,
    StrictModel,
    read_bytes,
    read_json,
    sha256_file,
    write_text,
)
from bench.engines._experiment import load_experiment
from bench.schema import UNRESOLVED

CACHE_ENV = "SPECBENCH_UPSTREAM_CACHE"
#: The record tests/contract/test_sglang_upstream_suite.py writes (specbench's probes, and any
#: upstream test of the published artifacts on the patched path, run on the patched release);
#: ``specbench matrix`` copies it into the artifacts when it exists.
SUITE_RECORD_ENV = "SPECBENCH_SGLANG_SUITE_RECORD"
SUITE_RECORD_NAME = "sglang-suite.json"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_EXPERIMENT = REPO_ROOT / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml"
PATCH_DIR = REPO_ROOT / "docker" / "sglang" / "patches"
COMPLETE_MARKER = ".specbench-complete"

# Engine name in the experiment -> its PyPI distribution.
ENGINE_PACKAGES: dict[str, str] = {"vllm": "vllm", "sglang": "sglang"}
# Both wheels are CPython 3.11-compatible manylinux x86_64 builds; asking pip for exactly that
# platform keeps the download identical whatever machine runs it.
PIP_PLATFORM_ARGS = (
    "--only-binary=:all:",
    "--implementation",
    "cp",
    "--python-version",
    "3.11",
    # pip matches --platform literally: list every manylinux tag the pinned wheels carry
    # (sglang 0.5.19: manylinux_2_34; vllm 0.33.0: manylinux_2_28).
    "--platform",
    "manylinux_2_34_x86_64",
    "--platform",
    "manylinux_2_28_x86_64",
)


class PinnedPackage(StrictModel):
    """One pinned upstream distribution."""

    engine: str
    name: str
    version: str

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


class UpstreamSource(StrictModel):
    """The extracted sources of one pinned wheel."""

    package: PinnedPackage
    root: Path  # put this on sys.path; the package directory is root / name
    wheel: str
    wheel_sha256: str

    @property
    def package_dir(self) -> Path:
        return self.root / self.package.name


def cache_dir() -> Path:
    """The cache folder: $SPECBENCH_UPSTREAM_CACHE, else .cache/upstream in the repo."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else REPO_ROOT / ".cache" / "upstream"


def suite_record_path() -> Path:
    """$SPECBENCH_SGLANG_SUITE_RECORD, else <cache>/records/sglang-suite.json."""
    env = os.environ.get(SUITE_RECORD_ENV, "").strip()
    return Path(env) if env else cache_dir() / "records" / SUITE_RECORD_NAME


def pinned_packages(experiment_path: Path | None = None) -> list[PinnedPackage]:
    """The pinned vLLM and SGLang distributions, read from the experiment's ``images`` section
    (the one source of truth); one version per engine, or an InputError naming the field."""

    path = experiment_path or DEFAULT_EXPERIMENT
    if not path.exists():
        raise InputError(str(path), "experiment file not found")
    found: dict[str, str] = {}
    for key, image in load_experiment(path).images.items():
        version = image.version.lstrip("v")
        if found.setdefault(image.engine, version) != version:
            raise InputError(
                f"{path}: images.{key}.version",
                f"{image.engine} pinned at both {found[image.engine]} and {version}; "
                "one version per engine",
            )
    missing = sorted(set(ENGINE_PACKAGES) - set(found))
    if missing:
        raise InputError(f"{path}: images", f"no upstream version for {', '.join(missing)}")
    return [PinnedPackage(engine=e, name=ENGINE_PACKAGES[e], version=found[e]) for e in found]


def _find_wheel(wheels: Path, pkg: PinnedPackage) -> Path | None:
    hits = sorted(wheels.glob(f"{pkg.name}-{pkg.version}-*.whl"))
    return hits[0] if hits else None


def platform_args(python_version: str) -> tuple[str, ...]:
    """PIP_PLATFORM_ARGS for another CPython version (a release whose only wheel is built for
    it, e.g. sglang 0.5.17: cp312 only)."""
    args = list(PIP_PLATFORM_ARGS)
    args[args.index("--python-version") + 1] = python_version
    return tuple(args)


def download_wheel(
    pkg: PinnedPackage, wheels: Path, pip_args: tuple[str, ...] = PIP_PLATFORM_ARGS
) -> Path:
    """The pinned wheel in ``wheels``, downloaded with ``pip download --no-deps`` if absent."""
    existing = _find_wheel(wheels, pkg)
    if existing is not None:
        return existing
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        *pip_args,
        "--dest",
        str(wheels),
        f"{pkg.name}=={pkg.version}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheel = _find_wheel(wheels, pkg)
    if proc.returncode != 0 or wheel is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RunError(f"pip download {pkg.name}=={pkg.version} failed: {' | '.join(tail)}")
    return wheel


def _wanted(member: str, name: str) -> bool:
    # Only the package's .py files and its METADATA: no .so, no data, ~10x smaller on disk.
    if member.endswith("/"):
        return False
    top = member.split("/", 1)[0]
    if top == name:
        return member.endswith(".py")
    return top.endswith(".dist-info") and member.endswith("/METADATA")


def extract_sources(wheel: Path, pkg: PinnedPackage, dest: Path) -> UpstreamSource:
    """Extract the wheel's .py files into ``dest`` (replaced atomically, marker written last)."""
    digest = sha256_file(wheel)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if _wanted(m, pkg.name)]
            if not any(m.startswith(f"{pkg.name}/") for m in members):
                raise RunError(f"{wheel.name}: no {pkg.name}/*.py files in the wheel")
            zf.extractall(tmp, members=members)
        marker = {"wheel": wheel.name, "sha256": digest, "files": len(members)}
        write_text(tmp / COMPLETE_MARKER, json.dumps(marker, indent=1) + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return UpstreamSource(package=pkg, root=dest, wheel=wheel.name, wheel_sha256=digest)


def _cached_source(pkg: PinnedPackage, dest: Path) -> UpstreamSource | None:
    marker = dest / COMPLETE_MARKER
    if not marker.is_file():
        return None
    try:
        data = read_json(marker, what="upstream source marker")
        return UpstreamSource(
            package=pkg, root=dest, wheel=str(data["wheel"]), wheel_sha256=str(data["sha256"])
        )
    except (InputError, KeyError, TypeError):
        return None  # a damaged marker: extract again


def ensure_source(
    pkg: PinnedPackage, cache: Path | None = None, pip_args: tuple[str, ...] = PIP_PLATFORM_ARGS
) -> UpstreamSource:
    """The extracted sources of ``pkg``: reused from the cache, else downloaded and extracted.

    Under an exclusive file lock per package: the test suite runs in several processes
    (pytest-xdist), and two of them must not download or extract into one folder at once."""
    root = cache or cache_dir()
    dest = root / "src" / pkg.key
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{pkg.key}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = _cached_source(pkg, dest)
        if cached is not None:
            return cached
        wheel = download_wheel(pkg, root / "wheels", pip_args)
        return extract_sources(wheel, pkg, dest)


def ensure_sources(
    experiment_path: Path | None = None, cache: Path | None = None
) -> dict[str, UpstreamSource]:
    """Every pinned engine's sources, keyed by engine name ("vllm", "sglang")."""
    return {p.engine: ensure_source(p, cache) for p in pinned_packages(experiment_path)}


def ensure_release_source(
    engine: str, version: str, python_version: str = "3.11", cache: Path | None = None
) -> UpstreamSource:
    """The extracted sources of another release of a pinned engine (not the experiment's pin),
    in the same cache and layout: e.g. sglang 0.5.17, the GPU tier's release, whose only wheel
    is cp312 (``python_version="3.12"``). The wheel's sha256 is recorded in the marker as for
    the pinned ones. The pinned versions (pinned_packages) are not affected."""
    if engine not in ENGINE_PACKAGES:
        raise InputError("engine", f"{engine!r} is not one of {sorted(ENGINE_PACKAGES)}")
    pkg = PinnedPackage(engine=engine, name=ENGINE_PACKAGES[engine], version=version)
    return ensure_source(pkg, cache, platform_args(python_version))


def patches_sha256(patch_dir: Path = PATCH_DIR) -> str:
    """sha256 of the sorted patches concatenated (the Dockerfile computes the same)."""
    digest = hashlib.sha256()
    for patch in sorted(patch_dir.glob("*.patch")):
        digest.update(read_bytes(patch, what="patch"))
    return digest.hexdigest()


def build_args(engine: str, experiment_path: Path | None = None) -> dict[str, str]:
    """docker build args for docker/<engine>/Dockerfile from the experiment's image pins.

    An 'unresolved' digest becomes an empty BASE_DIGEST (the build then uses the tag alone);
    a resolved patch_sha256 that differs from the patches on disk is an InputError."""

    exp = load_experiment(experiment_path or DEFAULT_EXPERIMENT)
    image = exp.images.get(engine)
    if image is None:
        raise InputError(f"images.{engine}", "not in the experiment")

    def digest(value: str) -> str:
        return "" if value == UNRESOLVED else value

    version_arg = f"{engine.upper()}_VERSION"
    if image.build is None:
        return {
            "BASE_IMAGE": image.image,
            "BASE_DIGEST": digest(image.digest),
            version_arg: image.version,
        }
    actual = patches_sha256()
    pinned = image.build.patch_sha256
    if pinned != UNRESOLVED and pinned != actual:
        raise InputError(
            f"images.{engine}.build.patch_sha256",
            f"{pinned} does not match docker/{engine}/patches ({actual})",
        )
    return {
        "BASE_IMAGE": image.build.base_image,
        "BASE_DIGEST": digest(image.build.base_digest),
        version_arg: image.version,
        "PATCH_SHA256": actual,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.engines.upstream [EXPERIMENT]``: fill the cache, print the source roots.
    ``python -m bench.engines.upstream build-args ENGINE [EXPERIMENT]``: print the
    ``--build-arg K=V`` arguments."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if args[:1] == ["build-args"]:
            if len(args) < 2:
                raise InputError("build-args", "name the engine (vllm or sglang)")
            exp = Path(args[2]) if len(args) > 2 else None
            pairs = build_args(args[1], exp)
            print(" ".join(f"--build-arg {k}={v}" for k, v in pairs.items()))
            return 0
        sources = ensure_sources(Path(args[0]) if args else None)
    except (InputError, RunError) as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    for engine, src in sources.items():
        print(f"{engine} {src.package.version} {src.root} sha256={src.wheel_sha256}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
