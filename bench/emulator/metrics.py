"""Prometheus text exposition of the emulated engine's counters, in each engine's names.

Written by hand (the container has no prometheus_client) in the layout prometheus_client's
``generate_latest`` produces: ``# HELP``/``# TYPE`` per family, a counter ``x`` exposed as
``x_total`` plus an ``x_created`` gauge family (vLLM; not SGLang, whose multiprocess collector
has none), labels sorted by name, values as Go floats.
Names, help texts and labels come from bench/emulator/_wire.py, through formats (upstream
cited there).
"""

from __future__ import annotations

from collections.abc import Sequence

import bench.emulator.formats as formats
from bench.emulator.engine import EmulatedEngine

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Sample = tuple[dict[str, str], float]


def go_float(value: float) -> str:
    """Format like prometheus_client's floatToGoString (Go switches to exponents earlier)."""
    v = float(value)
    if v != v:
        return "NaN"
    if v == float("inf"):
        return "+Inf"
    if v == float("-inf"):
        return "-Inf"
    s = repr(v)
    dot = s.find(".")
    if v > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def _escape(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _family(lines: list[str], name: str, doc: str, kind: str, samples: Sequence[Sample]) -> None:
    lines.append(f"# HELP {name} {doc}")
    lines.append(f"# TYPE {name} {kind}")
    lines.extend(f"{name}{_labels(lab)} {go_float(val)}" for lab, val in samples)


def _counter(
    lines: list[str], spec: tuple[str, str], samples: Sequence[Sample], created: float | None
) -> None:
    """A counter; its ``_created`` gauge family unless ``created`` is None (SGLang's
    multiprocess Prometheus collector exposes none: tests/fixtures/sglang-gpu/rec/metrics.txt)."""
    name, doc = spec
    base = name.removesuffix("_total")
    _family(lines, f"{base}_total", doc, "counter", samples)
    if created is not None:
        _family(lines, f"{base}_created", doc, "gauge", [(lab, created) for lab, _ in samples])


def render(engine: EmulatedEngine) -> str:
    """The whole /metrics body for the engine shape of ``engine.profile``."""
    if engine.profile.engine == "vllm":
        return _render_vllm(engine)
    return _render_sglang(engine)


def _render_vllm(engine: EmulatedEngine) -> str:
    c = engine.counters
    base = {"model_name": engine.profile.served_model, "engine": "0"}
    lines: list[str] = []
    _family(lines, *formats.VLLM_RUNNING, "gauge", [(base, len(engine.running))])
    _family(lines, *formats.VLLM_WAITING, "gauge", [(base, len(engine.waiting))])
    _counter(lines, formats.VLLM_PROMPT_TOKENS, [(base, c.prompt_tokens)], c.created)
    _counter(lines, formats.VLLM_GENERATION_TOKENS, [(base, c.generation_tokens)], c.created)
    success = [
        ({**base, "finished_reason": reason}, c.success.get(reason, 0))
        for reason in ("stop", "length", "abort", "error")
    ]
    _counter(lines, formats.VLLM_REQUEST_SUCCESS, success, c.created)
    if engine.k:
        _counter(lines, formats.VLLM_SPEC_DRAFTS, [(base, c.drafts)], c.created)
        _counter(lines, formats.VLLM_SPEC_DRAFT_TOKENS, [(base, c.draft_tokens)], c.created)
        _counter(lines, formats.VLLM_SPEC_ACCEPTED, [(base, c.accepted_tokens)], c.created)
        per_pos = [({**base, "position": str(i)}, n) for i, n in enumerate(c.accepted_per_pos)]
        _counter(lines, formats.VLLM_SPEC_ACCEPTED_PER_POS, per_pos, c.created)
    return "\n".join(lines) + "\n"


def _render_sglang(engine: EmulatedEngine) -> str:
    c = engine.counters
    model = engine.profile.served_model
    sched = {
        "model_name": model,
        "engine_type": "unified",
        "tp_rank": "0",
        "pp_rank": "0",
        "moe_ep_rank": "0",
    }
    tok = {"model_name": model, "engine_type": "unified"}
    lines: list[str] = []
    _family(lines, *formats.SGLANG_RUNNING, "gauge", [(sched, len(engine.running))])
    _family(lines, *formats.SGLANG_QUEUE, "gauge", [(sched, len(engine.waiting))])
    _family(lines, *formats.SGLANG_GEN_THROUGHPUT, "gauge", [(sched, c.sg_gen_throughput)])
    if engine.k:
        _family(lines, *formats.SGLANG_SPEC_ACCEPT_LENGTH, "gauge", [(sched, c.sg_accept_length)])
        _family(lines, *formats.SGLANG_SPEC_ACCEPT_RATE, "gauge", [(sched, c.sg_accept_rate)])

    # labelled counters have no sample until the first finished request (prometheus_client)
    def by_stream(values: dict[str, int]) -> list[Sample]:
        return [({**tok, "is_streaming": k}, v) for k, v in sorted(values.items())]

    _counter(lines, formats.SGLANG_PROMPT_TOKENS, by_stream(c.sg_prompt_tokens), None)
    _counter(lines, formats.SGLANG_GENERATION_TOKENS, by_stream(c.sg_generation_tokens), None)
    verify = [(tok, c.sg_verify_calls)] if c.sg_verify_calls > 0 else []
    _counter(lines, formats.SGLANG_SPEC_VERIFY_CALLS, verify, None)
    _counter(lines, formats.SGLANG_NUM_REQUESTS, by_stream(c.sg_requests), None)
    return "\n".join(lines) + "\n"
