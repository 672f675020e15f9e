"""The four-way's first H100 call series (2026-12-07, vLLM 0.26.0 and SGLang 0.5.17 as local
processes, `bench/experiments/tiny-fourway-gpu.yaml` before `--gdn-prefill-backend triton`),
kept whole as tests/fixtures/gpu-runs/tiny-fourway-gpu-20261207-a.tar.xz by
scripts/gpu_fourway_fixtures.py. Held here, on the CPU, in every CI run:

- the seed's bug and fix **with CUDA graphs** (issue 49, item 3): the stock tree's MTP draft
  inherits the target's GPTQ, its seven projections are skipped (read from the served log by
  the engine's own load rules) and it accepts 0 of 1270 draft tokens; the patched tree's
  accepts 420 of 430; both recomputed from the raw /metrics snapshots the payloads keep;
- the report of that folder leads with the stock-vs-patched finding and names the four
  configurations that left no payload, with the reasons the run recorded;
- why they left none: vLLM 0.26.0 on an SM 9.0 GPU picks FlashInfer's Gated DeltaNet prefill
  (not carried), and SGLang 0.5.17 registers the text-only Qwen3.5 class without the DFLASH
  hidden-state capture that its Qwen3_5ForConditionalGeneration has.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_recordings import (
    FINDING,
    PATCH_LINE,
    SKIP,
    SKIPPED,
    log,
    payload,
    recomputed,
    report,
    section,
    status,
    unpack,
)

from bench.engines import get_engine
from bench.engines._fatal import known_causes
from bench.measure._validity import scan_log

pytestmark = pytest.mark.contract

NAME = "tiny-fourway-gpu-20261207-a"
SGLANG = get_engine("sglang")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(NAME, tmp_path_factory.mktemp("fourway"))


def test_the_seeds_bug_and_fix_with_cuda_graphs(run: Path) -> None:
    stock, patched = log(run, "sglang-mtp-stock"), log(run, "sglang-mtp")
    for text in (stock, patched):
        assert "The server is fired up and ready to roll!" in text
        # graphs, not eager: the target's verify graph and the draft's were captured
        assert "Capture target verify CUDA graph end." in text
        assert "Capture draft decode CUDA graph end." in text
    assert "type=Qwen3_5ForCausalLMMTP, quant=gptq, bits=4" in stock
    assert PATCH_LINE in patched and PATCH_LINE not in stock
    skipped = {f.key for f in scan_log(stock, SGLANG.load_patterns, True) if f.code == SKIP}
    assert skipped == SKIPPED
    assert not [f for f in scan_log(patched, SGLANG.load_patterns, True) if f.code == SKIP]
    got = {n: recomputed(payload(run, f"{n}-c1")) for n in ("sglang-mtp-stock", "sglang-mtp")}
    assert (got["sglang-mtp-stock"].accepted_tokens, got["sglang-mtp-stock"].draft_tokens) == (
        0,
        1270,
    )
    p = got["sglang-mtp"]
    assert (p.drafts, p.draft_tokens, p.accepted_tokens) == (215, 430, 420)
    for name, again in got.items():
        stored = payload(run, f"{name}-c1").evidence.acceptance
        assert stored is not None
        assert (stored.drafts, stored.draft_tokens, stored.accepted_tokens) == (
            again.drafts,
            again.draft_tokens,
            again.accepted_tokens,
        ), name
    verdicts = status(run)
    assert verdicts["sglang-mtp-stock"]["valid"] is False
    assert verdicts["sglang-mtp-stock"]["expected_invalid"] is True
    codes = [r.split(": ", 1)[0].split(" ", 1)[1] for r in verdicts["sglang-mtp-stock"]["reasons"]]
    assert codes == ["zero_acceptance", "draft_tensors_skipped"]
    assert verdicts["sglang-mtp"]["valid"] is True and verdicts["sglang-baseline"]["valid"] is True


def test_vllm_0_26_on_sm90_takes_flashinfers_gated_deltanet_prefill(run: Path) -> None:
    for name in ("vllm-baseline", "vllm-dflash", "vllm-mtp"):
        text = log(run, name)
        assert "in fi_chunk_gated_delta_rule" in text, name
        first = status(run)[name]["reasons"][0]
        assert known_causes(first, text) == [
            'the server raised, first in its log: "ModuleNotFoundError: No module named '
            "'flashinfer'\""
        ], name


def test_sglang_0_5_17_dflash_refuses_the_text_only_qwen3_5_class(run: Path) -> None:
    text = log(run, "sglang-dflash")
    assert "type=Qwen3_5ForCausalLM, quant=gptq" in text
    causes = known_causes(status(run)["sglang-dflash"]["reasons"][0], text)
    assert causes[0].startswith(
        "the server raised, first in its log: 'ValueError: Model Qwen3_5ForCausalLM implements "
        "neither set_dspark_layers_to_capture nor set_dflash_layers_to_capture"
    )
    assert "not the out-of-memory killer" in causes[1]


def test_the_report_leads_with_the_finding_and_names_what_left_no_payload(
    run: Path, tmp_path: Path
) -> None:
    text = report(run, tmp_path / "report")
    summary = section(text, "Executive summary")
    assert all(line in summary for line in FINDING), summary
    assert "**Not measured: 4 of 7 configurations of this run left no payload**" in summary
    for name in ("vllm-baseline", "vllm-dflash", "vllm-mtp", "sglang-dflash"):
        assert f"- `{name}` (" in summary, name
    # the reasons the run recorded (this folder's specbench had no exception reader yet; the
    # report never re-reads a log: test_vllm_0_26_... reads it with today's rules)
    assert "vllm-mtp: server exited (code 1) before it was ready" in summary
    assert "sglang-dflash: server exited (code -9) before it was ready" in summary
