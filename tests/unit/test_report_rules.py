"""Changed inputs change the text: swap a winner, blur a gap, add an invalid run, drop a
configuration, mark runs simulated, feed hostile strings."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from report_factory import Spec, experiment_lock, jitter, seed_matrix, write_artifacts

from bench.report import ConcurrencySweep, linked_files, render_report
from bench.schema import ValidityReason


def render(tmp_path: Path, specs: list[Spec], **kw: object) -> str:
    art = write_artifacts(tmp_path / "art", specs, **kw)  # type: ignore[arg-type]
    path = render_report(art, tmp_path / "out")
    text = path.read_text(encoding="utf-8")
    for target in linked_files(text):
        assert (path.parent / target).is_file(), target
    return text


def pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:.2f}%"


def test_baseline_matrix_states_the_seed_claims(tmp_path: Path) -> None:
    text = render(tmp_path, seed_matrix(sweep=False))
    assert "On vLLM, DFlash was 17.87% faster than MTP." in text
    assert "Within MTP, vLLM was 6.67% faster than SGLang." in text
    assert text.startswith("> **SIMULATED**")


def test_swapped_winner(tmp_path: Path) -> None:
    specs = seed_matrix(sweep=False)
    specs[1].decode = jitter(115.0)  # SGLang DFlash now beats vLLM DFlash (109.36)
    text = render(tmp_path, specs)
    assert f"Within DFlash, SGLang was {pct(115.0, 109.36)} faster than vLLM." in text
    assert "Within DFlash, vLLM was" not in text
    assert "1. SGLang + DFlash: 115.00 tok/s" in text
    assert "Recommendation: use SGLang + DFlash for maximum single-stream decode" in text


def test_insignificant_gap(tmp_path: Path) -> None:
    specs = seed_matrix(sweep=False)
    specs[2].decode = jitter(87.10, scale=20)  # vLLM MTP overlaps SGLang MTP (86.98)
    text = render(tmp_path, specs)
    assert "Within MTP, the decode difference between vLLM" in text
    assert "is not significant (Welch t-test over 5 and 5 iterations" in text
    assert "Within MTP, vLLM was" not in text
    assert "not significantly faster than the next" in text


def test_invalid_run_is_reported_with_evidence_and_excluded(tmp_path: Path) -> None:
    specs = seed_matrix(sweep=False)
    bad = Spec(
        "sglang-mtp-stock",
        "sglang",
        "MTP",
        jitter(42.3),
        jitter(70.0),
        acceptance=(1000, 2000, 0),
        reasons=[
            ValidityReason(
                code="zero-acceptance",
                message="accepted tokens stayed at 0",
                evidence=["accepted=0 drafts=1000"],
            )
        ],
    )
    log = (
        "INFO ready\nWARNING Parameter model.mtp.fc.weight not found in params_dict, skip loading\n"
    )
    text = render(tmp_path, [*specs, bad], logs={"sglang-mtp-stock": log})
    issues = text.split("## Correctness issues")[1].split("## Concurrency")[0]
    assert "sglang-mtp-stock" in issues and "42.30 tok/s" in issues
    assert "`zero-acceptance`" in issues and "accepted=0 drafts=1000" in issues
    assert "not found in params\\_dict" not in issues  # log lines are fenced, not escaped
    assert "not found in params_dict, skip loading" in issues
    assert "(configuration sglang-mtp) reached the valid 86.98 tok/s" in issues
    ranking = text.split("## Decode ranking")[1].split("## Method")[0]
    assert "42.30" not in ranking
    assert "Within MTP, vLLM was 6.67% faster than SGLang." in text


def test_dropped_configuration(tmp_path: Path) -> None:
    specs = [s for s in seed_matrix(sweep=False) if s.config != "vllm-mtp"]
    text = render(tmp_path, specs)
    assert "compares 3 speculative-decoding configurations" in text
    assert "On vLLM, DFlash was" not in text
    assert "Within MTP" not in text
    assert "On SGLang, DFlash was 12.14% faster than MTP." in text


def test_real_run_has_no_banner_and_recorded_commands(tmp_path: Path) -> None:
    text = render(tmp_path, seed_matrix(simulated=False), lock=experiment_lock())
    assert "SIMULATED" not in text
    assert "recorded in the payloads when the matrix started each server" in text
    assert "vllm-dflash: server command" in text
    assert "vllm-dflash: docker run" in text
    assert "validator: pass; run valid" in text
    assert "vLLM + DFlash continued scaling through concurrency 16" in text


def test_simulated_charts_are_titled(tmp_path: Path) -> None:
    from bench.report import load_artifacts, render_charts, single_request, sweeps

    rs = load_artifacts(write_artifacts(tmp_path / "a", seed_matrix()))
    charts = render_charts(tmp_path, single_request(rs.runs), sweeps(rs), rs.simulated)
    assert set(charts) == {"decode", "ttft", "concurrency", "acceptance"}
    assert all(c.title.startswith("SIMULATED") for c in charts.values())


def test_baseline_speedup(tmp_path: Path) -> None:
    specs = [
        *seed_matrix(sweep=False),
        Spec("vllm-baseline", "vllm", "NONE", jitter(40.0), jitter(60.0), acceptance=None),
    ]
    text = render(tmp_path, specs)
    section = text.split("## Baselines and speedup")[1].split("## ")[0]
    assert f"{109.36 / 40.0:.2f}x" in section
    assert "compares 4 speculative-decoding configurations" in text


@pytest.mark.parametrize(
    "hostile",
    ["evil | cell\n# heading", "```\n</code>[x](javascript:alert(1))", "*bold* _it_ <b>"],
)
def test_untrusted_text_cannot_break_markdown(tmp_path: Path, hostile: str) -> None:
    specs = seed_matrix(sweep=False)
    bad = Spec(
        "sglang-mtp-stock",
        "sglang",
        "MTP",
        jitter(42.3),
        jitter(70.0),
        acceptance_raw={hostile: hostile},
        reasons=[ValidityReason(code=hostile, message=hostile, evidence=[hostile])],
    )
    text = render(tmp_path, [*specs, bad], logs={"sglang-mtp-stock": f"ERROR {hostile}\n"})
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "heading" not in headings
    assert not [t for t in tokens if t.type == "html_block"]
    inline = [c for t in tokens for c in (t.children or [])]
    assert not [c for c in inline if c.type in ("html_inline", "link_open", "em_open")]


def _sweep_of(tmp_path: Path, aggregates: dict[int, list[float]]) -> ConcurrencySweep:
    from bench.report import load_artifacts, sweeps

    specs = [
        Spec(
            "sglang-dflash", "sglang", "DFLASH", [90.0] * 5, [70.0] * 5, concurrency=c, aggregate=a
        )
        for c, a in aggregates.items()
    ]
    rs = load_artifacts(write_artifacts(tmp_path / "a", specs))
    return next(s for s in sweeps(rs) if s.config == "sglang-dflash")


def test_peak_is_the_first_level_within_noise_of_the_best(tmp_path: Path) -> None:
    # c=8 and c=16 have higher means than c=4, but only within the noise: the peak is c=4.
    noisy = {
        1: [100.0, 101.0, 99.0, 100.5, 99.5],
        2: [190.0, 192.0, 188.0, 191.0, 189.0],
        4: [400.0, 420.0, 380.0, 410.0, 390.0],
        8: [405.0, 425.0, 385.0, 415.0, 395.0],
        16: [398.0, 440.0, 378.0, 420.0, 394.0],
    }
    s = _sweep_of(tmp_path, noisy)
    assert s.peak == 4 and s.highest_mean_level == 16


def test_peak_moves_when_the_higher_level_is_clearly_higher(tmp_path: Path) -> None:
    clear = {
        1: [100.0, 101.0, 99.0, 100.5, 99.5],
        4: [400.0, 401.0, 399.0, 400.5, 399.5],
        8: [600.0, 601.0, 599.0, 600.5, 599.5],
        16: [590.0, 591.0, 589.0, 590.5, 589.5],
    }
    s = _sweep_of(tmp_path, clear)
    assert s.peak == 8 and s.highest_mean_level is None
