"""Comparing a treatment variant with a control on one metric: Welch's t-test, Cohen's d, and Bayesian
comparisons of means and of proportions.

Every comparison is treatment − control. Groups smaller than `min_n` give "insufficient sample" with every
statistic None, and zero-variance data gives "undefined" with a note; neither raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from eval_platform.lazy_modules import lazy
from eval_platform.stats._labels import as_series
from eval_platform.stats.distributions import norm_cdf, norm_pdf, norm_ppf, t_ppf, t_sf

special = lazy("scipy.special")

INSUFFICIENT = "insufficient sample"
UNDEFINED = "undefined"
MAX_CLOSED_FORM_TERMS = 1_000_000  # beyond this Miller's sum costs more memory than sampling is worth


def _observations(values) -> np.ndarray:
    data = as_series(values).cast(pl.Float64).to_numpy()
    return data[~np.isnan(data)]


def _too_small(n_control: int, n_treatment: int, min_n: int) -> str | None:
    if min(n_control, n_treatment) < min_n:
        return f"needs at least {min_n} observations per group, got {n_control} (control) and {n_treatment} (treatment)"
    return None


@dataclass(frozen=True)
class WelchTest:
    """Welch's unequal-variance t-test of mean(treatment) − mean(control), two-sided."""

    n_control: int
    n_treatment: int
    alpha: float
    interpretation: str
    mean_control: float | None = None
    mean_treatment: float | None = None
    difference: float | None = None
    t: float | None = None
    df: float | None = None
    p_value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    note: str | None = None

    @property
    def n(self) -> int:
        """Observations in both groups."""
        return self.n_control + self.n_treatment


def welch_t_test(control, treatment, alpha: float = 0.05, min_n: int = 2) -> WelchTest:
    """t, Welch–Satterthwaite df, two-sided p and the (1 − alpha) confidence interval of the difference.

    Equals scipy's `ttest_ind(treatment, control, equal_var=False)`. NaNs are dropped.
    """
    c, t = _observations(control), _observations(treatment)
    too_small = _too_small(c.size, t.size, max(min_n, 2))
    if too_small:
        return WelchTest(c.size, t.size, alpha, INSUFFICIENT, note=too_small)
    mean_control, mean_treatment = float(c.mean()), float(t.mean())
    difference = mean_treatment - mean_control
    var_c, var_t = c.var(ddof=1) / c.size, t.var(ddof=1) / t.size
    standard_error = np.sqrt(var_c + var_t)
    if standard_error == 0:
        note = "both groups have zero variance"
        return WelchTest(c.size, t.size, alpha, UNDEFINED, mean_control, mean_treatment, difference, note=note)
    t_stat = difference / standard_error
    share_c, share_t = var_c / standard_error**2, var_t / standard_error**2  # shares cannot underflow
    df = 1.0 / (share_c**2 / (c.size - 1) + share_t**2 / (t.size - 1))
    p_value = float(2 * t_sf(abs(t_stat), df))
    half_width = t_ppf(1 - alpha / 2, df) * standard_error
    return WelchTest(
        n_control=c.size,
        n_treatment=t.size,
        alpha=alpha,
        interpretation="significant" if p_value < alpha else "not significant",
        mean_control=mean_control,
        mean_treatment=mean_treatment,
        difference=difference,
        t=float(t_stat),
        df=float(df),
        p_value=p_value,
        ci_low=float(difference - half_width),
        ci_high=float(difference + half_width),
    )


@dataclass(frozen=True)
class EffectSize:
    """Cohen's d with its conventional band: negligible < 0.2 ≤ small < 0.5 ≤ medium < 0.8 ≤ large (|d|)."""

    n: int
    value: float | None
    interpretation: str | None
    note: str | None = None


def cohens_d(control, treatment, min_n: int = 2) -> EffectSize:
    """(mean(treatment) − mean(control)) / pooled standard deviation (n − 1 weighted)."""
    c, t = _observations(control), _observations(treatment)
    n = c.size + t.size
    too_small = _too_small(c.size, t.size, max(min_n, 2))
    if too_small:
        return EffectSize(n, None, INSUFFICIENT, note=too_small)
    pooled = np.sqrt(((c.size - 1) * c.var(ddof=1) + (t.size - 1) * t.var(ddof=1)) / (n - 2))
    if pooled == 0:
        return EffectSize(n, None, UNDEFINED, note="both groups have zero variance")
    d = float((t.mean() - c.mean()) / pooled)
    size = abs(d)
    band = "negligible" if size < 0.2 else "small" if size < 0.5 else "medium" if size < 0.8 else "large"
    return EffectSize(n, d, band)


@dataclass(frozen=True)
class BayesianComparison:
    """Posterior comparison of treatment with control.

    `expected_lift` is E[θ_t − θ_c] (θ a mean or a rate); `relative_lift` divides it by |E[θ_c]|.
    `expected_loss_treatment` is E[max(θ_c − θ_t, 0)], what shipping the treatment costs if it is worse;
    `expected_loss_control` the same for keeping the control. The credible interval is equal-tailed.
    """

    n_control: int
    n_treatment: int
    method: str
    interpretation: str
    prob_treatment_better: float | None = None
    expected_lift: float | None = None
    relative_lift: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    expected_loss_treatment: float | None = None
    expected_loss_control: float | None = None
    note: str | None = None

    @property
    def n(self) -> int:
        """Observations in both groups."""
        return self.n_control + self.n_treatment


def bayesian_mean_comparison(
    control,
    treatment,
    method: Literal["student_t", "normal"] = "student_t",
    credible: float = 0.95,
    decision_threshold: float = 0.95,
    min_n: int = 2,
    draws: int = 200_000,
    seed: int = 0,
) -> BayesianComparison:
    """Posterior of the difference of two means.

    "student_t": the exact posterior under the non-informative prior p(μ, σ²) ∝ 1/σ², for which each mean
    is x̄ + s/√n · t(n − 1); the difference of two such has no closed form, so it is summarized from `draws`
    seeded Monte Carlo samples (n ≥ 3 so the posterior mean exists; the expected lift is exact).
    "normal": the large-sample approximation μ ~ N(x̄, s²/n), summarized in closed form.
    """
    if method not in ("student_t", "normal"):
        raise ValueError(f"method must be 'student_t' or 'normal', got {method!r}")
    c, t = _observations(control), _observations(treatment)
    floor = 3 if method == "student_t" else 2
    too_small = _too_small(c.size, t.size, max(min_n, floor))
    if too_small:
        return BayesianComparison(c.size, t.size, method, INSUFFICIENT, note=too_small)
    scale_c, scale_t = c.std(ddof=1) / np.sqrt(c.size), t.std(ddof=1) / np.sqrt(t.size)
    if scale_c == 0 or scale_t == 0:
        note = "a group has zero variance, so the posterior of its mean is degenerate"
        return BayesianComparison(c.size, t.size, method, UNDEFINED, note=note)
    if method == "normal":
        summary = _normal_difference(t.mean() - c.mean(), np.hypot(scale_c, scale_t), credible)
    else:
        rng = np.random.default_rng(seed)
        posterior_c = c.mean() + scale_c * rng.standard_t(c.size - 1, size=draws)
        posterior_t = t.mean() + scale_t * rng.standard_t(t.size - 1, size=draws)
        summary = _sampled_difference(posterior_t - posterior_c, credible)
        summary["expected_lift"] = t.mean() - c.mean()
    return _comparison(c.size, t.size, method, float(c.mean()), summary, decision_threshold)


def beta_binomial_comparison(
    successes_control: int,
    n_control: int,
    successes_treatment: int,
    n_treatment: int,
    prior: tuple[float, float] = (1.0, 1.0),
    credible: float = 0.95,
    decision_threshold: float = 0.95,
    min_n: int = 1,
    draws: int = 200_000,
    seed: int = 0,
) -> BayesianComparison:
    """Posterior comparison of two success rates with Beta(prior) priors and binomial likelihoods.

    The expected lift is closed-form, and so is P(θ_t > θ_c) (Miller's sum, one term per unit of the
    treatment's posterior alpha) when that alpha is an integer up to a million; otherwise P(θ_t > θ_c), and
    always the credible interval and expected losses, come from `draws` seeded Monte Carlo samples.
    """
    for successes, n in ((successes_control, n_control), (successes_treatment, n_treatment)):
        if not 0 <= successes <= n:
            raise ValueError(f"successes must be between 0 and n, got {successes} of {n}")
    too_small = _too_small(n_control, n_treatment, max(min_n, 1))
    if too_small:
        return BayesianComparison(n_control, n_treatment, "beta_binomial", INSUFFICIENT, note=too_small)
    a_c, b_c = prior[0] + successes_control, prior[1] + n_control - successes_control
    a_t, b_t = prior[0] + successes_treatment, prior[1] + n_treatment - successes_treatment
    rng = np.random.default_rng(seed)
    summary = _sampled_difference(rng.beta(a_t, b_t, size=draws) - rng.beta(a_c, b_c, size=draws), credible)
    summary["expected_lift"] = a_t / (a_t + b_t) - a_c / (a_c + b_c)
    if float(a_t).is_integer() and a_t <= MAX_CLOSED_FORM_TERMS:
        summary["prob_treatment_better"] = _prob_beta_greater(a_t, b_t, a_c, b_c)
    mean_control = a_c / (a_c + b_c)
    return _comparison(n_control, n_treatment, "beta_binomial", mean_control, summary, decision_threshold)


def _prob_beta_greater(a_t: float, b_t: float, a_c: float, b_c: float) -> float:
    """P(X > Y) for X ~ Beta(a_t, b_t), Y ~ Beta(a_c, b_c), integer a_t (Evan Miller 2015)."""
    i = np.arange(int(a_t))
    log_terms = (
        special.betaln(a_c + i, b_c + b_t) - np.log(b_t + i) - special.betaln(1 + i, b_t) - special.betaln(a_c, b_c)
    )
    return float(np.exp(special.logsumexp(log_terms)))


def _normal_difference(mean: float, sd: float, credible: float) -> dict[str, float]:
    z = mean / sd
    tail = norm_ppf(0.5 + credible / 2) * sd
    density = sd * norm_pdf(z)
    return {
        "prob_treatment_better": norm_cdf(z),
        "expected_lift": mean,
        "ci_low": mean - tail,
        "ci_high": mean + tail,
        "expected_loss_treatment": density - mean * norm_cdf(-z),
        "expected_loss_control": density + mean * norm_cdf(z),
    }


def _sampled_difference(difference: np.ndarray, credible: float) -> dict[str, float]:
    low, high = np.quantile(difference, [0.5 - credible / 2, 0.5 + credible / 2])
    return {
        "prob_treatment_better": (difference > 0).mean(),
        "expected_lift": difference.mean(),
        "ci_low": low,
        "ci_high": high,
        "expected_loss_treatment": np.maximum(-difference, 0).mean(),
        "expected_loss_control": np.maximum(difference, 0).mean(),
    }


def _comparison(
    n_control: int, n_treatment: int, method: str, mean_control: float, summary: dict, decision_threshold: float
) -> BayesianComparison:
    summary = {key: float(value) for key, value in summary.items()}
    probability = summary["prob_treatment_better"]
    if probability >= decision_threshold:
        interpretation = "treatment better"
    elif probability <= 1 - decision_threshold:
        interpretation = "control better"
    else:
        interpretation = "inconclusive"
    relative = summary["expected_lift"] / abs(mean_control) if mean_control else None
    return BayesianComparison(n_control, n_treatment, method, interpretation, relative_lift=relative, **summary)
