"""bench.engines.upstream: pins from the experiment, pip download --no-deps, .py-only extraction,
cache reuse, docker build args."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.core import InputError
from bench.engines import upstream
from bench.engines.upstream import PinnedPackage

PKG = PinnedPackage(engine="sglang", name="sglang", version="9.9.9")


def fake_wheel(folder: Path, pkg: PinnedPackage = PKG) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{pkg.name}-{pkg.version}-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{pkg.name}/__init__.py", "")
        zf.writestr(f"{pkg.name}/srt/server_args.py", "X = 1\n")
        zf.writestr(f"{pkg.name}/_kernels.so", b"\x7fELF")
        zf.writestr(f"{pkg.name}/data/table.json", "{}")
        zf.writestr(f"{pkg.name}-{pkg.version}.dist-info/METADATA", "Name: sglang\n")
        zf.writestr(f"{pkg.name}-{pkg.version}.dist-info/RECORD", "")
    return wheel


def test_versions_come_from_the_experiment() -> None:
    pins = {p.engine: p.version for p in upstream.pinned_packages()}
    assert pins == {"vllm": "0.33.0", "sglang": "0.5.19"}


def test_conflicting_engine_versions_are_refused(tmp_path: Path) -> None:
    exp = yaml.safe_load(upstream.DEFAULT_EXPERIMENT.read_text())
    exp["images"]["sglang-stock"]["version"] = "0.5.20"
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    with pytest.raises(InputError, match="one version per engine"):
        upstream.pinned_packages(path)


def test_missing_explicit_experiment_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        upstream.pinned_packages(tmp_path / "nope.yaml")


def test_cache_dir_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(upstream.CACHE_ENV, str(tmp_path))
    assert upstream.cache_dir() == tmp_path
    monkeypatch.delenv(upstream.CACHE_ENV)
    assert upstream.cache_dir() == upstream.REPO_ROOT / ".cache" / "upstream"


def test_download_uses_pip_no_deps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        fake_wheel(Path(cmd[cmd.index("--dest") + 1]))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(upstream.subprocess, "run", fake_run)
    wheel = upstream.download_wheel(PKG, tmp_path / "wheels")
    assert wheel.exists()
    (cmd,) = calls
    assert cmd[cmd.index("pip") + 1] == "download"
    assert "--no-deps" in cmd and cmd[-1] == "sglang==9.9.9"
    # A wheel already there is reused: no second download.
    assert upstream.download_wheel(PKG, tmp_path / "wheels") == wheel
    assert len(calls) == 1


def test_failed_download_is_a_run_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(
        upstream.subprocess,
        "run",
        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching dist"),
    )
    with pytest.raises(upstream.RunError, match="No matching dist"):
        upstream.download_wheel(PKG, tmp_path)


def test_extracts_only_py_files_and_reuses_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_wheel(tmp_path / "wheels")
    src = upstream.ensure_source(PKG, tmp_path)
    files = sorted(str(p.relative_to(src.root)) for p in src.root.rglob("*") if p.is_file())
    assert files == [
        ".specbench-complete",
        "sglang-9.9.9.dist-info/METADATA",
        "sglang/__init__.py",
        "sglang/srt/server_args.py",
    ]
    assert len(src.wheel_sha256) == 64

    def no_download(*args: Any) -> Path:
        raise AssertionError("the cache should have been reused")

    monkeypatch.setattr(upstream, "download_wheel", no_download)
    again = upstream.ensure_source(PKG, tmp_path)
    assert again == src


def test_incomplete_extraction_is_redone(tmp_path: Path) -> None:
    fake_wheel(tmp_path / "wheels")
    partial = tmp_path / "src" / PKG.key / "sglang"
    partial.mkdir(parents=True)
    (partial / "stale.py").write_text("")
    src = upstream.ensure_source(PKG, tmp_path)
    assert not (src.package_dir / "stale.py").exists()
    assert (src.package_dir / "srt" / "server_args.py").exists()


def test_build_args_from_the_experiment() -> None:
    args = upstream.build_args("sglang")
    assert args["BASE_IMAGE"] == "lmsysorg/sglang:v0.5.19"
    assert args["BASE_DIGEST"] == ""  # 'unresolved' in the experiment
    assert args["PATCH_SHA256"] == upstream.patches_sha256()
    assert upstream.build_args("vllm")["BASE_IMAGE"] == "vllm/vllm-openai:v0.33.0"


def test_build_args_refuse_a_stale_patch_checksum(tmp_path: Path) -> None:
    exp = yaml.safe_load(upstream.DEFAULT_EXPERIMENT.read_text())
    exp["images"]["sglang"]["build"]["patch_sha256"] = "a" * 64
    exp["images"]["sglang"]["image"] = "specbench/sglang:0.5.19-" + "a" * 12
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    with pytest.raises(InputError, match="does not match"):
        upstream.build_args("sglang", path)


def test_hadolint_is_clean_on_every_dockerfile() -> None:
    import shutil

    hadolint = shutil.which("hadolint") or str(Path(upstream.sys.executable).parent / "hadolint")
    files = sorted(str(p) for p in (upstream.REPO_ROOT / "docker").rglob("Dockerfile"))
    assert files
    proc = subprocess.run([hadolint, *files], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
