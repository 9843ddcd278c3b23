"""Always-valid inference for a difference of two means, read as often as one likes.

The statistic is the mixture sequential t-test of Lindon, Ham, Tingley and Bojinov (2024, "Anytime-valid linear
models and regression adjusted causal inference in randomized experiments", arXiv:2210.08589) for the linear
model y = β0 + β1·treated + ε, ε ~ N(0, σ²) with σ unknown. Its Bayes factor mixes the alternative
β1 ~ N(0, σ²/φ) against β1 = 0, with β0 and σ integrated out under the right-Haar prior dβ0 dσ/σ:

    BF = √r · [(SSE + z²β̂1²) / (SSE + r z²β̂1²)]^((n − 1)/2),   z² = n_c·n_t / (n_c + n_t),  r = φ / (φ + z²),

which with ν = n − 2 residual degrees of freedom and t = β̂1 / se(β̂1), se² = SSE / (ν z²), is

    log BF = ½ log r + (ν + 1)/2 · [log(1 + t²/ν) − log(1 + r·t²/ν)]
    CS radius = se · sqrt(ν (1 − c) / (c − r)),  c = (r α²)^(1/(ν + 1))   (infinite while c ≤ r)

(the test checks this closed form against a numerical integration of the model). BF is a nonnegative
martingale under the null, so by Ville's inequality P(∃n: BF_n ≥ 1/α) ≤ α: the always-valid p-value
p_n = min_{m ≤ n} min(1, 1/BF_m) and the confidence sequence (the effects not rejected at α, intersected over
time) hold at every look, however often one looks. `savvi.LinearRegression` computes the same statistic by
recursive least squares, one observation at a time, but with its degrees of freedom `n − p − 1` for `p`
covariates counting the intercept: one fewer than the model's n − 2 (conservative).

Two variance modes (`variance=`), chosen by the experiment's `sequential_variance`, never by the data:

- `pooled`: the above, exact at every n when both arms have the same spread (the model's assumption). When they
  do not and the arms differ in size, se(β̂1) is wrong (for the smaller arm three times as spread, at 1:3
  traffic, an A/A experiment read daily for 30 days is declared different 13 % of the time at α = 0.05).
- `per_arm` (the default): the same closed form with the per-arm (Welch, or HC2 heteroskedasticity-robust)
  standard error se² = s_c²/n_c + s_t²/n_t, z² = σ̂² / se² (σ̂² = SSE / ν, so the prior on the effect is still
  N(0, σ̂²/φ)) and ν = n − 2. As n grows, log BF tends to ½ log r + ½ (1 − r) t², the Gaussian-mixture
  boundary of the asymptotic confidence sequences of Waudby-Smith, Arnold, Wu, Ramdas & Howard (2024,
  "Time-uniform central limit theory and asymptotic confidence sequences", Ann. Statist.) with the difference
  of means' own variance σ_c²/n_c + σ_t²/n_t estimated per arm (the mixing scale set by φ): valid for any
  spreads, asymptotically (Lindon et al.'s later versions also give heteroskedasticity-robust asymptotic
  tests; not compared here). It keeps the t form's heavier tail for small n, and it is exactly `pooled`
  whenever the arms have equal sizes (then both standard errors are the same number), so nothing is lost
  where the pooled test was right. Why not the plain asymptotic CS (the limit above): it drops the t tail on
  the first days' small n (slightly more false positives in simulation), and it would differ from the exact test
  even where that one holds. The A/A simulations in the tests check both modes' false positives.

Either is closed-form from the groups' sufficient statistics (n, Σx, Σx²), so it is computed for every day of
every experiment (or every replicate of a simulation) at once. For pass rates (0/1 values) the Gaussian model
is an approximation: validity is then asymptotic, which the simulation checks too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

DEFAULT_PRIOR_EFFECT_SIZE = 0.1
Variance = Literal["per_arm", "pooled"]
DEFAULT_VARIANCE: Variance = "per_arm"


def phi_from_effect_size(effect_size: float) -> float:
    """The mixture's precision φ for a prior standard deviation of the effect of `effect_size` residual SDs
    (a Cohen's d scale): β1 ~ N(0, σ²/φ) with φ = 1 / effect_size²."""
    if not effect_size > 0:
        raise ValueError(f"the prior effect size must be positive, got {effect_size}")
    return 1.0 / effect_size**2


@dataclass(frozen=True)
class MixtureTTest:
    """Per look (array elements broadcast over the inputs): the difference of means, the pooled t statistic, the
    residual degrees of freedom ν, the look's own p-value 1/BF (capped at 1) and confidence interval (the set of
    effects with BF < 1/α), all NaN where the look has no residual degree of freedom or no variance."""

    difference: np.ndarray
    t: np.ndarray
    nu: np.ndarray
    p_value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


def mixture_t_test(
    n_c, sum_c, sumsq_c, n_t, sum_t, sumsq_t, alpha: float, phi: float, variance: Variance = DEFAULT_VARIANCE
) -> MixtureTTest:
    """The mixture t-test of treatment − control at each look, from cumulative sufficient statistics.

    `sum_*` and `sumsq_*` are Σx and Σx² of each group up to the look (centre x on any constant first: the
    statistic does not change and the sums of squares keep their precision). `variance`: `per_arm` (the
    difference's standard error from each arm's own variance; needs two observations per arm) or `pooled` (one
    residual variance, Lindon et al.'s exact model)."""
    if variance not in ("per_arm", "pooled"):
        raise ValueError(f"variance must be 'per_arm' or 'pooled', got {variance!r}")
    n_c, n_t = np.asarray(n_c, dtype=float), np.asarray(n_t, dtype=float)
    sum_c, sum_t = np.asarray(sum_c, dtype=float), np.asarray(sum_t, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_c, mean_t = sum_c / n_c, sum_t / n_t
        ss_c = np.maximum(np.asarray(sumsq_c) - sum_c * mean_c, 0)
        ss_t = np.maximum(np.asarray(sumsq_t) - sum_t * mean_t, 0)
        n = n_c + n_t
        nu = n - 2
        sigma2 = (ss_c + ss_t) / nu
        if variance == "pooled":
            se = np.sqrt(sigma2 * n / (n_c * n_t))
            usable = (n_c >= 1) & (n_t >= 1)
        else:
            se = np.sqrt(ss_c / (n_c - 1) / n_c + ss_t / (n_t - 1) / n_t)
            usable = (n_c >= 2) & (n_t >= 2)
        z2 = sigma2 / se**2
        difference = mean_t - mean_c
        usable &= (nu > 0) & (se > 0)
        nu = np.where(usable, nu, np.nan)
        se = np.where(usable, se, np.nan)
        t = difference / se
        r = phi / (phi + z2)
        log_bf = 0.5 * np.log(r) + 0.5 * (nu + 1) * (np.log1p(t**2 / nu) - np.log1p(r * t**2 / nu))
        p_value = np.minimum(1.0, np.exp(-log_bf))
        c = np.exp((np.log(r) + 2 * np.log(alpha)) / (nu + 1))
        radius = se * np.sqrt(nu * (1 - c) / np.where(c > r, c - r, 0.0))
    return MixtureTTest(
        difference=np.where(usable, difference, np.nan),
        t=t,
        nu=nu,
        p_value=p_value,
        ci_low=difference - radius,
        ci_high=difference + radius,
    )


def running(test: MixtureTTest, axis: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The always-valid p-value and confidence sequence after each look, along `axis` (looks in time order):
    the running minimum of the p-values and the running intersection of the intervals. Looks that could not be
    computed (NaN) leave both unchanged; before the first usable look the p-value is 1 and the interval unbounded.
    """
    p = np.fmin.accumulate(np.where(np.isnan(test.p_value), 1.0, test.p_value), axis=axis)
    low = np.fmax.accumulate(np.where(np.isnan(test.ci_low), -np.inf, test.ci_low), axis=axis)
    high = np.fmin.accumulate(np.where(np.isnan(test.ci_high), np.inf, test.ci_high), axis=axis)
    return p, low, high
