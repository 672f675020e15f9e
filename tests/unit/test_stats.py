"""bench.core (stats): the figures every payload carries (checked against textbook values)."""

from __future__ import annotations

import pytest

from bench.core import percentile, summarize


def test_summary_of_one_to_five() -> None:
    s = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (s.n, s.mean, s.median, s.min, s.max) == (5, 3.0, 3.0, 1.0, 5.0)
    assert s.stddev == pytest.approx(1.5811388, rel=1e-6)
    # t(0.975, 4) = 2.7764451 -> half width 2.7764451 * 1.5811388 / sqrt(5)
    assert s.ci95_high - s.mean == pytest.approx(1.9632432, rel=1e-6)


def test_single_value_and_percentile() -> None:
    s = summarize([7.0])
    assert s.stddev == 0.0 and s.ci95_low == s.ci95_high == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    with pytest.raises(ValueError):
        summarize([])
