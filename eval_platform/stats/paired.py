"""The paired comparison of two judge configurations on the same anchor items: mean shift with its paired t
interval, and how often the verdicts agree.

    d_i = current_i − previous_i,   shift = mean(d),   se = sd(d) / √n (ddof 1),
    t = shift / se (n − 1 df),      interval: shift ± t(1 − α/2, n − 1) · se

Equals `scipy.stats.ttest_rel(current, previous)` (Student 1908; any statistics text). Pairing removes the
items' own spread, so a shift of a few points is visible on a few dozen anchors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval_platform.stats.distributions import t_ppf, t_sf


@dataclass(frozen=True)
class PairedShift:
    n: int
    alpha: float
    shift: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    t: float | None = None
    p_value: float | None = None
    agreement: float | None = None  # share of items whose two verdicts are equal
    note: str | None = None

    @property
    def significant(self) -> bool | None:
        return None if self.p_value is None else self.p_value < self.alpha


def paired_shift(current, previous, alpha: float = 0.05) -> PairedShift:
    """The shift current − previous over paired items (NaN pairs dropped). Fewer than two pairs: no statistics;
    every difference equal: the shift with a zero-width interval and p = 0 (or 1 when it is 0), since the
    verdicts moved by exactly that on every item (the note says so, or that nothing moved)."""
    a, b = np.asarray(current, dtype=float), np.asarray(previous, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"current and previous must be paired: {a.size} and {b.size} verdicts")
    keep = ~(np.isnan(a) | np.isnan(b))
    d = a[keep] - b[keep]
    n = d.size
    if n < 2:
        return PairedShift(n, alpha, note=f"needs at least 2 anchors judged under both configurations, got {n}")
    shift = float(d.mean())
    agreement = float(np.isclose(a[keep], b[keep], rtol=0, atol=1e-12).mean())
    se = float(d.std(ddof=1) / np.sqrt(n))
    if se == 0:
        p = 1.0 if shift == 0 else 0.0
        note = "no anchor moved" if shift == 0 else f"every anchor moved by the same amount ({shift:+.4g})"
        return PairedShift(n, alpha, shift, shift, shift, None, p, agreement, note)
    t = shift / se
    half = float(t_ppf(1 - alpha / 2, n - 1)) * se
    p = float(2 * t_sf(abs(t), n - 1))
    return PairedShift(n, alpha, shift, shift - half, shift + half, float(t), p, agreement)
