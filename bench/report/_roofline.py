"""The report's bandwidth roofline: each configuration's measured per-stream decode rate against
the ceiling ``bandwidth x cards / bytes read per step x tokens per step`` (bench.machine roofline).

Inputs, in order of preference: bandwidth from ``bandwidth.json`` (``specbench probe bandwidth``
output) else the card's datasheet figure; weight bytes from ``weights.json`` (measured from the
checkpoint's safetensors headers by the matrix) else the experiment's hand-written estimates.
A figure nobody knows leaves the ceiling unknown (and the report says why); bytes left out
because their size is unknown only raise the ceiling, so it stays an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from bench.core import read_json, read_json_model
from bench.machine import (
    BandwidthSource,
    card_bandwidth,
    ceiling,
    efficiency,
    mean_decode_context,
)
from bench.report._model import ByteSource, RooflineRow, RooflineSection, RunView
from bench.schema import (
    WEIGHTS_FILE,
    ByteEstimate,
    Experiment,
    Hardware,
    ModelBytes,
    WeightsFile,
)


def _read(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = read_json(path)  # a file the run folder holds: unreadable is exit 2, not "absent"
    return data if isinstance(data, dict) else None


def measured_bandwidth(artifacts_dir: Path) -> float | None:
    """The slowest card's median from ``bandwidth.json`` (bench.probe), if the artifacts have it."""
    data = _read(artifacts_dir / "bandwidth.json")
    if not data:
        return None
    vals = [d.get("bandwidthGBs") for d in data.get("devices") or [] if isinstance(d, dict)]
    nums = [float(v) for v in vals if isinstance(v, int | float) and v > 0]
    return min(nums) if nums else None


def _bytes(
    estimate: ByteEstimate | None, measured: int | None, field: str, measured_from: str | None
) -> ByteSource | None:
    if measured is not None and measured > 0:
        return ByteSource(
            what=field,
            value=measured,
            source=f"measured from the safetensors headers in {measured_from}",
        )
    if estimate is not None:
        return ByteSource(what=field, value=estimate.estimate, source=estimate.derivation)
    return None


def _weights(artifacts_dir: Path) -> WeightsFile | None:
    """weights.json as the matrix wrote it; None when the run has none."""
    path = artifacts_dir / WEIGHTS_FILE
    return read_json_model(path, WeightsFile) if path.is_file() else None


def build_roofline(
    artifacts_dir: Path,
    exp: Experiment | None,
    hw: Hardware,
    runs: tuple[RunView, ...],
    prompt_tokens: int | None,
    max_tokens: int | None,
    draft_of: dict[str, str | None] | None = None,
) -> RooflineSection:
    """The roofline rows of every valid run (see the module docstring for the inputs)."""
    inputs = _inputs(artifacts_dir, exp, hw, prompt_tokens, max_tokens)
    rows = [_row(r, inputs, draft_of or {}) for r in runs if r.valid and r.attempt is None]
    bw = inputs.bandwidth
    return RooflineSection(
        bandwidth_gbs=bw[0] if bw else None,
        bandwidth_source=bw[1] if bw else "unknown",
        cards=inputs.cards,
        context_tokens=inputs.context,
        inputs=inputs.byte_sources(),
        rows=tuple(rows),
        missing=tuple(inputs.missing),
    )


@dataclass(frozen=True)
class _Inputs:
    """What every ceiling is computed from, each None where nobody knows it (``missing`` says
    which, in the report's words); bytes keyed by the experiment's model key (``drafts``: by
    the draft's Hugging Face id)."""

    bandwidth: tuple[float, BandwidthSource] | None
    cards: int | None
    context: float | None
    target_key: str
    weights: ByteSource | None
    mtp: ByteSource | None
    kv: ByteSource | None
    drafts: dict[str, ByteSource]
    missing: list[str]

    def byte_sources(self) -> tuple[ByteSource, ...]:
        """The byte counts the report lists, the target's first, each named by its model."""
        target = [
            b.model_copy(update={"what": f"{self.target_key} {b.what}"})
            for b in (self.weights, self.mtp, self.kv)
            if b is not None
        ]
        return (*target, *self.drafts.values())


def _inputs(
    artifacts_dir: Path,
    exp: Experiment | None,
    hw: Hardware,
    prompt_tokens: int | None,
    max_tokens: int | None,
) -> _Inputs:
    """Bandwidth, cards, decode context and byte counts, each from the best source there is
    (module docstring), and what is missing in the order the report lists it."""
    missing: list[str] = []
    bw = card_bandwidth(hw, measured_bandwidth(artifacts_dir))
    if bw is None:
        missing.append("memory bandwidth (no bandwidth.json and no datasheet figure for the GPU)")
    cards = exp.tensor_parallel if exp is not None else (hw.gpuCount or None)
    if cards is None:
        missing.append("number of cards")
    weights = _weights(artifacts_dir)
    measured = weights.models if weights else {}
    target_key = exp.target_model if exp is not None else "target"
    target = exp.models.get(target_key) if exp is not None else None
    tm = measured.get(target_key)
    tw = _bytes(
        target.weight_bytes if target else None,
        tm.decodeWeightBytes if tm else None,
        "weight_bytes",
        tm.path if tm else None,
    )
    mtp = _bytes(
        target.mtp_head_bytes if target else None,
        tm.mtpHeadBytes if tm else None,
        "mtp_head_bytes",
        tm.path if tm else None,
    )
    kv = _bytes(target.kv_bytes_per_token if target else None, None, "kv_bytes_per_token", None)
    if tw is None:
        missing.append("target weight bytes (no weights.json, no weight_bytes in the experiment)")
    if kv is None:
        missing.append("KV bytes per token: KV reads are not counted (ceiling is higher)")
    ctx = (
        mean_decode_context(prompt_tokens, max_tokens)
        if prompt_tokens is not None and max_tokens is not None
        else None
    )
    drafts = _draft_bytes(exp, measured, target_key)
    return _Inputs(bw, cards, ctx, target_key, tw, mtp, kv, drafts, missing)


def _draft_bytes(
    exp: Experiment | None, measured: dict[str, ModelBytes], target_key: str
) -> dict[str, ByteSource]:
    """Each draft model's weight bytes, by its Hugging Face id."""
    drafts: dict[str, ByteSource] = {}
    for key, m in (exp.models if exp is not None else {}).items():
        if key == target_key:
            continue
        dm = measured.get(key)
        b = _bytes(
            m.weight_bytes,
            dm.decodeWeightBytes if dm else None,
            "weight_bytes",
            dm.path if dm else None,
        )
        if b is not None:
            drafts[m.hf_id] = b.model_copy(update={"what": f"{key} weight_bytes"})
    return drafts


class _Step(NamedTuple):
    """What one decode step of a run reads and yields: tokens per step and where that figure
    comes from, the draft's bytes per step, and why the ceiling is unknown (None: it is not)."""

    tokens: float
    source: str
    draft_bytes: int
    unknown: str | None


def _step(r: RunView, inputs: _Inputs, draft_of: dict[str, str | None]) -> _Step:
    if r.method == "NONE":
        return _Step(1.0, "1 (no speculation)", 0, None)
    why: str | None = None
    draft = 0
    if not r.mean_acceptance_length:
        why = "mean acceptance length unknown"
    if r.method == "MTP":
        mtp = inputs.mtp
        if mtp is None or mtp.value is None or r.spec_tokens is None:
            why = why or "MTP head bytes or speculative tokens unknown"
        else:
            draft = r.spec_tokens * mtp.value
    elif r.method == "DFLASH":
        # The experiment's draft for this configuration, else the payload's label.
        name = draft_of.get(r.config) or r.draft_model
        d = inputs.drafts.get(str(name))
        if d is None or d.value is None:
            why = why or f"draft model bytes unknown ({name})"
        else:
            draft = d.value
    return _Step(r.mean_acceptance_length or 0.0, "measured mean acceptance length", draft, why)


def _row(r: RunView, inputs: _Inputs, draft_of: dict[str, str | None]) -> RooflineRow:
    """One valid run against its ceiling, or with why its ceiling is unknown."""
    row = RooflineRow(
        key=r.key,
        config=r.config,
        engine=r.engine,
        method=r.method,
        concurrency=r.concurrency,
        measured=r.decode.mean,
    )
    step = _step(r, inputs, draft_of)
    bw, cards, tw, kv = inputs.bandwidth, inputs.cards, inputs.weights, inputs.kv
    why = step.unknown
    if bw is None or cards is None or tw is None or tw.value is None:
        why = why or "bandwidth, cards or target weight bytes unknown"
    if why is None and bw is not None and cards is not None and tw is not None:
        roof = ceiling(
            bw[0],
            cards,
            int(tw.value or 0),
            kv_bytes_per_token=float(kv.value or 0) if kv is not None else 0.0,
            context_tokens=inputs.context or 0.0,
            concurrency=r.concurrency,
            tokens_per_step=step.tokens,
            draft_bytes_per_step=step.draft_bytes,
            bandwidth_source=bw[1],
        )
        eff = efficiency(r.decode.mean, roof) if r.decode.mean is not None else None
        return row.model_copy(
            update={
                "tokens_per_step": step.tokens,
                "tokens_per_step_source": step.source,
                "gb_per_step": roof.bytesPerStepPerRank * cards / 1e9,
                "ceiling": roof.ceilingTokS,
                "fraction": eff.fraction if eff else None,
                "above": bool(eff and eff.aboveCeiling),
            }
        )
    return row.model_copy(update={"unknown": why, "tokens_per_step_source": step.source})
