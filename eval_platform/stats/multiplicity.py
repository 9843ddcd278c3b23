"""Adjusting a family of p-values for multiple comparisons: Holm's step-down (family-wise error rate) and
Benjamini–Hochberg's step-up (false discovery rate, for independent or positively dependent tests).

Both return adjusted p-values, so "significant after correction" is `adjusted < alpha` at any alpha, and equal
`statsmodels.stats.multitest.multipletests(p, method="holm" | "fdr_bh")[1]`. NaN p-values (a test that could
not be run) are not part of the family and stay NaN.

- Holm (1979), "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6:65–70:
  sorted p₍₁₎ ≤ … ≤ p₍ₘ₎, adjusted p₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1) p₍ⱼ₎).
- Benjamini & Hochberg (1995), "Controlling the false discovery rate", JRSS B 57:289–300:
  adjusted p₍ᵢ₎ = min_{j ≥ i} min(1, m p₍ⱼ₎ / j).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Correction = Literal["holm", "benjamini_hochberg", "none"]
CORRECTIONS: tuple[str, ...] = ("holm", "benjamini_hochberg", "none")


def adjust_p_values(p_values, method: Correction) -> np.ndarray:
    """Adjusted p-values of one family, in the input's order (NaN: not tested, left out of the family)."""
    p = np.asarray(p_values, dtype=float)
    if method not in CORRECTIONS:
        raise ValueError(f"method must be one of {CORRECTIONS}, got {method!r}")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    adjusted = p.copy()
    tested = np.flatnonzero(~np.isnan(p))
    m = tested.size
    if m == 0 or method == "none":
        return adjusted
    order = tested[np.argsort(p[tested], kind="stable")]
    ranked = p[order]
    if method == "holm":
        steps = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked))
    else:
        steps = np.minimum.accumulate(np.minimum(1.0, m * ranked / np.arange(1, m + 1))[::-1])[::-1]
    adjusted[order] = steps
    return adjusted
