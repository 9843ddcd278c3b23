"""Planning a two-group comparison: power, the minimum detectable effect at a given sample, and the sample
needed for a given effect, for the two-sided tests the experiments run (Cohen 1988, "Statistical Power
Analysis for the Behavioral Sciences", ch. 2 and 6).

- Means (`t_test_power`): Welch's test is planned as the two-sample t-test on the standardized effect
  d = δ / σ: power = P(|T'| > t_{1−α/2, ν}) with T' noncentral t, ν = n₁ + n₂ − 2 and noncentrality
  d·√(n₁n₂/(n₁ + n₂)). Equals statsmodels' `TTestIndPower().power(d, n₁, α, ratio=n₂/n₁)`.
- Proportions (`normal_power`): the normal approximation on Cohen's h = 2 asin√p₂ − 2 asin√p₁:
  power = Φ(h·√(n₁n₂/(n₁ + n₂)) − z_{1−α/2}) + Φ(−h·√(…) − z_{1−α/2}). Equals statsmodels'
  `NormalIndPower().power(h, n₁, α, ratio=n₂/n₁)`.

The solvers invert these by bracketing root finding (Brent), as statsmodels' `solve_power` does.
"""

from __future__ import annotations

import numpy as np

from eval_platform.lazy_modules import lazy
from eval_platform.stats.distributions import norm_cdf, norm_ppf, t_ppf

special = lazy("scipy.special")
optimize = lazy("scipy.optimize")

_MAX_N = 1e12  # beyond any experiment: "not reachable"


def _effective_n(n1: float, ratio: float) -> float:
    return n1 * ratio / (1 + ratio)  # n₁n₂/(n₁ + n₂) with n₂ = ratio·n₁


def t_test_power(effect_size: float, n1: float, alpha: float, ratio: float = 1.0) -> float:
    """Power of the two-sided two-sample t-test for a standardized effect d, n₁ and n₂ = ratio·n₁ per group."""
    df = n1 * (1 + ratio) - 2
    critical = t_ppf(1 - alpha / 2, df)
    noncentrality = effect_size * np.sqrt(_effective_n(n1, ratio))
    upper = 1 - special.nctdtr(df, noncentrality, critical)
    lower = special.nctdtr(df, noncentrality, -critical)
    # scipy's noncentral t returns NaN far in a tail (1.17: nctdtr(103, 10, -2.63)); there the tail is below
    # 1e-20 and its normal approximation is as good as exact for the sum.
    if np.isnan(upper):
        upper = norm_cdf(noncentrality - critical)
    if np.isnan(lower):
        lower = norm_cdf(-critical - noncentrality)
    return float(upper + lower)


def normal_power(effect_size: float, n1: float, alpha: float, ratio: float = 1.0) -> float:
    """Power of the two-sided z-test for a standardized effect (Cohen's h for proportions)."""
    critical = norm_ppf(1 - alpha / 2)
    shift = effect_size * np.sqrt(_effective_n(n1, ratio))
    return float(norm_cdf(shift - critical) + norm_cdf(-shift - critical))


def _power(test: str):
    if test not in ("t", "normal"):
        raise ValueError(f"test must be 't' or 'normal', got {test!r}")
    return t_test_power if test == "t" else normal_power


def minimum_detectable_effect(n1: float, alpha: float, power: float, ratio: float = 1.0, test: str = "t") -> float:
    """The smallest standardized effect the test detects with probability `power` (n₁ and n₂ = ratio·n₁)."""
    curve = _power(test)
    if (test == "t" and n1 * (1 + ratio) <= 2) or n1 <= 0:
        return float("nan")
    # Bracketed from the normal approximation, so the noncentral t is never evaluated far in its tail.
    high = 2 * (norm_ppf(1 - alpha / 2) + norm_ppf(power)) / np.sqrt(_effective_n(n1, ratio))
    while curve(high, n1, alpha, ratio) < power:
        high *= 2
        if high > 1e6:
            return float("nan")
    return float(optimize.brentq(lambda d: curve(d, n1, alpha, ratio) - power, 0.0, high, xtol=1e-12))


def required_sample_size(effect_size: float, alpha: float, power: float, ratio: float = 1.0, test: str = "t") -> float:
    """n₁ (n₂ = ratio·n₁) at which the test detects the standardized effect with probability `power`; not rounded
    (round up for a count). NaN for a zero effect."""
    curve = _power(test)
    effect = abs(effect_size)
    if effect == 0:
        return float("nan")
    low = 3.0 / (1 + ratio) if test == "t" else 1e-9  # the t-test from one degree of freedom
    if curve(effect, low, alpha, ratio) >= power:
        return low
    normal_n = ((norm_ppf(1 - alpha / 2) + norm_ppf(power)) / effect) ** 2 * (1 + ratio) / ratio
    high = max(4.0, 2 * low, 2 * normal_n)
    while curve(effect, high, alpha, ratio) < power:
        high *= 2
        if high > _MAX_N:
            return float("nan")
    return float(optimize.brentq(lambda n: curve(effect, n, alpha, ratio) - power, low, high, xtol=1e-10))


def cohens_h(p1: float, p2: float) -> float:
    """Cohen's h = 2 asin√p₂ − 2 asin√p₁, the arcsine-transformed difference of two proportions."""
    return float(2 * np.arcsin(np.sqrt(p2)) - 2 * np.arcsin(np.sqrt(p1)))


def proportion_for_h(p1: float, h: float) -> float:
    """The proportion p₂ at Cohen's h from p₁ (clamped to [0, 1] at the ends of the arcsine scale)."""
    angle = np.clip(np.arcsin(np.sqrt(p1)) + h / 2, 0.0, np.pi / 2)
    return float(np.sin(angle) ** 2)
