"""The SGLang unit suite for the code path our patch changes, run against the pinned release.

Where upstream's tests are: upstream's unit tests for this path live in the GitHub tree
(``test/registered/unit/configs/``, ``test/registered/unit/server_args/``), which is in no PyPI
artifact: the 0.5.19 wheel ships only ``sglang/`` (its test files are GPU, storage and kernel
tests), and sglang publishes no sdist for 0.5.19 (the record checks this with pip each run).
CI reaches PyPI only, so the suite is what pip can download plus our own probes:

* **Upstream tests in the pinned wheel.** Every test file of the extracted wheel
  (``bench.upstream`` keeps all its ``.py`` files) is scanned; a file is *selected* when it
  exercises the path: it names one of CODE_PATH_NAMES (the draft quantization fields and the
  ModelConfig methods the patch changes or runs through). Importing a patched module alone does
  not select a file: the wheel's LMCache storage test imports ModelConfig to build a cache
  config and never reaches the draft's quantization. A selected file that uses CUDA (static
  scan, reasons recorded) is listed as ``needs_gpu``; the others are run. In 0.5.19 no test
  file of the wheel is selected: what runs is our probes, with torch, transformers and the
  GPU-only modules stubbed (upstream_stub_plugin.py).
* **Our probes** (``sglang_suite/probe_*.py``, copied into the tree): they import the engine's
  modules by their real names from the tree under test, so the same files run against the
  patched and the pristine tree. A probe of the patched behaviour says so with
  ``record_property("targets_patch", True)``: it must pass patched and fail pristine.

Each tree is run in its own ``pytest`` subprocess (junit XML, xunit1 so properties survive);
the result is one :class:`SuiteRecord` (JSON) that the image provenance and the report read.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from upstream_parsers import apply_patches, patched_files

from bench.schema import (
    GpuOnlyFile,
    SuiteCounts,
    SuiteRun,
    SuiteTest,
    UpstreamSelection,
)
from bench.schema._suite import Outcome, Tree

CONTRACT_DIR = Path(__file__).resolve().parent
REPO_ROOT = CONTRACT_DIR.parents[1]
PROBE_DIR = CONTRACT_DIR / "sglang_suite"
PROBES_IN_TREE = "specbench_probes"  # the probes are copied into the tree under this folder
PLUGIN = "upstream_stub_plugin"  # tests/contract/upstream_stub_plugin.py, loaded with -p
TREE_ENV = "SPECBENCH_UPSTREAM_TREE"  # the subprocess' source root (holds sglang/)
RECORD_NAME = "sglang-suite.json"

# Fields whose readers are on the patched path (server args -> draft ModelConfig).
CODE_PATH_FIELDS = ("speculative_draft_model_quantization", "is_draft_quantization_explicit")
# A test naming one of these exercises the path: the fields, and the ModelConfig methods the
# patch changes (_parse_quant_hf_config) or runs through (_verify_quantization).
CODE_PATH_NAMES = (*CODE_PATH_FIELDS, "_parse_quant_hf_config", "_verify_quantization")
TEST_FILE_RE = re.compile(r"^(test_.*|.*_test|unit_test|test_unit)\.py$")
# A test file that does any of these needs an accelerator (the reason is recorded verbatim).
GPU_MARKERS = (
    re.compile(r"\.cuda\("),
    re.compile(r"torch\.cuda\."),
    re.compile(r"""device\s*=\s*["']cuda"""),
    re.compile(r"""torch\.device\(\s*["']cuda"""),
    re.compile(r"^\s*(?:import|from)\s+(?:triton|sgl_kernel|flashinfer|deep_gemm)\b", re.M),
)


# -- selection ----------------------------------------------------------------------------


def module_name(rel: str) -> str:
    """sglang/srt/configs/model_config.py -> sglang.srt.configs.model_config"""
    return rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def code_path_modules(src_root: Path, patches: Iterable[Path]) -> list[str]:
    """Modules our patches change plus every module of the pinned package that reads one of
    CODE_PATH_FIELDS (derived from the artifact, so a new reader is picked up)."""
    mods = {module_name(rel) for p in patches for rel in patched_files(p)}
    for path in (src_root / "sglang").rglob("*.py"):
        if TEST_FILE_RE.match(path.name):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if any(field in text for field in CODE_PATH_FIELDS):
            mods.add(module_name(path.relative_to(src_root).as_posix()))
    return sorted(mods)


def upstream_test_files(src_root: Path) -> list[Path]:
    return sorted(p for p in (src_root / "sglang").rglob("*.py") if TEST_FILE_RE.match(p.name))


def declared_tests(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    return sorted(
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
    )


def gpu_reasons(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    reasons = []
    for pattern in GPU_MARKERS:
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            reasons.append(f"line {line}: {text.splitlines()[line - 1].strip()}")
    return sorted(set(reasons), key=lambda r: int(r.split(":")[0].split()[1]))


NO_DIST = "No matching distribution found"


def find_sdist(name: str, version: str, dest: Path) -> str | None:
    """The release's sdist file name if the index has one (pip downloads it into ``dest``),
    None when pip says there is none; any other pip failure raises."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
        "--no-binary", ":all:", "--dest", str(dest), f"{name}=={version}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode != 0:
        if NO_DIST in proc.stderr:
            return None
        raise RuntimeError(f"pip download --no-binary {name}=={version}: {proc.stderr[-500:]}")
    hits = sorted(p.name for p in dest.glob(f"{name}-{version}.*"))
    return hits[0] if hits else None


def exercises_the_path(path: Path) -> bool:
    """A test file exercises the patched path when it names a field or method on it; an
    import of a patched module is not enough (see the module docstring)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return any(name in text for name in CODE_PATH_NAMES)


def select_upstream_tests(
    src_root: Path,
    patches: Iterable[Path],
    artifact: str,
    artifact_sha256: str,
    sdist: str | None,
) -> UpstreamSelection:
    patches = list(patches)
    modules = code_path_modules(src_root, patches)
    files = upstream_test_files(src_root)
    selected, gpu, cpu = [], [], []
    for path in files:
        if not exercises_the_path(path):
            continue
        rel = path.relative_to(src_root).as_posix()
        selected.append(rel)
        reasons = gpu_reasons(path)
        if reasons:
            gpu.append(GpuOnlyFile(file=rel, tests=declared_tests(path), reasons=reasons))
        else:
            cpu.append(rel)
    return UpstreamSelection(
        artifact=artifact,
        artifact_sha256=artifact_sha256,
        sdist=sdist,
        scanned_test_files=len(files),
        code_path_modules=modules,
        selected=selected,
        needs_gpu=gpu,
        cpu_runnable=cpu,
    )


# -- trees --------------------------------------------------------------------------------


def build_tree(src_root: Path, dest: Path, patches: list[Path]) -> Path:
    """A copy of the pinned source tree (hard links where possible) with ``patches`` applied
    to fresh copies of the files they change. Raises if a patch does not apply."""
    try:
        shutil.copytree(src_root / "sglang", dest / "sglang", copy_function=os.link)
    except OSError:  # another filesystem: plain copies
        shutil.rmtree(dest / "sglang", ignore_errors=True)
        shutil.copytree(src_root / "sglang", dest / "sglang")
    for patch in patches:
        for rel in patched_files(patch):
            (dest / rel).unlink()  # break the hard link; apply_patches copies it afresh
    proc = apply_patches(patches, src_root, dest)
    if proc.returncode != 0:
        raise RuntimeError(f"patch failed: {proc.stdout}{proc.stderr}")
    probes = dest / PROBES_IN_TREE
    probes.mkdir()
    for probe in PROBE_DIR.glob("*.py"):  # the probes and their support module
        shutil.copyfile(probe, probes / probe.name)
    return dest


# -- running ------------------------------------------------------------------------------


def probe_files() -> list[Path]:
    return sorted(PROBE_DIR.glob("probe_*.py"))


def suite_command(
    tree: Path, upstream: list[str], junit: Path, ini: Path, with_probes: bool = True
) -> list[str]:
    """pytest over ``tree`` (rootdir: test ids are relative to it, the same for both trees)."""
    probes = [f"{PROBES_IN_TREE}/{p.name}" for p in probe_files()] if with_probes else []
    return [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN,
        "-c", str(ini), "--rootdir", str(tree), "--confcutdir", str(tree),
        f"--junitxml={junit}", *upstream, *probes,
    ]  # fmt: skip


INI = """[pytest]
python_files = test_*.py *_test.py unit_test.py test_unit.py probe_*.py
junit_family = xunit1
addopts = -ra
"""


def run_suite(
    tree: Path, kind: Tree, upstream: list[str], workdir: Path, with_probes: bool = True
) -> SuiteRun:
    """Run the CPU-runnable upstream tests and our probes against ``tree`` in a subprocess."""
    workdir.mkdir(parents=True, exist_ok=True)
    junit, ini = workdir / f"{kind}.xml", workdir / "pytest.ini"
    ini.write_text(INI, encoding="utf-8")
    cmd = suite_command(tree, upstream, junit, ini, with_probes)
    env = dict(os.environ)
    env[TREE_ENV] = str(tree)
    env["PYTHONPATH"] = os.pathsep.join([str(CONTRACT_DIR), str(REPO_ROOT)])
    env.pop("PYTEST_ADDOPTS", None)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    seconds = round(time.monotonic() - start, 2)
    if not junit.is_file():
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise RuntimeError(f"pytest wrote no junit XML (rc {proc.returncode}): {tail}")
    tests = parse_junit(junit)
    count = {
        o: sum(t.outcome == o for t in tests) for o in ("passed", "failed", "error", "skipped")
    }
    return SuiteRun(
        tree=kind, command=cmd, returncode=proc.returncode, seconds=seconds,
        passed=count["passed"], failed=count["failed"], errors=count["error"],
        skipped=count["skipped"], tests=tests,
    )  # fmt: skip


def parse_junit(path: Path) -> list[SuiteTest]:
    tests = []
    for case in ET.parse(path).getroot().iter("testcase"):
        classname = case.get("classname") or ""
        origin: Literal["upstream", "specbench"] = (
            "specbench" if classname.startswith(f"{PROBES_IN_TREE}.") else "upstream"
        )
        outcome: Outcome = "passed"
        message = None
        for tag, value in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            node = case.find(tag)
            if node is not None:
                outcome = value  # type: ignore[assignment]
                message = (node.get("message") or "")[:500]
                break
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        tests.append(
            SuiteTest(
                id=f"{classname}::{case.get('name')}",
                origin=origin,
                outcome=outcome,
                targets_patch=props.get("targets_patch") == "True",
                message=message,
            )
        )
    return tests


def summarize(run: SuiteRun, selection: UpstreamSelection) -> SuiteCounts:
    def passed(origin: str) -> int:
        return sum(t.outcome == "passed" and t.origin == origin for t in run.tests)

    return SuiteCounts(
        passed=run.passed,
        failed=run.failed + run.errors,
        skipped=run.skipped,
        needs_gpu=sum(max(1, len(g.tests)) for g in selection.needs_gpu),
        upstream_passed=passed("upstream"),
        specbench_passed=passed("specbench"),
    )


def differing(a: SuiteRun, b: SuiteRun) -> list[str]:
    before = {t.id: t.outcome for t in b.tests}
    return sorted(t.id for t in a.tests if before.get(t.id) != t.outcome)
