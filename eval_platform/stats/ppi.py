"""Prediction-powered inference (PPI) of a mean: many judge verdicts, a few human labels, a valid interval.

Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, "Prediction-powered inference", Science 382 (2023), with the
power tuning of Angelopoulos, Duchi and Zrnic, "PPI++: Efficient prediction-powered inference" (2023), as
`ppi_py.ppi_mean_pointestimate` / `ppi_mean_ci` compute it by default (checked to 1e-9 in the tests).

Data: `human` Y and `judge` Ŷ on the n labelled items, `judge_unlabelled` Ŷᵘ on N other items of the same
population. With λ ∈ [0, 1]:

    θ̂ = λ · mean(Ŷᵘ) + mean(Y − λ·Ŷ)
    se² = var₀(λ·Ŷᵘ) / N + var₀(Y − λ·Ŷ) / n          (var₀: population variance, ddof 0)
    interval: θ̂ ± z(1 − α/2) · se

λ = 1 is the original PPI (the judge mean plus the mean human correction, the "rectifier"); λ = 0 is the human-only
mean. The tuned λ = Cov(Y, Ŷ) / ((1 + n/N) · Var(Ŷ ∪ Ŷᵘ)), clipped to [0, 1], minimizes the variance, so the
interval is never much wider than the human-only one and is far narrower when the judge tracks the humans. The
judge's bias does not enter θ̂'s expectation: a judge 8 points too generous is corrected by the rectifier.

The interval is valid when the labelled items are a uniform random sample of the population the mean is about
(humans annotating only hard cases breaks it) and the unlabelled items are the rest of it.

Of the unlabelled items the formulas use only N, mean(Ŷᵘ) and var₀(Ŷᵘ) (Var(Ŷ ∪ Ŷᵘ) too is a function of them and
of the labelled Ŷ): `ppi_mean_of_moments` takes them as `Moments` (count, mean, sum of squared deviations), which
combine exactly across parts (per-day aggregates a database computes: Chan, Golub and LeVeque's parallel formula),
so a window of 100M judge verdicts never has to be held; `ppi_mean` is the same function on the values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval_platform.stats.distributions import norm_ppf

MIN_LABELLED = 2


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered mean (`mean`, its standard error `se` and interval) and the judge-only and human-only
    figures it is built from, for display beside it."""

    n_labelled: int
    n_unlabelled: int
    alpha: float
    mean: float | None = None
    se: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    lam: float | None = None
    rectifier: float | None = None  # mean(Y − Ŷ) on the labelled items: the judge's bias, with sign flipped
    note: str | None = None


def _finite(values) -> np.ndarray:
    return np.asarray(values, dtype=float).ravel()


@dataclass(frozen=True)
class Moments:
    """The count `n`, `mean` and `m2` (the sum of squared deviations from the mean) of a set of values: all that
    the unlabelled set enters a PPI mean by. `a + b` is the moments of the union, exact (Chan, Golub and LeVeque,
    "Algorithms for computing the sample variance", 1983), where a sum of squares would lose the variance to
    cancellation."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, values) -> Moments:
        values = _finite(values)
        if values.size == 0:
            return cls()
        mean = values.mean()
        return cls(values.size, float(mean), float(((values - mean) ** 2).sum()))

    def __add__(self, other: Moments) -> Moments:
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        delta = other.mean - self.mean
        return Moments(n, self.mean + delta * other.n / n, self.m2 + other.m2 + delta * delta * self.n * other.n / n)

    def variance(self, ddof: int = 0) -> float:
        return self.m2 / (self.n - ddof) if self.n > ddof else float("nan")


def tuned_lambda(human: np.ndarray, judge: np.ndarray, unlabelled: Moments) -> float:
    """PPI++'s variance-minimizing λ for a mean, clipped to [0, 1]; 0 (human only) when the judge has no variance."""
    n, big_n = human.size, unlabelled.n
    variance = (Moments.of(judge) + unlabelled).variance(ddof=1)  # Var(Ŷ ∪ Ŷᵘ)
    if not variance > 0:
        return 0.0
    covariance = ((human - human.mean()) * (judge - judge.mean())).sum() / n
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(human, judge, judge_unlabelled, alpha: float = 0.05, lam: float | None = None) -> PPIEstimate:
    """The prediction-powered mean of `human`'s population (see the module docstring).

    `human[i]` and `judge[i]` are the same item's human label and judge verdict; `judge_unlabelled` the judge's
    verdicts on the items no human labelled. `lam`: None tunes λ (PPI++), 1 is the original PPI. Fewer than two
    labelled items give no estimate (a note says why); no unlabelled item gives the human-only mean (λ = 0).
    """
    return ppi_mean_of_moments(human, judge, Moments.of(judge_unlabelled), alpha, lam)


def ppi_mean_of_moments(
    human, judge, unlabelled: Moments, alpha: float = 0.05, lam: float | None = None
) -> PPIEstimate:
    """`ppi_mean` with the judge's verdicts on the unlabelled items given by their `Moments` only."""
    y, y_hat = _finite(human), _finite(judge)
    if y.size != y_hat.size:
        raise ValueError(f"human and judge must be paired: {y.size} human labels, {y_hat.size} judge verdicts")
    n, big_n = y.size, unlabelled.n
    if n < MIN_LABELLED:
        needs = f"needs at least {MIN_LABELLED} items with both a human label and a judge verdict, got {n}"
        return PPIEstimate(n, big_n, alpha, note=needs)
    note: str | None = None
    if big_n == 0:
        lam, note = 0.0, "every judged item has a human label: the human-only mean"
    elif lam is None:
        lam = tuned_lambda(y, y_hat, unlabelled)
    corrected = y - lam * y_hat
    imputed = lam * unlabelled.mean if big_n else 0.0
    mean = float(imputed + corrected.mean())
    imputed_var = lam * lam * unlabelled.variance() / big_n if big_n else 0.0  # var₀(λ·Ŷᵘ) / N
    se = float(np.sqrt(imputed_var + corrected.var() / n))
    half = float(norm_ppf(1 - alpha / 2)) * se
    rectifier = float((y - y_hat).mean())
    return PPIEstimate(n, big_n, alpha, mean, se, mean - half, mean + half, float(lam), rectifier, note)


@dataclass(frozen=True)
class PPIDifference:
    """treatment − control of two independent prediction-powered means, with its normal interval."""

    difference: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    note: str | None = None


def ppi_difference(treatment: PPIEstimate, control: PPIEstimate, alpha: float = 0.05) -> PPIDifference:
    """θ̂_t − θ̂_c, se = √(se_t² + se_c²) (independent groups, each with its own λ), z(1 − α/2) interval."""
    if treatment.mean is None or control.mean is None:
        note = treatment.note if treatment.mean is None else control.note
        return PPIDifference(None, None, None, None, note)
    difference = treatment.mean - control.mean
    assert treatment.se is not None and control.se is not None  # a mean comes with its standard error
    se = float(np.hypot(treatment.se, control.se))
    half = float(norm_ppf(1 - alpha / 2)) * se
    return PPIDifference(difference, se, difference - half, difference + half)
