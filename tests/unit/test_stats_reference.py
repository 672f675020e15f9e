"""bench.core (stats) against values we did not compute with it: Student's t in closed form for
small integer degrees of freedom, textbook quantiles, and Welch's test worked out by hand.

Closed forms of the t CDF F_v(t) (any statistics text, e.g. Abramowitz & Stegun 26.7.3):
  v=1: 1/2 + atan(t)/pi
  v=2: 1/2 + t / (2 sqrt(2 + t^2))
  v=3: 1/2 + (t / (sqrt(3) (1 + t^2/3)) + atan(t / sqrt(3))) / pi
  v=4: 1/2 + (3/8) t s (1 - t^2 s^2 / 12), with s = 1 / sqrt(1 + t^2 / 4)
These tests pin each branch of ``t_cdf``, ``t_quantile``, ``welch``, ``percentile`` and
``summarize`` (found by mutation testing, docs/MUTATION.md).
"""

from __future__ import annotations

import math

import pytest

from bench.core import percentile, summarize, t_cdf, welch
from bench.core._stats import t_quantile


def _f4(t: float) -> float:
    """F_4(t) = 1/2 + (3/8) s (1 - s^2 t^2 / 12) t, with s = 1 / sqrt(1 + t^2 / 4)."""
    s = 1.0 / math.sqrt(1.0 + t * t / 4.0)
    return 0.5 + 0.375 * t * s * (1.0 - t * t * s * s / 12.0)


@pytest.mark.parametrize("t", [0.001, 0.5, 1.5, 3.0])
def test_t_cdf_matches_the_closed_forms(t: float) -> None:
    f1 = 0.5 + math.atan(t) / math.pi
    f2 = 0.5 + t / (2.0 * math.sqrt(2.0 + t * t))
    r3 = math.sqrt(3.0)
    f3 = 0.5 + (t / (r3 * (1.0 + t * t / 3.0)) + math.atan(t / r3)) / math.pi
    for df, want in ((1.0, f1), (2.0, f2), (3.0, f3), (4.0, _f4(t))):
        assert t_cdf(t, df) == pytest.approx(want, abs=1e-12)
        # symmetry: the lower tail is the other side of the upper one
        assert t_cdf(-t, df) == pytest.approx(1.0 - want, abs=1e-12)


def test_t_cdf_exact_points() -> None:
    # v=2, t=1/2: 1/2 + (1/2) / (2 * sqrt(9/4)) = 1/2 + 1/6 = 2/3
    assert t_cdf(0.5, 2.0) == pytest.approx(2.0 / 3.0, abs=1e-12)
    # v=4, t=3/2: s^2 = 1/(1 + 9/16) = 16/25; 1/2 + (3/8)(3/2)(4/5)(1 - (9/4)(16/25)/12) = 0.896
    assert t_cdf(1.5, 4.0) == pytest.approx(0.896, abs=1e-12)
    assert t_cdf(0.0, 3.0) == 0.5
    assert t_cdf(math.inf, 3.0) == 1.0
    assert t_cdf(-math.inf, 3.0) == 0.0


def test_t_quantile_textbook_values() -> None:
    # t(0.975, 1) = tan(0.475 pi); t(0.975, 2) = 0.95 sqrt(2 / (4 * 0.975 * 0.025)) (closed forms)
    assert t_quantile(0.975, 1.0) == pytest.approx(12.7062047362, rel=1e-9)
    assert t_quantile(0.975, 2.0) == pytest.approx(4.3026527297, rel=1e-9)
    assert t_quantile(0.025, 2.0) == pytest.approx(-4.3026527297, rel=1e-9)
    assert t_quantile(0.5, 7.0) == pytest.approx(0.0, abs=1e-6)
    for p in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"^p must be in \(0, 1\)$"):
            t_quantile(p, 3.0)


def test_welch_equal_variances_by_hand() -> None:
    # a = 1,2,3 and b = 4,5,6: variances 1 and 1, n = 3 each, so va = vb = 1/3,
    # t = (2 - 5) / sqrt(2/3) = -3.6742346, df = (2/3)^2 / ((1/9)/2 + (1/9)/2) = 4,
    # p = 2 (1 - F_4(3.6742346)) with F_4 in closed form.
    r = welch([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    t = -3.0 / math.sqrt(2.0 / 3.0)
    assert r.t == pytest.approx(t, rel=1e-12)
    assert r.df == pytest.approx(4.0, rel=1e-12)
    assert r.p_value == pytest.approx(2.0 * (1.0 - _f4(-t)), rel=1e-9)
    assert r.p_value == pytest.approx(0.0213116411, rel=1e-8)
    # the test is two-sided: swapping the samples flips t, not p
    s = welch([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    assert s.t == pytest.approx(-t, rel=1e-12) and s.p_value == pytest.approx(r.p_value)


def test_welch_unequal_variances_and_sizes_by_hand() -> None:
    # a = 1,2,3 (n=3, var 1) and b = 2,4,6,8,10 (n=5, var 10): va = 1/3, vb = 2,
    # t = (2 - 6) / sqrt(7/3) = -2.6186147,
    # df = (7/3)^2 / ((1/3)^2 / 2 + 2^2 / 4) = (49/9) / (19/18) = 98/19 = 5.1578947.
    # p = 0.0457758284: 2 (1 - F) with F integrated from the t density (Simpson, 2e5 steps),
    # not through the incomplete beta function the code uses.
    r = welch([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0, 10.0])
    assert r.t == pytest.approx(-4.0 / math.sqrt(7.0 / 3.0), rel=1e-12)
    assert r.df == pytest.approx(98.0 / 19.0, rel=1e-12)
    assert r.p_value == pytest.approx(0.0457758284, rel=1e-8)


def test_welch_zero_variance_and_too_few_values() -> None:
    same = welch([5.0, 5.0], [5.0, 5.0, 5.0])
    assert (same.t, same.p_value) == (0.0, 1.0) and math.isnan(same.df)
    apart = welch([5.0, 5.0], [6.0, 6.0])
    assert (apart.t, apart.p_value) == (math.inf, 0.0) and math.isnan(apart.df)
    # one sample with spread is enough for a finite t
    assert welch([5.0, 5.0], [6.0, 8.0]).df == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"^welch\(\) needs at least two values per sample$"):
        welch([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^welch\(\) needs at least two values per sample$"):
        welch([1.0, 2.0], [1.0])
    welch([1.0, 2.0], [3.0, 5.0])  # two values each is enough


def test_percentile_interpolates_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    # pos = 3 * 25 / 100 = 0.75 -> 1 + 0.75 * (2 - 1)
    assert percentile(values, 25) == 1.75
    # pos = 2 * 90 / 100 = 1.8 -> 20 + 0.8 * (30 - 20)
    assert percentile([30.0, 10.0, 20.0], 90) == pytest.approx(28.0)
    assert percentile([7.0], 50) == 7.0
    with pytest.raises(ValueError, match=r"^percentile\(\) needs at least one value$"):
        percentile([], 50)
    with pytest.raises(ValueError, match=r"^summarize\(\) needs at least one value$"):
        summarize([])


def test_summary_of_two_values_and_an_even_median() -> None:
    # 1, 3: mean 2, sample sd sqrt(2), t(0.975, 1) = 12.7062047 -> half width 12.7062047
    s = summarize([3.0, 1.0])
    assert (s.n, s.mean, s.median, s.min, s.max) == (2, 2.0, 2.0, 1.0, 3.0)
    assert s.stddev == pytest.approx(math.sqrt(2.0), rel=1e-12)
    assert s.ci95_low == pytest.approx(2.0 - 12.7062047362, rel=1e-9)
    assert s.ci95_high == pytest.approx(2.0 + 12.7062047362, rel=1e-9)
    assert s.cv == pytest.approx(math.sqrt(2.0) / 2.0, rel=1e-12)
    # 4 values: median is the mean of the two middle ones (2 and 10), not either one
    assert summarize([1.0, 2.0, 10.0, 40.0]).median == 6.0
    # a zero mean has no coefficient of variation
    assert summarize([-1.0, 1.0]).cv == 0.0
    one = summarize([7.0])
    assert (one.ci95_low, one.ci95_high, one.cv) == (7.0, 7.0, 0.0)
