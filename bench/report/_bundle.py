"""Publishing: a self-contained folder (and optional tarball) with the report, its charts, the
artifacts and a SHA256SUMS over everything; and the check that a bundle is intact.

Publishing refuses emulator output (SIMULATED) and runs with no valid payload: what leaves this
machine must be a measurement."""

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path

from bench.core import (
    InputError,
    WriteError,
    check_new_output,
    check_output_file,
    links_inside,
    made_dirs,
    read_bytes,
    read_text,
    remove_file,
    sha256_file,
    write_bytes,
    write_text,
)
from bench.report._citation import CITATION_FILE, citation_text
from bench.report._model import RunSet
from bench.report._render import load_runset, render_report
from bench.schema import SUMS, check_payload, read_payload, read_sums, sums_text

ARTIFACTS = "artifacts"


def linked_files(markdown: str) -> list[str]:
    """Relative link and image targets in a Markdown document (parsed with markdown-it-py)."""
    # only the bundle check parses Markdown
    from markdown_it import MarkdownIt

    out: list[str] = []
    for tok in MarkdownIt("commonmark").enable("table").parse(markdown):
        for child in tok.children or []:
            target = child.attrGet("src") if child.type == "image" else child.attrGet("href")
            if child.type not in ("image", "link_open") or not isinstance(target, str):
                continue
            if "://" not in target and not target.startswith(("#", "mailto:")):
                out.append(target)
    return out


def _write_sums(root: Path) -> None:
    listed = {
        f.relative_to(root).as_posix(): sha256_file(f)
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.relative_to(root).as_posix() != SUMS
    }
    write_text(root / SUMS, sums_text(listed), root=root)


def _tarball(root: Path, dest: Path, name: str) -> None:
    """A reproducible tar.gz (sorted entries, zero mtimes, no owners) of ``root``, its entries
    under ``name/``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as tar:
        for f in sorted(root.rglob("*")):
            if not f.is_file():
                continue
            info = tarfile.TarInfo(f"{name}/{f.relative_to(root).as_posix()}")
            info.size = f.stat().st_size
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(read_bytes(f, what="bundle file", max_bytes=info.size)))
    write_bytes(dest, buf.getvalue())


def publish(artifacts_dir: Path, out_dir: Path, tarball: bool = False) -> Path:
    """Write the bundle folder (and ``<out_dir>.tar.gz`` when asked); returns the folder."""

    rs = load_runset(artifacts_dir)
    if rs.source_kind != "artifacts":
        raise InputError(str(artifacts_dir), "a reference set has no raw artifacts to publish")
    if rs.simulated:
        n = sum(1 for r in rs.runs if r.simulated)
        raise InputError(
            str(artifacts_dir),
            f"refusing to publish: {n} payload(s) are SIMULATED (emulator output, "
            "not a measurement)",
        )
    if rs.toy_model:
        n = sum(1 for r in rs.runs if r.toy_model)
        raise InputError(
            str(artifacts_dir),
            f"refusing to publish: {n} payload(s) come from a generated toy model (the engine "
            "tier), not a benchmark",
        )
    if rs.unpinned:
        raise InputError(
            str(artifacts_dir),
            f"refusing to publish: the run went without {len(rs.unpinned)} pin(s) "
            f"(--allow-unpinned): {'; '.join(rs.unpinned)}. Pin them (the first `make "
            "provision` resolves them into <experiment>.lock.yaml, or write them into the "
            "experiment file) and run the matrix again",
        )
    if not any(r.valid for r in rs.runs):
        raise InputError(str(artifacts_dir), "refusing to publish: no payload is valid")
    links = links_inside(artifacts_dir)
    if links:
        # copied as it stands, a link would publish whatever it points at
        raise InputError(
            str(links[0]), "refusing to publish: a symbolic link in the run folder (copy the file)"
        )
    _refuse_untrusted(rs, artifacts_dir)
    # every output checked before the first write: a new or empty folder apart from the run,
    # and a tarball path that is free
    check_new_output(out_dir, "--out", inputs=[artifacts_dir])
    tar_path = tarball_path(out_dir)
    if tarball:
        check_output_file(tar_path, "--tarball", inputs=[artifacts_dir])
        if tar_path.exists() or tar_path.is_symlink():
            raise InputError("--tarball", f"{tar_path} exists: remove it or choose another --out")
    existed = out_dir.exists()
    with made_dirs(out_dir.parent):
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        try:
            shutil.copytree(
                artifacts_dir,
                staging / ARTIFACTS,
                ignore=shutil.ignore_patterns("report"),
                copy_function=_copy,
            )
            render_report(staging / ARTIFACTS, staging)
            # how to cite the bundle (issue 48), listed in SHA256SUMS with the rest
            write_text(staging / CITATION_FILE, citation_text(rs), root=staging)
            _write_sums(staging)
            if tarball:
                _tarball(staging, tar_path, name=out_dir.name)
            if existed:
                out_dir.rmdir()
            staging.rename(out_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if tarball:
                remove_file(tar_path)
            raise
    return out_dir


def _refuse_untrusted(rs: RunSet, artifacts_dir: Path) -> None:
    """A bundle vouches for every file it holds: a payload no figure could use (unreadable,
    contradicted by its own evidence or by SHA256SUMS), a file SHA256SUMS does not list, a
    listed file that is gone, or a run folder with no SHA256SUMS is refused, each named."""
    for u in rs.unreadable:
        raise InputError(str(artifacts_dir / u.path), f"refusing to publish: {u.reason}")
    for line in rs.unvouched:
        raise InputError(str(artifacts_dir), f"refusing to publish: {line}")
    bad = [f.path for f in rs.files if "MISMATCH" in f.verdict or "MISSING" in f.verdict]
    if bad:
        raise InputError(str(artifacts_dir), f"refusing to publish: {', '.join(bad)} failed checks")


def _copy(src: str, dst: str) -> str:
    """shutil.copy2 whose failure (a full disk) is a WriteError naming the file, not the
    list of every failed copy that copytree gathers into an internal error."""
    try:
        return str(shutil.copy2(src, dst))
    except OSError as err:
        raise WriteError(dst, err) from None


def tarball_path(out_dir: Path) -> Path:
    """Where ``publish --tarball`` writes: ``<out_dir>.tar.gz`` beside the folder."""
    return out_dir.parent / f"{out_dir.name}.tar.gz"


def _safe_extract(tar_path: Path, into: Path) -> Path:
    with tarfile.open(tar_path, "r:*") as tar:
        members = tar.getmembers()
        for m in members:
            if (
                not (m.isfile() or m.isdir())
                or m.name.startswith("/")
                or ".." in Path(m.name).parts
            ):
                raise InputError(str(tar_path), f"unsafe member {m.name!r}")
        tar.extractall(into, members=members, filter="data")
    tops = {Path(m.name).parts[0] for m in members if Path(m.name).parts}
    return into / tops.pop() if len(tops) == 1 and (into / next(iter(tops))).is_dir() else into


def verify_bundle(path: Path) -> list[str]:
    """Every problem found in a bundle folder or tarball; an empty list means it is intact."""
    if path.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            try:
                root = _safe_extract(path, Path(tmp))
            except EOFError:
                # click would turn this into a bare "Aborted."
                raise InputError(
                    str(path),
                    "truncated archive: the compressed stream ends before its end marker "
                    "(copy or download the bundle again)",
                ) from None
            except tarfile.TarError:
                raise InputError(str(path), "not a bundle folder or a readable tarball") from None
            except (zlib.error, gzip.BadGzipFile) as err:
                why = " ".join(str(err).split())
                raise InputError(str(path), f"corrupt .tar.gz ({why})") from None
            return _verify_dir(root)
    if not path.is_dir():
        raise InputError(str(path), "no such bundle (folder or .tar.gz)")
    return _verify_dir(path)


def _check_links(root: Path, report: Path) -> list[str]:
    """Every file REPORT.md links is in the bundle (a REPORT.md that is not text: one problem)."""
    try:
        text = read_text(report, what="REPORT.md")
    except InputError as err:
        return [f"REPORT.md: {err.reason}"]
    return [
        f"REPORT.md links {target!r}, which is missing"
        for target in linked_files(text)
        if not (root / target).is_file()
    ]


def _verify_dir(root: Path) -> list[str]:
    problems: list[str] = []
    sums = root / SUMS
    if not sums.is_file():
        return [f"{SUMS} missing"]
    try:
        listed = read_sums(sums)
    except InputError as err:
        return [f"{err.where.removeprefix(str(root) + '/')}: {err.reason}"]
    present = {
        f.relative_to(root).as_posix()
        for f in root.rglob("*")
        if f.is_file() and f.relative_to(root).as_posix() != SUMS
    }
    for rel in sorted(set(listed) - present):
        problems.append(f"{rel}: listed in {SUMS} but missing")
    for rel in sorted(present - set(listed)):
        problems.append(f"{rel}: present but not listed in {SUMS}")
    for rel in sorted(present & set(listed)):
        if sha256_file(root / rel) != listed[rel]:
            problems.append(f"{rel}: SHA256 mismatch")
    report = root / "REPORT.md"
    if not report.is_file():
        problems.append("REPORT.md missing")
    else:
        problems += _check_links(root, report)
    payloads = sorted((root / ARTIFACTS / "payloads").glob("*.json"))
    if not payloads:
        problems.append("no artifacts/payloads/*.json")
    valid = 0
    for p in payloads:
        try:
            pl = read_payload(p)
        except InputError as err:
            problems.append(f"{p.relative_to(root)}: {err.reason}")
            continue
        problems += [
            f"{p.relative_to(root)}: {x.path}: {x.reason}"
            for x in check_payload(pl, str(p))
            if x.severity == "error" and x.path != "$.evidence.validity.valid"
        ]
        if pl.simulated:
            problems.append(f"{p.relative_to(root)}: SIMULATED payload in a published bundle")
        if pl.evidence.run.toy_model:
            problems.append(f"{p.relative_to(root)}: toy-model payload in a published bundle")
        valid += pl.evidence.validity.valid
    if payloads and not valid:
        problems.append("no valid payload in the bundle")
    return problems
