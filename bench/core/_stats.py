"""Statistics over measured iterations: summary with a 95% CI, and Welch's t-test.

Pure Python (no SciPy): the Student-t quantile and CDF come from the regularized incomplete
beta function, accurate to ~1e-10, which is far below any benchmark noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import ConfigDict

from bench.core._model import StrictModel


class Summary(StrictModel):
    """Descriptive statistics of one figure over n samples (sample stddev, t-based 95% CI)."""

    n: int
    mean: float
    stddev: float
    median: float
    min: float
    max: float
    ci95_low: float
    ci95_high: float
    cv: float


def summarize(values: Sequence[float]) -> Summary:
    """Mean, sample stddev (n-1), median, min, max, and a two-sided 95% t confidence interval."""
    if not values:
        raise ValueError("summarize() needs at least one value")
    n = len(values)
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    ordered = sorted(values)
    mid = n // 2
    median = ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n) if n > 1 else 0.0
    return Summary(
        n=n,
        mean=mean,
        stddev=sd,
        median=median,
        min=ordered[0],
        max=ordered[-1],
        ci95_low=mean - half,
        ci95_high=mean + half,
        cv=sd / mean if mean else 0.0,
    )


class WelchResult(StrictModel):
    """t is infinite and df NaN where both samples have no variance and differ (welch())."""

    model_config = ConfigDict(allow_inf_nan=True)

    t: float
    df: float
    p_value: float


def welch(a: Sequence[float], b: Sequence[float]) -> WelchResult:
    """Two-sided Welch t-test of mean(a) != mean(b). Identical zero-variance samples give p=1;
    different zero-variance samples give p=0 (the difference is exact)."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("welch() needs at least two values per sample")
    sa, sb = summarize(a), summarize(b)
    va, vb = sa.stddev**2 / sa.n, sb.stddev**2 / sb.n
    diff = sa.mean - sb.mean
    if va + vb == 0.0:
        exact = 0.0 if diff else 1.0
        return WelchResult(t=math.inf if diff else 0.0, df=float("nan"), p_value=exact)
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (sa.n - 1) + vb**2 / (sb.n - 1))
    p = 2.0 * (1.0 - t_cdf(abs(t), df))
    return WelchResult(t=t, df=df, p_value=min(1.0, max(0.0, p)))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile, q in [0, 100]."""
    if not values:
        raise ValueError("percentile() needs at least one value")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t distribution."""
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Inverse CDF of Student's t (bisection on t_cdf; monotone, so robust)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by Lentz's continued fraction."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
    ln_front += b * math.log1p(-x)
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(ln_front) / a
    tiny = 1e-300
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = (m * (b - m) * x) / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
        else:
            num = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
        d = 1.0 + num * d
        d = tiny if abs(d) < tiny else d
        d = 1.0 / d
        c = 1.0 + num / c
        c = tiny if abs(c) < tiny else c
        f *= c * d
        if abs(1.0 - c * d) < 1e-15:
            break
    return front * (f - 1.0)
