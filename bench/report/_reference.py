"""The seed report's published figures as a reference set the renderer reads like artifacts.

The file (reports/reference/seed-published.json) holds only what the seed states: bare means, a
few relations between unknown values ("SGLang's TTFT is lower than vLLM's", "MTP cut vLLM's TTFT
by 4.24 ms"), load facts and commands. Unknown values stay null; bounds implied by the stated
relations are derived here, never typed in. There are no raw samples, so the seed's stated decode
spread ("stddev <= 0.15 tok/s, n=5") is used as an explicitly labelled assumption.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from bench.core import StrictModel, read_json_model
from bench.report._model import (
    CommandBlock,
    ConcurrencyFact,
    ConfigInfo,
    Figure,
    FileEntry,
    PublishedDelta,
    Reason,
    RunSet,
    RunView,
)

REFERENCE_KIND = "specbench.reference/1"
REFERENCE_LABEL = "published figures, no raw samples"
REFERENCE_FILE = "seed-published.json"


class SpreadAssumption(StrictModel):
    metric: Literal["decode"]
    stddev_max: float = Field(gt=0)
    n: int = Field(ge=2)
    statement: str


class RefRun(StrictModel):
    id: str
    config: str
    engine: str
    method: str
    spec_tokens: int | None = None
    draft_model: str | None = None
    concurrency: int = 1
    valid: bool = True
    attempt: str | None = None
    decode_tok_s: float | None = None
    ttft_ms: float | None = None
    aggregate_tok_s: float | None = None
    approximate: bool = False
    reasons: list[Reason] = Field(default_factory=list)
    acceptance_raw: dict[str, Any] = Field(default_factory=dict)


class Relation(StrictModel):
    """``less``: metric(a) < metric(b); ``delta``: metric(a) - metric(b) = value."""

    metric: Literal["decode", "ttft"]
    kind: Literal["less", "delta"]
    a: str
    b: str
    value: float | None = None
    statement: str


class RefArtifact(StrictModel):
    path: str
    verdict: str


class ReferenceSet(StrictModel):
    kind: Literal["specbench.reference/1"]
    label: Literal["published figures, no raw samples"]
    source: str
    title: str
    hf_id: str
    quantization: str
    hardware: list[str]
    workload: dict[str, Any]
    spread_assumption: SpreadAssumption
    configurations: list[ConfigInfo]
    runs: list[RefRun]
    relations: list[Relation] = Field(default_factory=list)
    concurrency_facts: list[ConcurrencyFact] = Field(default_factory=list)
    commands: list[CommandBlock] = Field(default_factory=list)
    artifacts: list[RefArtifact] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def is_reference_dir(path: Path) -> bool:
    return (path / REFERENCE_FILE).is_file()


def read_reference(path: Path) -> ReferenceSet:
    f = path / REFERENCE_FILE if path.is_dir() else path
    return read_json_model(f, ReferenceSet)


def _bounds(ref: ReferenceSet, metric: str) -> dict[str, float]:
    """Strict lower bounds of unknown values implied by the stated relations (fixed point)."""
    value = {r.id: (r.decode_tok_s if metric == "decode" else r.ttft_ms) for r in ref.runs}
    lower: dict[str, float] = {}

    def lo(k: str) -> float | None:
        v = value.get(k)
        return v if v is not None else lower.get(k)

    for _ in range(len(ref.relations) + 1):
        for rel in (r for r in ref.relations if r.metric == metric):
            if rel.kind == "less":
                a_lo = lo(rel.a)
                if a_lo is not None and value.get(rel.b) is None:
                    lower[rel.b] = max(lower.get(rel.b, a_lo), a_lo)
            elif rel.value is not None:
                a_lo, b_lo = lo(rel.a), lo(rel.b)
                if b_lo is not None and value.get(rel.a) is None:
                    lower[rel.a] = max(lower.get(rel.a, b_lo + rel.value), b_lo + rel.value)
                if a_lo is not None and value.get(rel.b) is None:
                    lower[rel.b] = max(lower.get(rel.b, a_lo - rel.value), a_lo - rel.value)
    return lower


def reference_runset(path: Path) -> RunSet:
    """The reference file as a RunSet, with the spread assumption and derived bounds applied."""
    ref = read_reference(path)
    sa = ref.spread_assumption
    ttft_lo = _bounds(ref, "ttft")
    runs = []
    for r in ref.runs:
        decode = (
            Figure(mean=r.decode_tok_s, stddev=sa.stddev_max, n=sa.n, spread_assumed=True)
            if r.decode_tok_s is not None and r.valid and not r.approximate
            else Figure(mean=r.decode_tok_s)
        )
        runs.append(
            RunView(
                key=r.id,
                config=r.config,
                engine=r.engine,
                method=r.method.upper(),
                spec_tokens=r.spec_tokens,
                draft_model=r.draft_model,
                concurrency=r.concurrency,
                valid=r.valid,
                attempt=r.attempt,
                decode=decode,
                ttft=Figure(mean=r.ttft_ms, lower_bound=ttft_lo.get(r.id)),
                aggregate=Figure(mean=r.aggregate_tok_s),
                reasons=tuple(r.reasons),
                acceptance_raw=r.acceptance_raw,
                iterations=sa.n,
            )
        )
    deltas = tuple(
        PublishedDelta(metric=rel.metric, a=rel.a, b=rel.b, delta=rel.value)
        for rel in ref.relations
        if rel.kind == "delta" and rel.value is not None
    )
    assumptions = (
        f"{sa.statement} No raw samples were published, so every decode significance test on "
        f"this set assumes stddev = {sa.stddev_max:g} tok/s with n = {sa.n} for each run.",
        *(f"Stated relation used: {rel.statement}" for rel in ref.relations),
    )
    return RunSet(
        source_kind="reference",
        source=f"{ref.source} ({ref.label})",
        title=ref.title,
        hf_id=ref.hf_id,
        quantization=ref.quantization,
        hardware_lines=tuple(ref.hardware),
        workload=ref.workload,
        configs=tuple(ref.configurations),
        runs=tuple(runs),
        published_deltas=deltas,
        concurrency_facts=tuple(ref.concurrency_facts),
        files=tuple(FileEntry(path=a.path, verdict=a.verdict) for a in ref.artifacts),
        commands=tuple(ref.commands),
        commands_source="as published in the seed report",
        assumptions=assumptions,
        notes=tuple(ref.notes),
    )
