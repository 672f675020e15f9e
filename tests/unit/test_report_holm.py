"""Holm-Bonferroni over the report's family of significance claims, on hand-computed families."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_factory import seed_matrix, write_artifacts

from bench.report import Figure, RunView, compare, load_artifacts, render_report
from bench.report._claims import (
    Family,
    claim_family,
    claim_key,
    holm,
    single_request,
    speculative,
    welch_summary,
)


def test_holm_hand_computed() -> None:
    # sorted: d .005 x4 = .020; a .010 x3 = .030; c .030 x2 = .060; b .040 x1 = .040 -> .060
    got = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    assert got == pytest.approx({"d": 0.02, "a": 0.03, "c": 0.06, "b": 0.06})
    # Unadjusted, all four are "significant" at 0.05; adjusted, only d and a are.
    assert sorted(k for k, q in got.items() if q < 0.05) == ["a", "d"]


def test_holm_ties_cap_and_single() -> None:
    # .01 x3 = .03, .01 x2 = .02 -> .03 (monotone), .5 x1 = .5; a huge p caps at 1
    assert holm({"x": 0.01, "y": 0.01, "z": 0.5}) == pytest.approx({"x": 0.03, "y": 0.03, "z": 0.5})
    assert holm({"x": 0.6, "y": 0.7}) == pytest.approx({"x": 1.0, "y": 1.0})
    assert holm({"only": 0.04}) == {"only": 0.04}
    assert holm({}) == {}


def view(key: str, mean: float, method: str = "M") -> RunView:
    return RunView(
        key=key,
        config=key,
        engine="e",
        method=method,
        decode=Figure(mean=mean, stddev=1.0, n=5),
        ttft=Figure(),
    )


def test_a_chance_finding_does_not_survive_the_family() -> None:
    a, b, c, d = view("a", 100.0), view("b", 101.6), view("c", 103.2), view("d", 104.8)
    p = welch_summary(100.0, 1.0, 5, 101.6, 1.0, 5)
    assert 0.025 < p < 0.05  # significant alone
    alone = compare(b, a, "decode")
    assert alone.significance == "significant" and alone.p_adjusted is None
    # Three neighbours with the same gap: each raw p is p, so Holm gives 3p, 3p, 3p.
    fam = Family.of({claim_key("decode", x, y): p for x, y in ((a, b), (b, c), (c, d))})
    held = compare(b, a, "decode", family=fam)
    assert held.significance == "not_significant"
    assert held.p_adjusted == pytest.approx(3 * p)
    assert f"Holm-adjusted p={3 * p:.3g} (3 claims)" in held.basis
    assert fam.significant() == []


def test_seed_matrix_family_is_the_claims_the_report_makes(tmp_path: Path) -> None:
    rs = load_artifacts(write_artifacts(tmp_path / "art", seed_matrix(sweep=False)))
    single = speculative(single_request(rs.runs))
    fam = claim_family(rs, single, [])
    vd, sd, vm, sm = "vllm-dflash-c1", "sglang-dflash-c1", "vllm-mtp-c1", "sglang-mtp-c1"

    def k(fig: str, x: str, y: str) -> tuple[str, str, str]:
        lo, hi = sorted((x, y))
        return (fig, lo, hi)

    decode = {
        k("decode", vd, sd),  # ranking 1-2, and within DFlash
        k("decode", sd, vm),  # ranking 2-3
        k("decode", vm, sm),  # ranking 3-4, and within MTP
        k("decode", vd, vm),  # within vLLM
        k("decode", sd, sm),  # within SGLang
    }
    ttft = {
        k("ttft", x, y) for x, y in ((vd, sd), (vd, vm), (vd, sm), (sd, vm), (sd, sm), (vm, sm))
    }
    assert set(fam.raw) == decode | ttft and fam.size == 11
    smallest = min(fam.raw, key=lambda key: fam.raw[key])
    assert fam.adjusted[smallest] == pytest.approx(min(1.0, 11 * fam.raw[smallest]))
    assert all(fam.adjusted[x] >= fam.raw[x] for x in fam.raw)


def test_report_states_the_correction_once_and_each_claim_its_adjusted_p(tmp_path: Path) -> None:
    art = write_artifacts(tmp_path / "art", seed_matrix(sweep=True))
    text = render_report(art, tmp_path / "out").read_text(encoding="utf-8")
    assert text.count("Holm-Bonferroni adjusted p") == 1
    # a p below what float arithmetic resolves reads "p < 1e-15", never "p=0" (issue 36)
    assert "On vLLM, DFlash was 17.87% faster than MTP. (Holm-adjusted p < 1e-15)" in text
    assert "p=0)" not in text and "p=0 " not in text
    assert "Within MTP, vLLM was 6.67% faster than SGLang. (Holm-adjusted p=" in text
    assert "1. vLLM + DFlash: 109.36 tok/s (faster than the next, Holm-adjusted p=" in text
    assert "every lower level was significantly below the highest mean: Holm-adjusted p" in text
