"""Prediction-powered means against ppi-python, and their coverage where a biased judge's own interval fails."""

import numpy as np
import pytest

from eval_platform.stats.distributions import norm_ppf
from eval_platform.stats.ppi import Moments, ppi_difference, ppi_mean, ppi_mean_of_moments

ppi_py = pytest.importorskip("ppi_py")


def _judged(rng, n, big_n, bias=0.08, binary=False):
    """Human truth and a judge that tracks it but is `bias` too generous (clipped to 0..1 or thresholded)."""
    truth = rng.random(n + big_n) < 0.6 if binary else rng.beta(4, 3, n + big_n)
    truth = truth.astype(float)
    if binary:  # a lenient judge: passes 20 % of the failures, fails 2 % of the passes
        judge = np.where(truth == 1, rng.random(truth.size) > 0.02, rng.random(truth.size) < 0.2).astype(float)
    else:
        judge = np.clip(truth + bias + rng.normal(0, 0.1, truth.size), 0, 1)
    return truth[:n], judge[:n], judge[n:], truth


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
def test_mean_and_interval_equal_ppi_python(binary, lam):
    rng = np.random.default_rng(7)
    human, judge, unlabelled, _ = _judged(rng, 150, 4000, binary=binary)
    ours = ppi_mean(human, judge, unlabelled, alpha=0.1, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(human, judge, unlabelled, lam=lam)
    low, high = ppi_py.ppi_mean_ci(human, judge, unlabelled, alpha=0.1, lam=lam)
    assert ours.mean == pytest.approx(float(np.squeeze(point)), abs=1e-9)
    assert ours.ci_low == pytest.approx(float(np.squeeze(low)), abs=1e-9)
    assert ours.ci_high == pytest.approx(float(np.squeeze(high)), abs=1e-9)


@pytest.mark.parametrize("lam", [None, 1.0])
def test_unlabelled_set_by_its_moments_in_parts_equals_ppi_python(lam):
    """Out of core the unlabelled verdicts arrive as per-day (count, mean, M2): their sum over 30 uneven parts
    gives the estimate ppi-python gives on the values themselves."""
    rng = np.random.default_rng(5)
    human, judge, unlabelled, _ = _judged(rng, 150, 4000)
    cuts = np.sort(rng.choice(np.arange(1, unlabelled.size), 29, replace=False))
    moments = sum((Moments.of(part) for part in np.split(unlabelled, cuts)), Moments())
    ours = ppi_mean_of_moments(human, judge, moments, alpha=0.1, lam=lam)
    low, high = ppi_py.ppi_mean_ci(human, judge, unlabelled, alpha=0.1, lam=lam)
    assert ours.mean == pytest.approx(
        float(np.squeeze(ppi_py.ppi_mean_pointestimate(human, judge, unlabelled, lam=lam))), abs=1e-9
    )
    assert (ours.ci_low, ours.ci_high) == pytest.approx((float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9)


def test_moments_combine_exactly_where_a_sum_of_squares_cancels():
    """Values around 1e7 with a spread of 1e-2: the parallel formula keeps the variance, a sum of squares
    (E[x²] − E[x]²) loses every digit of it."""
    rng = np.random.default_rng(1)
    values = 1e7 + rng.normal(0, 1e-2, 10_000)
    combined = sum((Moments.of(part) for part in np.array_split(values, 7)), Moments())
    assert combined.n == values.size and combined.mean == pytest.approx(values.mean(), rel=1e-15)
    assert combined.variance() == pytest.approx(values.var(), rel=1e-6)
    assert combined.variance(ddof=1) == pytest.approx(values.var(ddof=1), rel=1e-6)
    assert abs((values**2).mean() - values.mean() ** 2 - values.var()) > values.var() / 2
    assert Moments() + Moments.of([2.0]) == Moments.of([2.0]) == Moments.of([2.0]) + Moments()


def test_difference_equals_ppi_python_per_group():
    """ppi-python has no two-sample function: its per-group estimates and intervals give the difference."""
    rng = np.random.default_rng(11)
    control = _judged(rng, 120, 3000)
    treatment = _judged(rng, 90, 2500, bias=0.02)
    alpha = 0.05
    ours = ppi_difference(ppi_mean(*treatment[:3], alpha=alpha), ppi_mean(*control[:3], alpha=alpha), alpha=alpha)
    z = norm_ppf(1 - alpha / 2)
    points, ses = [], []
    for group in (treatment, control):
        points.append(float(np.squeeze(ppi_py.ppi_mean_pointestimate(*group[:3]))))
        low, high = ppi_py.ppi_mean_ci(*group[:3], alpha=alpha)
        ses.append((float(np.squeeze(high)) - float(np.squeeze(low))) / (2 * z))
    difference = points[0] - points[1]
    half = z * np.hypot(*ses)
    assert ours.difference == pytest.approx(difference, abs=1e-9)
    assert ours.ci_low == pytest.approx(difference - half, abs=1e-9)
    assert ours.ci_high == pytest.approx(difference + half, abs=1e-9)


def test_degenerate_input_gives_a_note_not_an_error():
    few = ppi_mean([1.0], [1.0], [0.5, 0.7])
    assert few.mean is None and "at least 2" in few.note
    constant_judge = ppi_mean([0.2, 0.8, 0.5], [1.0, 1.0, 1.0], [1.0] * 10)
    assert constant_judge.lam == 0.0 and constant_judge.mean == pytest.approx(0.5)
    all_labelled = ppi_mean([0.2, 0.8], [0.3, 0.9], [])
    assert all_labelled.mean == pytest.approx(0.5) and "human-only" in all_labelled.note
    assert ppi_difference(few, constant_judge).difference is None
    with pytest.raises(ValueError, match="paired"):
        ppi_mean([1.0, 0.0], [1.0], [0.5])


@pytest.mark.parametrize("binary", [False, True])
def test_coverage_is_nominal_where_the_biased_judge_interval_fails(binary):
    """2,000 seeded repetitions: the 90 % PPI interval covers the true mean about 90 % of the time; the judge-only
    interval over the same traces (a judge 8 points too generous, or passing a fifth of failures) almost never."""
    rng = np.random.default_rng(2023)
    repetitions, n, big_n, alpha = 2000, 200, 2000, 0.1
    z = norm_ppf(1 - alpha / 2)
    ppi_hits = judge_hits = 0
    for _ in range(repetitions):
        human, judge, unlabelled, _ = _judged(rng, n, big_n, binary=binary)
        true_mean = 0.6 if binary else 4 / 7
        estimate = ppi_mean(human, judge, unlabelled, alpha=alpha)
        ppi_hits += estimate.ci_low <= true_mean <= estimate.ci_high
        everything = np.concatenate([judge, unlabelled])
        half = z * everything.std(ddof=1) / np.sqrt(everything.size)
        judge_hits += abs(everything.mean() - true_mean) <= half
    monte_carlo = 3 * np.sqrt(alpha * (1 - alpha) / repetitions)
    assert abs(ppi_hits / repetitions - (1 - alpha)) <= monte_carlo
    assert judge_hits / repetitions < 0.05
