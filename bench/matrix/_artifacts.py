"""The artifacts folder of a matrix run, and resume.

Layout (DIR = --out)::

    experiment.lock.json      RunLock: the experiment as run (+ run id, overrides, simulated flag)
    hardware.json             Hardware
    provenance.json           Provenance: versions, digests, git SHA
    weights.json              WeightsFile: checkpoint byte counts (real runs with the models)
    status.json               RunStatus: what happened to each configuration
    payloads/<config>-c<k>.json
    logs/<config>.log         the server's full log, token scrubbed
    SHA256SUMS                sha256 of every file above, ``sha256sum -c`` format

Every model named above is in bench.schema. Every file is written atomically (bench.core), so an
interrupted run leaves whole files only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from bench.core import InputError, exists, links_inside, sha256_file, write_text
from bench.schema import (
    LOCK_FILE,
    STATUS_FILE,
    SUMS,
    WEIGHTS_FILE,
    Payload,
    read_payload,
    read_sums,
    sums_text,
    write_payload,
)

HARDWARE = "hardware.json"
PROVENANCE = "provenance.json"
#: copy of the SGLang upstream-suite record (bench.engines.upstream.suite_record_path)
SUITE_RECORD = "upstream/sglang-suite.json"


@dataclass(frozen=True)
class Artifacts:
    root: Path

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def status(self) -> Path:
        return self.root / STATUS_FILE

    @property
    def weights(self) -> Path:
        return self.root / WEIGHTS_FILE

    @property
    def hardware(self) -> Path:
        return self.root / HARDWARE

    @property
    def provenance(self) -> Path:
        return self.root / PROVENANCE

    @property
    def suite_record(self) -> Path:
        return self.root / SUITE_RECORD

    @property
    def sums(self) -> Path:
        return self.root / SUMS

    def check_before_writing(self) -> None:
        """Before the first write: ``--out`` is a new or empty folder, or one of our runs (to
        resume or refuse), whose folders are not links to elsewhere."""
        if self.root.exists() and not self.root.is_dir():
            raise InputError("--out", f"{self.root} exists and is a file, not a folder")
        if not self.root.exists():
            return
        if self.lock.is_file():
            links = links_inside(self.root)
            if links:
                raise InputError(
                    "--out",
                    f"{links[0]} is a symbolic link: a run folder holds its own files, and "
                    "specbench neither writes through a link nor reads one into a run",
                )
            return
        others = sorted(p.name for p in self.root.iterdir())
        if others:
            shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if others[5:] else "")
            raise InputError(
                "--out",
                f"{self.root} already holds files that are not a specbench run ({shown}): give "
                "a new or empty folder (SHA256SUMS would vouch for them)",
            )

    def payload(self, config: str, concurrency: int) -> Path:
        return self.root / "payloads" / f"{config}-c{concurrency}.json"

    def log(self, config: str) -> Path:
        return self.root / "logs" / f"{config}.log"

    def write_model(self, path: Path, model: BaseModel) -> None:
        """One artifact file from its schema model (aliases as in the schema: ``schema``)."""
        write_text(path, model.model_dump_json(indent=2, by_alias=True) + "\n", root=self.root)

    def write_payload(self, config: str, concurrency: int, payload: Payload) -> Path:
        """Write a payload and vouch for it in SHA256SUMS at once: a resume keeps only payloads
        whose bytes are the ones the run wrote (issue 38, fault 10)."""
        path = self.payload(config, concurrency)
        write_payload(path, payload, root=self.root)
        listed = self.listed()
        listed[path.relative_to(self.root).as_posix()] = sha256_file(path)
        write_text(self.sums, sums_text(listed), root=self.root)
        return path

    def listed(self) -> dict[str, str]:
        """SHA256SUMS as file name -> sha256 (empty when there is none or it cannot be read)."""
        try:
            return read_sums(self.sums) if exists(self.sums) else {}
        except InputError:
            return {}

    def distrust(self, config: str, concurrency: int) -> str | None:
        """Why a resume may not keep a payload that is on disk (None: it may): its bytes are
        not the ones the run wrote and vouched for in SHA256SUMS."""
        path = self.payload(config, concurrency)
        rel = path.relative_to(self.root).as_posix()
        want = self.listed().get(rel)
        if want is None:
            return (
                f"{rel} is not in SHA256SUMS (cut off before the run vouched for it, or added "
                "by hand): not trusted, measured again"
            )
        if sha256_file(path) != want:
            return (
                f"{rel} differs from its SHA256SUMS entry (edited or truncated after the run "
                "wrote it): not trusted, measured again"
            )
        return None

    def distrusted(self, config: str, levels: list[int]) -> list[str]:
        """``distrust`` of each level whose payload is on disk."""
        return [
            why
            for k in levels
            if self.payload(config, k).exists() and (why := self.distrust(config, k)) is not None
        ]

    def finished(self, config: str, levels: list[int], accept_invalid: bool) -> bool:
        """True when every level has a payload the run vouched for (SHA256SUMS), readable and
        valid (or, for a configuration expected to be invalid, merely complete)."""
        return self.finished_payloads(config, levels, accept_invalid) is not None

    def finished_payloads(
        self, config: str, levels: list[int], accept_invalid: bool
    ) -> list[Payload] | None:
        """Each level's payload, read once, when ``finished`` holds; else None."""
        got = []
        for k in levels:
            path = self.payload(config, k)
            if not path.exists() or self.distrust(config, k) is not None:
                return None
            try:
                p = read_payload(path)
            except InputError:
                return None
            if not p.evidence.validity.valid and not accept_invalid:
                return None
            got.append(p)
        return got

    def files(self) -> list[Path]:
        """Every artifact file (hidden temporaries and SHA256SUMS itself excluded), sorted."""
        return sorted(
            p
            for p in self.root.rglob("*")
            if p.is_file() and p.name != SUMS and not p.name.startswith(".")
        )

    def write_sums(self) -> Path:
        listed = {p.relative_to(self.root).as_posix(): sha256_file(p) for p in self.files()}
        write_text(self.sums, sums_text(listed), root=self.root)
        return self.sums

    def check_sums(self) -> list[str]:
        """Problems with SHA256SUMS (missing file, wrong hash); empty when it all agrees."""
        problems: list[str] = []
        for name, digest in read_sums(self.sums).items():
            path = self.root / name
            if not path.exists():
                problems.append(f"{name}: missing")
            elif sha256_file(path) != digest:
                problems.append(f"{name}: sha256 differs")
        return problems
