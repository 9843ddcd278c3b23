"""The Student t and normal functions the statistics use, computed as `scipy.stats` computes them (its `t` and
`norm` call these `scipy.special` functions; the results are bitwise the same), without importing
`scipy.stats`, which takes about a second: a third of `experiment_results` at 10M judge_scores rows, and
as much of `agreement` (Cohen's kappa's interval and p-value)."""

from __future__ import annotations

import numpy as np

from eval_platform.lazy_modules import lazy

special = lazy("scipy.special")

_NORM_PDF_C = np.sqrt(2 * np.pi)


def t_sf(x, df):
    """`scipy.stats.t.sf(x, df)`: P(T > x)."""
    return special.stdtr(df, -np.asarray(x, dtype=float))


def t_ppf(q, df):
    """`scipy.stats.t.ppf(q, df)`."""
    return special.stdtrit(df, q)


def norm_cdf(x):
    """`scipy.stats.norm.cdf(x)`."""
    return special.ndtr(x)


def norm_sf(x):
    """`scipy.stats.norm.sf(x)`: P(Z > x)."""
    return special.ndtr(-np.asarray(x, dtype=float))


def norm_ppf(q):
    """`scipy.stats.norm.ppf(q)`."""
    return special.ndtri(q)


def norm_pdf(x):
    """`scipy.stats.norm.pdf(x)`."""
    x = np.asarray(x, dtype=float)
    return np.exp(-(x**2) / 2.0) / _NORM_PDF_C
