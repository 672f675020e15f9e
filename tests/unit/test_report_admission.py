"""The report states each configuration's effective admission cap as the engine logged it
(SGLang's Mamba-cache warning and its scheduler's capacity line), else from its flags."""

from __future__ import annotations

from pathlib import Path

from report_factory import seed_matrix, write_artifacts

from bench.report import load_artifacts, render_report

SGLANG_LOG = (
    "[2026-12-03 10:00:00 TP0] max_running_requests is capped to 5 by the mamba state cache "
    "(max_mamba_cache_size=10, 2 state slots per request). To raise it: increase "
    "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
    "--mamba-ssm-dtype bfloat16.\n"
    "[2026-12-03 10:00:01] max_total_num_tokens=60000, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=5, context_len=8192, "
    "available_gpu_mem=3.21 GB\n"
)


def test_logged_cap_wins_over_the_flags(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "art", seed_matrix(), logs={"sglang-dflash": SGLANG_LOG})
    rs = load_artifacts(art)
    info = rs.config_info("sglang-dflash")
    assert info is not None and info.admission_cap == 5
    assert info.admission_source is not None
    assert info.admission_source.startswith("engine log: [2026-12-03 10:00:01]")  # the last line
    vllm = rs.config_info("vllm-dflash")
    assert vllm is not None and (vllm.admission_cap, vllm.admission_source) == (
        16,
        "flag --max-num-seqs",
    )
    text = render_report(art, tmp_path / "out").read_text()
    assert "Admission cap: 5 live requests (engine log: " in text
    assert "Admission cap: 16 live requests (flag --max-num-seqs)." in text
