"""The Wilson score interval of a proportion: the one used by win rates, pass rates and benchmark metrics.

`wilson_interval(successes, n, confidence)` is the interval statsmodels' `proportion_confint(method="wilson")`
computes, vectorized, with the edges made exact:

- at 0 successes the lower bound is 0, and at n of n the upper bound is 1: the formula's exact values, which
  floating point leaves a hair inside (statsmodels gives 2.8e-17 for 0 of 7 and 0.9999999999999999 for 7 of 7,
  an interval that would exclude the rate observed);
- the bounds are clipped to 0..1 (rounding only: the exact interval always lies within);
- n = 0 has no rate: both bounds are NaN (never an interval of certainty or of ignorance);
- successes may be fractional (a tie is half a win; a mean score over n cases is a rate of mean * n).
"""

from __future__ import annotations

import numpy as np

from eval_platform.stats.distributions import norm_ppf


def wilson_interval(successes, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the Wilson score interval at `confidence` for `successes` of `n` (arrays or numbers; float64
    arrays back, 0-d for numbers); see the module doc for the edges."""
    successes, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    z = norm_ppf(0.5 + confidence / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = successes / n
        centre = (rate + z**2 / (2 * n)) / (1 + z**2 / n)
        half_width = z / (1 + z**2 / n) * np.sqrt(rate * (1 - rate) / n + z**2 / (4 * n**2))
        low = np.where(successes == 0, 0.0, np.clip(centre - half_width, 0.0, 1.0))
        high = np.where(successes == n, 1.0, np.clip(centre + half_width, 0.0, 1.0))
    empty = n == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)
