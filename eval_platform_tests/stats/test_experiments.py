"""Welch's t-test, Cohen's d and the Bayesian comparisons, against scipy and seeded Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from eval_platform.stats.experiments import (
    bayesian_mean_comparison,
    beta_binomial_comparison,
    cohens_d,
    welch_t_test,
)

MC_DRAWS = 400_000
# Monte Carlo tolerance: with 400k draws a probability's standard error is at most 0.0008, so 0.005 is > 6 SE.
MC_PROBABILITY_TOLERANCE = 0.005


def _groups(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    control = rng.normal(rng.normal(), rng.uniform(0.2, 3), size=rng.integers(2, 80))
    treatment = rng.normal(rng.normal(), rng.uniform(0.2, 3), size=rng.integers(2, 80))
    return control, treatment


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
@pytest.mark.parametrize("seed", range(30))
def test_welch_matches_scipy(seed, alpha):
    control, treatment = _groups(seed)
    ours = welch_t_test(control, treatment, alpha=alpha)
    peer = stats.ttest_ind(treatment, control, equal_var=False)
    interval = peer.confidence_interval(1 - alpha)
    assert (ours.t, ours.df, ours.p_value) == pytest.approx((peer.statistic, peer.df, peer.pvalue), rel=1e-10)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((interval.low, interval.high), rel=1e-10)
    assert ours.interpretation == ("significant" if peer.pvalue < alpha else "not significant")


samples = st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=40)


@settings(max_examples=100, deadline=None)
@given(control=samples, treatment=samples)
def test_welch_t_is_antisymmetric_in_the_groups(control, treatment):
    forward, backward = welch_t_test(control, treatment), welch_t_test(treatment, control)
    assume(forward.t is not None)
    assert backward.t == pytest.approx(-forward.t, rel=1e-9)
    assert backward.p_value == pytest.approx(forward.p_value, rel=1e-9, abs=1e-300)
    assert (backward.ci_low, backward.ci_high) == pytest.approx((-forward.ci_high, -forward.ci_low), rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), shift=st.floats(-100, 100), scale=st.floats(0.01, 100))
def test_welch_p_is_invariant_to_shifting_and_scaling_both_groups(seed, shift, scale):
    control, treatment = _groups(seed)
    original = welch_t_test(control, treatment)
    transformed = welch_t_test(control * scale + shift, treatment * scale + shift)
    assert transformed.p_value == pytest.approx(original.p_value, rel=1e-6, abs=1e-12)
    assert transformed.difference == pytest.approx(original.difference * scale, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_cohens_d_is_the_pooled_t_statistic_rescaled(seed):
    control, treatment = _groups(seed)
    pooled_t = stats.ttest_ind(treatment, control, equal_var=True).statistic
    expected = pooled_t * np.sqrt(1 / control.size + 1 / treatment.size)
    assert cohens_d(control, treatment).value == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(
    ("shift", "band"), [(0.0, "negligible"), (0.19, "negligible"), (0.3, "small"), (0.6, "medium"), (-0.9, "large")]
)
def test_cohens_d_bands(shift, band):
    base = np.array([-1.0, 1.0] * 50)  # pooled SD is 1.005, so d ≈ shift
    assert cohens_d(base, base + shift).interpretation == band


@pytest.mark.parametrize("seed", range(10))
def test_normal_posterior_closed_form_matches_monte_carlo(seed):
    control, treatment = _groups(seed)
    closed = bayesian_mean_comparison(control, treatment, method="normal")
    rng = np.random.default_rng(seed)
    sd = np.hypot(control.std(ddof=1) / np.sqrt(control.size), treatment.std(ddof=1) / np.sqrt(treatment.size))
    difference = rng.normal(treatment.mean() - control.mean(), sd, size=MC_DRAWS)
    assert closed.prob_treatment_better == pytest.approx((difference > 0).mean(), abs=MC_PROBABILITY_TOLERANCE)
    assert (closed.ci_low, closed.ci_high) == pytest.approx(np.quantile(difference, [0.025, 0.975]), abs=0.01 * sd)
    assert closed.expected_loss_treatment == pytest.approx(np.maximum(-difference, 0).mean(), abs=0.01 * sd)
    assert closed.expected_loss_control == pytest.approx(np.maximum(difference, 0).mean(), abs=0.01 * sd)


@pytest.mark.parametrize("seed", range(5))
def test_student_t_posterior_approaches_the_normal_closed_form_for_large_samples(seed):
    rng = np.random.default_rng(seed)
    control, treatment = rng.normal(0, 1, 3000), rng.normal(0.05, 1.2, 3000)
    sampled = bayesian_mean_comparison(control, treatment, method="student_t", draws=MC_DRAWS, seed=seed)
    closed = bayesian_mean_comparison(control, treatment, method="normal")
    sd = closed.ci_high - closed.ci_low
    assert sampled.prob_treatment_better == pytest.approx(closed.prob_treatment_better, abs=MC_PROBABILITY_TOLERANCE)
    assert sampled.expected_lift == closed.expected_lift
    assert (sampled.ci_low, sampled.ci_high) == pytest.approx((closed.ci_low, closed.ci_high), abs=0.01 * sd)
    assert sampled.expected_loss_treatment == pytest.approx(closed.expected_loss_treatment, abs=0.01 * sd)


def test_student_t_posterior_is_wider_than_normal_for_small_samples_and_seeded():
    control, treatment = [1.0, 2.0, 4.0], [2.0, 3.5, 5.0, 6.0]
    sampled = bayesian_mean_comparison(control, treatment, seed=7)
    assert sampled == bayesian_mean_comparison(control, treatment, seed=7)
    closed = bayesian_mean_comparison(control, treatment, method="normal")
    assert sampled.ci_high - sampled.ci_low > 1.5 * (closed.ci_high - closed.ci_low)


def _prob_beta_greater_by_quadrature(a_t, b_t, a_c, b_c) -> float:
    integrand = lambda x: stats.beta.pdf(x, a_t, b_t) * stats.beta.cdf(x, a_c, b_c)  # noqa: E731
    return integrate.quad(integrand, 0, 1, limit=200)[0]


@pytest.mark.parametrize(
    ("s_c", "n_c", "s_t", "n_t"), [(40, 100, 55, 110), (3, 10, 2, 10), (0, 5, 5, 5), (480, 1000, 520, 1000)]
)
def test_beta_binomial_probability_closed_form_matches_quadrature_and_monte_carlo(s_c, n_c, s_t, n_t):
    result = beta_binomial_comparison(s_c, n_c, s_t, n_t, draws=MC_DRAWS)
    quadrature = _prob_beta_greater_by_quadrature(1 + s_t, 1 + n_t - s_t, 1 + s_c, 1 + n_c - s_c)
    assert result.prob_treatment_better == pytest.approx(quadrature, abs=1e-8)
    rng = np.random.default_rng(0)
    draws = rng.beta(1 + s_t, 1 + n_t - s_t, MC_DRAWS) - rng.beta(1 + s_c, 1 + n_c - s_c, MC_DRAWS)
    assert result.prob_treatment_better == pytest.approx((draws > 0).mean(), abs=MC_PROBABILITY_TOLERANCE)
    assert result.expected_lift == pytest.approx((1 + s_t) / (2 + n_t) - (1 + s_c) / (2 + n_c), abs=1e-12)


def test_beta_binomial_with_a_fractional_prior_falls_back_to_monte_carlo():
    result = beta_binomial_comparison(40, 100, 55, 110, prior=(0.5, 0.5), draws=MC_DRAWS)
    quadrature = _prob_beta_greater_by_quadrature(55.5, 55.5, 40.5, 60.5)
    assert result.prob_treatment_better == pytest.approx(quadrature, abs=MC_PROBABILITY_TOLERANCE)


def test_decisions_follow_the_threshold():
    assert beta_binomial_comparison(100, 1000, 200, 1000).interpretation == "treatment better"
    assert beta_binomial_comparison(200, 1000, 100, 1000).interpretation == "control better"
    assert beta_binomial_comparison(100, 1000, 101, 1000).interpretation == "inconclusive"


def test_small_or_constant_groups_are_reported_not_raised():
    assert welch_t_test([1.0], [1.0, 2.0]).interpretation == "insufficient sample"
    gated = welch_t_test(*_groups(1), min_n=1000)
    assert gated.interpretation == "insufficient sample" and gated.p_value is None and "at least 1000" in gated.note
    constant = welch_t_test([2.0, 2.0], [3.0, 3.0, np.nan])
    assert (constant.interpretation, constant.difference, constant.t) == ("undefined", 1.0, None)
    assert constant.n_treatment == 2
    assert cohens_d([1.0, 1.0], [1.0, 1.0]).value is None
    assert cohens_d([], [1.0]).interpretation == "insufficient sample"
    assert bayesian_mean_comparison([1.0, 2.0], [1.0, 2.0, 3.0]).interpretation == "insufficient sample"
    assert bayesian_mean_comparison([1.0, 2.0], [1.0, 2.0], method="normal").interpretation == "inconclusive"
    assert bayesian_mean_comparison([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).interpretation == "undefined"
    assert beta_binomial_comparison(0, 0, 1, 2).interpretation == "insufficient sample"
    with pytest.raises(ValueError, match="between 0 and n"):
        beta_binomial_comparison(5, 3, 1, 2)


short_samples = st.lists(st.one_of(st.floats(-10, 10), st.just(float("nan"))), max_size=4)


@settings(max_examples=200, deadline=None)
@given(control=short_samples, treatment=short_samples)
def test_tiny_or_constant_samples_never_raise(control, treatment):
    for result in (
        welch_t_test(control, treatment),
        cohens_d(control, treatment),
        bayesian_mean_comparison(control, treatment, draws=1000),
        bayesian_mean_comparison(control, treatment, method="normal"),
    ):
        if result.interpretation in ("insufficient sample", "undefined"):
            assert result.note
