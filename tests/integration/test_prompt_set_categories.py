"""Issue 37: a categorised prompt set measured on the emulator, both engine shapes. Each
category runs as its own windows; the emulator's profile accepts a fixed number of draft
tokens per verify step for each category (bench/emulator/profiles/*: ``spec.categories``), so
each category's acceptance rate is known exactly: accepted / k. SGLang's per-request counts
(``return_spec_tokens_details``) are asked for, vLLM's (a server started with
``--per-request-spec-decode-metrics``) read, and both checked against the counters."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_server_faults import HW as HW_RECORD

from bench.cli import main
from bench.emulator import serve_in_thread
from bench.emulator.runner import resolve_profile
from bench.measure import RunSpec, measure, read_prompt_set
from bench.schema import Hardware, check_payload, read_payload

PROMPTS = Path(__file__).resolve().parents[2] / "bench" / "prompts" / "categories-small.jsonl"
HW = Hardware.model_validate(HW_RECORD)  # the raw-socket tests' record


@pytest.mark.parametrize(
    ("engine", "profile", "k"), [("vllm", "vllm-dflash", 4), ("sglang", "sglang-mtp", 2)]
)
def test_each_category_gets_the_acceptance_its_profile_fixes(
    engine: str, profile: str, k: int
) -> None:
    # vLLM sends per-request counts only when started with --per-request-spec-decode-metrics
    per_request = "summary" if engine == "vllm" else None
    # no emulated load time; steps of a few ms, slow enough that a loaded machine still reads
    # the tokens of a step apart
    prof = resolve_profile(
        engine, profile, time_scale=0.1, per_request_spec_decode_metrics=per_request
    ).model_copy(update={"load_s": 0.0, "warmup_s": 0.0})
    assert prof.spec is not None
    want = {c.name: min(c.accepted, k) / k for c in prof.spec.categories}
    assert len(set(want.values())) == len(want)  # the categories differ by construction
    ps = read_prompt_set(PROMPTS, "categories-small", None, "test")
    handle = serve_in_thread(engine, prof)
    try:
        assert handle.wait_ready(30)
        spec = RunSpec(
            engine=engine,
            base_url=handle.base_url,
            hf_id="x/y",
            served_model=prof.served_model,
            quantization="GPTQ-4bit",
            hardware=HW,
            spec_method="dflash" if engine == "vllm" else "mtp",
            spec_num_tokens=k,
            prompt_tokens=64,
            max_tokens=13,
            concurrency=2,
            warmup=1,
            iterations=2,
            logprob_probes=0,
            prompt_set=ps,
            enable_thinking=False,
        )
        payload = measure(spec)
    finally:
        handle.stop()
    ev = payload.evidence
    assert ev.validity.valid, ev.validity.reasons
    assert [p for p in check_payload(payload) if p.severity == "error"] == []
    got = {c.category: c for c in ev.categories}
    assert list(got) == ["code", "factual", "prose"]
    for cat, window in got.items():
        assert len(window.iterations) == 2 and window.valid_iterations == 2
        for it in ev.iterations:
            if it.index in window.iterations:
                assert it.category == cat and all(r.category == cat for r in it.requests)
        req = window.request_acceptance
        assert req is not None and req.requests == 4
        assert req.acceptance_rate == pytest.approx(want[cat], abs=1e-12)
        assert req.agrees_with_counters is True, req.check
        if engine == "vllm":
            assert req.source == "vllm metrics.speculative_decoding"
            # vLLM's counters count every verified draft: exact, and equal per request
            assert window.acceptance is not None
            assert window.acceptance.acceptance_rate == pytest.approx(want[cat], abs=1e-12)
            assert window.acceptance.accepted_tokens == req.accepted_tokens
        else:
            assert req.source == "sglang sglext.spec_tokens_details"
    wl = ev.workload
    assert wl.prompt_set is not None and wl.prompt_set.prompts == {
        "code": 3,
        "factual": 3,
        "prose": 3,
    }
    assert wl.chat_template is not None and wl.chat_template.kwargs == {"enable_thinking": False}
    said = "SGLang /server_info chat_template: null (the served model's own template)"
    assert (wl.chat_template.source == said) == (engine == "sglang")
    assert wl.sampling is not None and wl.sampling.temperature == 0.0
    assert wl.sampling.max_tokens == 13 and wl.sampling.ignore_eos


def test_specbench_run_takes_a_prompt_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prof = resolve_profile("sglang", "sglang-mtp", time_scale=0.1).model_copy(
        update={"load_s": 0.0, "warmup_s": 0.0}
    )
    assert prof.spec is not None
    hw = tmp_path / "hw.json"
    hw.write_text(HW.model_dump_json())
    out = tmp_path / "p.json"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"category": "code", "prompt": "x"}\n{"category": "code"}\n')
    handle = serve_in_thread("sglang", prof)
    try:
        assert handle.wait_ready(30)
        args = [
            "run", "sglang", "--base-url", handle.base_url, "--hf-id", "x/y",
            "--served-model", prof.served_model, "--quantization", "q", "--hardware", str(hw),
            "--spec-method", "mtp", "--spec-num-tokens", "2", "--prompt-tokens", "64",
            "--max-tokens", "9", "--warmup", "0", "--iterations", "1", "--out", str(out),
            "--no-telemetry", "--logprob-probes", "0", "--no-enable-thinking",
        ]  # fmt: skip
        with pytest.raises(SystemExit) as done:
            main([*args, "--prompt-set", str(PROMPTS)])
        assert done.value.code in (0, None), capsys.readouterr().err
        with pytest.raises(SystemExit) as refused:
            main([*args, "--prompt-set", str(bad)])
    finally:
        handle.stop()
    assert refused.value.code == 2
    assert f"{bad}:2" in capsys.readouterr().err
    ev = read_payload(out).evidence
    want = {c.name: c.accepted / 2 for c in prof.spec.categories}
    got = {c.category: c.request_acceptance for c in ev.categories}
    assert {k: v.acceptance_rate for k, v in got.items() if v} == want
    assert ev.workload.chat_template is not None
    assert ev.workload.chat_template.kwargs == {"enable_thinking": False}
