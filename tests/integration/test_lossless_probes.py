"""The lossless check end to end over HTTP on 127.0.0.1: ``bench.measure.measure`` against the
in-thread emulator (vLLM and SGLang shapes) sends its logprob probes after the timed
iterations, and the report judges each speculative run against the baseline: a healthy run is
identical, one that parts at a bf16 near-tie (``near_tie_flip``) is lossless within numerics,
and a broken draft whose tokens go out unverified (``lossy_draft``) is lossy."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.emulator import serve_in_thread
from bench.emulator.logprobs import first_near_tie
from bench.emulator.profile import FailMode
from bench.emulator.runner import resolve_profile
from bench.measure import RunSpec, measure
from bench.measure._probes import MAX_PROBES, TOP_LOGPROBS
from bench.report import load_artifacts, lossless, render_report
from bench.report._lossless import NEAR_TIE_NATS
from bench.schema import Hardware, Payload, write_payload

HW = Hardware(
    hwClass="DISCRETE_GPU",
    gpuName="NVIDIA GeForce RTX 3090",
    gpuCount=2,
    vramGb=48.0,
    cpu="test",
    ramGb=64.0,
    os="Linux",
)
P, C = 48, 2
SCALE = 0.005


def run_one(engine: str, profile: str, config: str, fail: tuple[FailMode, ...]) -> Payload:
    prof = resolve_profile(engine, profile, fail=fail, time_scale=SCALE)
    # past the first near-tie at or after failures.after_tokens, so the flip shows in the text
    m = first_near_tie(prof.failures.after_tokens) + 8
    with serve_in_thread(engine, prof) as h:
        assert h.wait_ready(30)
        spec = RunSpec(
            engine=engine,  # type: ignore[arg-type]
            base_url=h.base_url,
            hf_id="btbtyler09/Qwen3.8-27B-GPTQ-4bit",
            served_model=prof.served_model,
            quantization="GPTQ-4bit",
            hardware=HW,
            spec_method="NONE" if prof.spec is None else prof.spec.method,
            spec_num_tokens=None if prof.spec is None else prof.spec.num_speculative_tokens,
            prompt_tokens=P,
            max_tokens=m,
            concurrency=C,
            warmup=0,
            iterations=2,
            prompt_seed=11,
            config_name=config,
        )
        return measure(spec)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_healthy_near_tie_and_broken_draft(engine: str, tmp_path: Path) -> None:
    runs = {
        "baseline": (f"{engine}-baseline", ()),
        "healthy": (f"{engine}-dflash", ()),
        "near-tie": (f"{engine}-dflash", (FailMode.NEAR_TIE_FLIP,)),
        "broken-draft": (f"{engine}-dflash", (FailMode.LOSSY_DRAFT,)),
    }
    (tmp_path / "payloads").mkdir()
    for config, (profile, fail) in runs.items():
        p = run_one(engine, profile, config, fail)
        assert p.evidence.validity.valid, p.evidence.validity.reasons
        probes = p.evidence.logprob_probes
        assert probes is not None and probes.note is None
        measured = [r.prompt_sha256 for it in p.evidence.iterations for r in it.requests]
        assert len(measured) == 2 * C <= MAX_PROBES
        assert [r.prompt_sha256 for r in probes.requests] == measured
        for r in probes.requests:
            assert len(r.tokens) == p.outputTokens
            assert all(len(t.top) == TOP_LOGPROBS for t in r.tokens)
        write_payload(tmp_path / "payloads" / f"{config}-c{C}.json", p)
    rows = {r.config: r for r in lossless(load_artifacts(tmp_path).runs)}
    assert {c: r.verdict for c, r in rows.items()} == {
        "healthy": "identical",
        "near-tie": "within numerics",
        "broken-draft": "lossy",
    }
    for r in rows.values():
        assert r.matched == r.requests == 2 * C and r.probed == 2 * C
    tie = rows["near-tie"]
    assert tie.identical == 0 and {c.verdict for c in tie.checks} == {"near-tie"}
    assert {c.source for c in tie.checks} == {"measured"}
    broken = rows["broken-draft"]
    assert {c.verdict for c in broken.checks} == {"real"}
    assert all("not its own top-1" in c.why for c in broken.checks)
    report = render_report(tmp_path, tmp_path / "report").read_text()
    assert f"at most {NEAR_TIE_NATS} nats" in report and "bf16 keeps 8 significant bits" in report
    assert "| lossless within numerics |" in report and "| LOSSY |" in report
