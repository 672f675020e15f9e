"""The comparison rules and text helpers on their own."""

from __future__ import annotations

import pytest

from bench.core import welch
from bench.report import (
    Figure,
    PublishedDelta,
    RunView,
    compare,
    md_code,
    md_fence,
    md_inline,
    pct,
    welch_samples,
)


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (109.36, 92.78, "17.87"),
        (97.54, 86.98, "12.14"),
        (109.36, 97.54, "12.12"),
        (92.78, 86.98, "6.67"),
    ],
)
def test_seed_percentages(a: float, b: float, want: str) -> None:
    assert f"{pct(a, b):.2f}" == want


def test_welch_matches_a_reference_computed_by_hand() -> None:
    """Unequal n (4, 5) and unequal variances (1/60, 1/40), worked out with exact fractions:
    means 21/20 and 7/5, s^2/n = 1/240 and 1/200, t = -0.35 / sqrt(11/1200) = -3.65563,
    Welch-Satterthwaite df = 363/52 = 6.98077; two-sided p = 1 - 2 * integral of Student's t
    density over [0, |t|] (Simpson, 200 000 steps, math.lgamma for the constant), an
    independent route from bench.core's incomplete beta."""
    a, b = [1.0, 1.2, 0.9, 1.1], [1.3, 1.5, 1.2, 1.6, 1.4]
    r = welch(a, b)
    assert r.t == pytest.approx(-3.6556307750697, rel=1e-12)
    assert r.df == pytest.approx(363 / 52, rel=1e-12)
    assert r.p_value == pytest.approx(0.0081561708, rel=1e-8)
    assert welch_samples(a, b) == pytest.approx(0.0081561708, rel=1e-8)


def run(key: str, decode: Figure, ttft: Figure | None = None) -> RunView:
    return RunView(
        key=key, config=key, engine="e", method="M", decode=decode, ttft=ttft or Figure()
    )


def test_assumed_spread_decides_and_says_so() -> None:
    a = run("a", Figure(mean=92.78, stddev=0.15, n=5, spread_assumed=True))
    b = run("b", Figure(mean=92.70, stddev=0.15, n=5, spread_assumed=True))
    c = compare(a, b, "decode")
    assert c.significance == "not_significant" and "assumed spread" in c.basis
    far = compare(a, run("c", Figure(mean=86.98, stddev=0.15, n=5)), "decode")
    assert far.significance == "significant" and far.better == "a"


def test_published_delta_and_bounds_order_unknown_values() -> None:
    x = run("x", Figure(), Figure(lower_bound=73.54))
    y = run("y", Figure(), Figure())
    c = compare(y, x, "ttft", [PublishedDelta(metric="ttft", a="y", b="x", delta=-4.24)])
    assert c.better == "a" and c.abs_delta == pytest.approx(4.24) and c.significance == "unknown"
    z = run("z", Figure(), Figure(mean=67.40))
    assert compare(z, x, "ttft").better == "a"
    assert compare(z, y, "ttft").better is None


def test_escaping() -> None:
    assert md_inline("a|b*c\n# d") == "a\\|b\\*c \\# d"
    assert md_code("x ` y") == "``x ` y``"
    fenced = md_fence(["```", "ok"])
    assert fenced.startswith("````text\n") and fenced.endswith("\n````")
