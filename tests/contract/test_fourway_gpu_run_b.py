"""The seed's four-way in one run folder of real engines (issue 49, item 1): the second H100
call series of 2026-12-07 (vLLM 0.26.0 and SGLang 0.5.17 as local processes,
`bench/experiments/tiny-fourway-gpu.yaml` at commit 8760f7d, one run id over four calls), kept
whole as tests/fixtures/gpu-runs/tiny-fourway-gpu-20261207-b.tar.xz. Held here, on the CPU:

- one workload: every payload of the seven configurations is of the same run, prompts, output
  length, sampling and iterations;
- vLLM's MTP on the seed's checkpoint shape (item 2): the BF16 head of the GPTQ target loads as
  Qwen3_5MTP, the engine's load rules find nothing skipped in its log, and it accepts every
  draft token of the chain (430 of 430), recomputed from the raw /metrics snapshots;
- the answers known in advance: each DFlash copy draft gets draft token 1 right and 2..4
  wrong (vLLM exactly 1/k; SGLang one acceptance short of it per request); the stock tree's
  MTP 0 of 1270 with the seed's seven skipped projections, the patched tree's 420 of 430;
- each engine served the layout its configuration names, one set of tensors in both;
- the report leads with the stock-vs-patched finding, has nothing left unmeasured, and every
  speculative run's greedy output is identical to its engine's baseline.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_recordings import FINDING, SKIP, SKIPPED, log, payload, recomputed, report, section, unpack

from bench.engines import get_engine
from bench.measure._validity import scan_log
from bench.schema import Payload

pytestmark = pytest.mark.contract

NAME = "tiny-fourway-gpu-20261207-b"
CONFIGS = {
    "vllm-baseline": (1, 4),
    "vllm-dflash": (1, 4),
    "vllm-mtp": (1, 4),
    "sglang-baseline": (1, 4),
    "sglang-dflash": (1, 4),
    "sglang-mtp": (1, 4),
    "sglang-mtp-stock": (1,),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(NAME, tmp_path_factory.mktemp("fourway-b"))


def every_payload(run: Path) -> dict[str, Payload]:
    return {f"{n}-c{k}": payload(run, f"{n}-c{k}") for n, ks in CONFIGS.items() for k in ks}


def test_seven_configurations_one_run_one_workload(run: Path) -> None:
    got = every_payload(run)
    assert sorted(p.name for p in (run / "payloads").iterdir()) == sorted(f"{n}.json" for n in got)
    assert len({p.evidence.run.run_id for p in got.values()}) == 1
    workloads = {
        name: (w.prompt_tokens, w.max_tokens, w.sampling, w.warmup, w.iterations, w.prompt_seed,
               w.chat_template.sha256 if w.chat_template else None)
        for name, w in ((n, p.evidence.workload) for n, p in got.items())
    }  # fmt: skip
    assert len(set(map(repr, workloads.values()))) == 1, workloads
    first = next(iter(workloads.values()))
    assert first[:2] == (128, 128) and first[3:6] == (2, 5, 2026) and first[6] is not None
    valid = {name: p.evidence.validity.valid for name, p in got.items()}
    assert [n for n, v in valid.items() if not v] == ["sglang-mtp-stock-c1"]


def test_vllm_loads_the_bf16_mtp_head_of_the_gptq_target(run: Path) -> None:
    text = log(run, "vllm-mtp")
    assert "Resolved architecture: Qwen3_5ForConditionalGeneration" in text
    assert "Resolved architecture: Qwen3_5MTP" in text
    assert "Detected MTP model. Sharing target model embedding weights" in text
    findings = scan_log(text, get_engine("vllm").load_patterns, True)
    assert [(f.code, f.key) for f in findings] == [("mtp_method_renamed", "qwen3_next_mtp")]
    for k in (1, 4):
        got = recomputed(payload(run, f"vllm-mtp-c{k}"))
        assert got.accepted_tokens == got.draft_tokens == 2 * got.drafts > 0, k
    c1 = recomputed(payload(run, "vllm-mtp-c1"))
    assert (c1.drafts, c1.draft_tokens, c1.accepted_tokens) == (215, 430, 430)


def test_acceptance_recomputed_from_the_raw_snapshots(run: Path) -> None:
    expected = {  # (drafts, draft tokens, accepted) at c=1
        "vllm-dflash": (320, 1280, 320),  # the copy draft: exactly 1 of k=4
        "sglang-dflash": (320, 1280, 315),  # one short of 1/k per request (5 requests)
        "sglang-mtp": (215, 430, 420),
        "sglang-mtp-stock": (635, 1270, 0),
    }
    for name, want in expected.items():
        p = payload(run, f"{name}-c1")
        got = recomputed(p)
        assert (got.drafts, got.draft_tokens, got.accepted_tokens) == want, name
        stored = p.evidence.acceptance
        assert stored is not None
        assert (stored.drafts, stored.draft_tokens, stored.accepted_tokens) == want, name
    engine = get_engine("sglang")
    stock = {f.key for f in scan_log(log(run, "sglang-mtp-stock"), engine.load_patterns, True)}
    assert stock == SKIPPED
    for name in ("sglang-mtp", "sglang-dflash"):
        found = scan_log(log(run, name), engine.load_patterns, True)
        assert not [f for f in found if f.code == SKIP], name


def test_each_engine_served_its_layout_of_one_set_of_tensors(run: Path) -> None:
    served = {n: payload(run, f"{n}-c1").evidence.served for n in CONFIGS}
    paths = {n: s.target.path for n, s in served.items() if s is not None}
    vl = "/models/mtp35vl-gptq"
    assert paths == {n: vl if n.startswith("vllm") or n == "sglang-dflash" else
                     "/models/mtp35-gptq" for n in CONFIGS}  # fmt: skip
    tensors = {s.target.tensors_sha256 for s in served.values() if s is not None}
    weights = {s.target.weights_sha256 for s in served.values() if s is not None}
    assert len(tensors) == 1 and len(weights) == 2  # one checkpoint, two files
    # SGLang 0.5.17's DFLASH on the conditional-generation class, graphs captured
    text = log(run, "sglang-dflash")
    assert "type=Qwen3_5ForConditionalGeneration, quant=gptq, bits=4" in text
    assert "Capture target verify CUDA graph end." in text


def test_the_report_leads_with_the_finding_and_every_output_is_lossless(
    run: Path, tmp_path: Path
) -> None:
    text = report(run, tmp_path / "report")
    summary = section(text, "Executive summary")
    assert all(line in summary for line in FINDING), summary
    assert "Not measured" not in summary
    table = section(text, "Greedy output: speculation against the baseline")
    rows = [r for r in table.splitlines() if r.startswith("| vllm-")
            or r.startswith("| sglang-")]  # fmt: skip
    assert len(rows) == 8 and all("| identical |" in r for r in rows), rows
