"""The draft-quantization patch against the pinned SGLang wheel: it applies with zero fuzz,
compiles, and a drifted or repeated patch fails. What the patched code does (and that the
pristine release has the bug) is test_sglang_upstream_suite.py's job: its probes run against
the patched and the pristine tree."""

from __future__ import annotations

import py_compile
from pathlib import Path

from conftest import PATCHES
from upstream_parsers import apply_patches, patched_files

MODEL_CONFIG = "sglang/srt/configs/model_config.py"


def test_patches_exist_and_target_the_pinned_package() -> None:
    assert PATCHES, "docker/sglang/patches/*.patch is empty"
    for patch in PATCHES:
        files = patched_files(patch)
        assert files, f"{patch.name}: no '+++ b/...' file header"
        assert all(f.startswith("sglang/") for f in files), files


def test_patches_apply_and_compile(sglang_src: Path, tmp_path: Path) -> None:
    proc = apply_patches(PATCHES, sglang_src, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for patch in PATCHES:
        for rel in patched_files(patch):
            py_compile.compile(str(tmp_path / rel), doraise=True)
    assert (tmp_path / MODEL_CONFIG).read_bytes() != (sglang_src / MODEL_CONFIG).read_bytes()


def test_corrupted_patch_fails_to_apply(sglang_src: Path, tmp_path: Path) -> None:
    """A context line that no longer matches the pinned file must fail the apply step."""
    text = PATCHES[0].read_text(encoding="utf-8")
    context = next(
        line for line in text.splitlines() if line.startswith(" ") and len(line.strip()) > 20
    )
    bad = tmp_path / "corrupt.patch"
    bad.write_text(text.replace(context, context + "  # drifted upstream", 1), encoding="utf-8")
    proc = apply_patches([bad], sglang_src, tmp_path / "site")
    assert proc.returncode != 0


def test_patch_does_not_apply_twice(sglang_src: Path, tmp_path: Path) -> None:
    assert apply_patches(PATCHES, sglang_src, tmp_path).returncode == 0
    assert apply_patches(PATCHES, sglang_src, tmp_path).returncode != 0
