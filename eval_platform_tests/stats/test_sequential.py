"""The mixture sequential t-test: its closed form is the stated model integrated numerically; in its pooled mode
it equals `savvi` (a maintained implementation of Lindon et al. 2024) on the same data, and honest when read every
day: seeded simulations of A/A experiments read daily for 30 days keep their false positives at or under alpha
where Welch's test read daily does not, with power against a real effect, and the default per-arm mode keeps them
there when the variants' spreads and sizes differ (where the pooled mode does not)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import cubature
from scipy.stats import binom

from eval_platform.stats.distributions import t_sf
from eval_platform.stats.sequential import mixture_t_test, phi_from_effect_size, running
from tools.perf.stats_peers import SavviRegression

ALPHA = 0.05
EXPERIMENTS, DAYS, PER_DAY = 1000, 30, 50  # per variant and day
LEVELS, LEVEL_SHARES = np.linspace(0, 1, 5), np.array([0.10, 0.15, 0.25, 0.30, 0.20])  # a 5-point rubric


def savvi_daily(days: list[tuple[np.ndarray, np.ndarray]], phi: float) -> np.ndarray:
    """savvi's p-value and interval of the treatment coefficient, updated one observation at a time and read at
    the end of each day (what `experiment_results` reads), with the model's degrees of freedom (`SavviRegression`:
    savvi's own count one fewer)."""
    model = SavviRegression(ALPHA, 2, phi=phi)
    reads = []
    for control, treated in days:
        for value, is_treated in [(v, 0.0) for v in control] + [(v, 1.0) for v in treated]:
            model.update(np.array([value, 1.0, is_treated]))
        model.infer()
        reads.append((model.p_value[1], *model.conf_int[1]))
    return np.array(reads)


def cumulative(days: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    sums = []
    for group in (0, 1):
        sums += [np.cumsum([len(d[group]) for d in days]), np.cumsum([d[group].sum() for d in days])]
        sums.append(np.cumsum([(d[group] ** 2).sum() for d in days]))
    return sums


@pytest.mark.parametrize("prior_effect_size", [0.1, 1.0])
@pytest.mark.parametrize("kind", ["score", "passed"])
def test_equals_savvi_on_the_same_daily_data(kind, prior_effect_size):
    rng = np.random.default_rng(3)
    days = []
    for _day in range(8):
        n_c, n_t = rng.integers(20, 40, 2)
        if kind == "score":
            days.append((rng.beta(2, 3, n_c), rng.beta(2, 3, n_t) + 0.12))
        else:
            days.append(((rng.random(n_c) < 0.55).astype(float), (rng.random(n_t) < 0.8).astype(float)))
    phi = phi_from_effect_size(prior_effect_size)
    peer = savvi_daily(days, phi)
    p_value, low, high = running(mixture_t_test(*cumulative(days), alpha=ALPHA, phi=phi, variance="pooled"))
    assert p_value[-1] < ALPHA  # the effect is found, so the comparison covers p < 1 and bounded intervals
    assert np.isfinite(low).all() and np.isfinite(high).all()
    # savvi's recursive least squares starts from a 1e6 prior covariance: agreement to about 1e-7.
    np.testing.assert_allclose(p_value, peer[:, 0], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(low, peer[:, 1], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(high, peer[:, 2], rtol=1e-6, atol=1e-9)


def _integrated_bayes_factor(control: np.ndarray, treated: np.ndarray, phi: float) -> float:
    """The model's Bayes factor by numerical integration: y = β0 + β1·treated + ε, ε ~ N(0, σ²), the
    alternative β1 ~ N(0, σ²/φ) against β1 = 0, (β0, σ) integrated under the right-Haar prior dβ0 dσ/σ (the
    prior's constant cancels in the ratio)."""
    y = np.concatenate([control, treated])
    x = np.concatenate([np.zeros(control.size), np.ones(treated.size)])

    def density(points: np.ndarray, alternative: bool) -> np.ndarray:
        sigma, b0 = points[:, 0], points[:, 1]
        b1 = points[:, 2] if alternative else np.zeros_like(sigma)
        squares = ((y - b0[:, None] - b1[:, None] * x) ** 2).sum(axis=1)
        with np.errstate(divide="ignore"):  # σ = 0 at the boundary: a density of 0
            log = -y.size / 2 * np.log(2 * np.pi) - (y.size + 1) * np.log(sigma) - squares / (2 * sigma**2)
            if alternative:
                log += 0.5 * np.log(phi / (2 * np.pi)) - np.log(sigma) - phi * b1**2 / (2 * sigma**2)
        return np.exp(log)

    inf = np.inf
    options = {"rtol": 1e-8, "atol": 0, "max_subdivisions": 100_000}
    null = cubature(lambda p: density(p, False), [0, -inf], [inf, inf], **options)
    alternative = cubature(lambda p: density(p, True), [0, -inf, -inf], [inf, inf, inf], **options)
    assert null.status == alternative.status == "converged"
    return alternative.estimate / null.estimate


def test_the_closed_form_is_the_model_integrated_with_n_minus_2_degrees_of_freedom():
    control, treated = np.array([0.2, 0.5, 0.35]), np.array([0.9, 1.3, 0.8, 1.1])
    phi = 1.0
    integrated = _integrated_bayes_factor(control, treated, phi)
    sums = [([a.size], [a.sum()], [(a**2).sum()]) for a in (control, treated)]
    test = mixture_t_test(*sums[0], *sums[1], alpha=ALPHA, phi=phi, variance="pooled")
    assert test.nu[0] == control.size + treated.size - 2
    assert 1 / test.p_value[0] == pytest.approx(integrated, rel=1e-7)  # ν = n − 3 gives 3.96, not 5.06


@pytest.mark.parametrize("variance", ["per_arm", "pooled"])
def test_the_confidence_interval_is_the_set_of_effects_not_rejected(variance):
    rng = np.random.default_rng(12)
    control, treated = rng.normal(0.5, 0.3, 30), rng.normal(0.7, 0.1, 45)
    phi = phi_from_effect_size(0.5)

    def test_of(shift: float):
        moved = treated - shift
        sums = [([a.size], [a.sum()], [(a**2).sum()]) for a in (control, moved)]
        return mixture_t_test(*sums[0], *sums[1], alpha=ALPHA, phi=phi, variance=variance)

    look = test_of(0.0)
    assert np.isfinite(look.ci_low[0]) and np.isfinite(look.ci_high[0])
    for end in (look.ci_low[0], look.ci_high[0]):  # at either end BF = 1/alpha exactly
        assert test_of(end).p_value[0] == pytest.approx(ALPHA, rel=1e-9)


def test_per_arm_is_pooled_when_the_arms_have_equal_sizes_and_widens_for_the_noisier_small_arm():
    rng = np.random.default_rng(7)
    phi = phi_from_effect_size(0.5)
    equal = [rng.normal(0.5, 0.3, 40), rng.normal(0.7, 0.1, 40)]
    sums = [v for a in equal for v in ([a.size], [a.sum()], [(a**2).sum()])]
    per_arm, pooled = (mixture_t_test(*sums, alpha=ALPHA, phi=phi, variance=v) for v in ("per_arm", "pooled"))
    for name, value in vars(pooled).items():
        np.testing.assert_allclose(getattr(per_arm, name), value, rtol=1e-12, err_msg=name)
    # 1:3 traffic with the small arm three times as spread: the pooled standard error is too small.
    unequal = [rng.normal(0.5, 0.3, 40), rng.normal(0.6, 0.1, 120)]
    sums = [v for a in unequal for v in ([a.size], [a.sum()], [(a**2).sum()])]
    per_arm, pooled = (mixture_t_test(*sums, alpha=ALPHA, phi=phi, variance=v) for v in ("per_arm", "pooled"))
    welch_se = np.sqrt(unequal[0].var(ddof=1) / 40 + unequal[1].var(ddof=1) / 120)
    assert per_arm.difference[0] / per_arm.t[0] == pytest.approx(welch_se, rel=1e-12)
    assert per_arm.ci_high[0] - per_arm.ci_low[0] > 1.5 * (pooled.ci_high[0] - pooled.ci_low[0])
    with pytest.raises(ValueError, match="variance must be 'per_arm' or 'pooled'"):
        mixture_t_test(*sums, alpha=ALPHA, phi=phi, variance="welch")


def test_running_values_only_tighten_and_skip_looks_without_data():
    control = ([1, 5, 5, 30, 60], [1, 3, 3, 20, 44], [1, 2.5, 2.5, 16, 36])
    treated = ([1, 5, 5, 30, 60], [0, 3, 3, 18, 33], [0, 2.5, 2.5, 13, 22])
    test = mixture_t_test(*control, *treated, alpha=ALPHA, phi=100.0)
    assert np.isnan(test.p_value[0])  # one observation per group: no residual degree of freedom
    p_value, low, high = running(test)
    assert p_value[0] == 1.0 and low[0] == -np.inf and high[0] == np.inf
    assert (p_value[1:] <= p_value[:-1]).all() and p_value[-1] < 1
    assert (low[1:] >= low[:-1]).all() and (high[1:] <= high[:-1]).all() and np.isfinite(low[-1])


def _daily_sums(rng: np.random.Generator, kind: str, effect: float) -> list[np.ndarray]:
    """Cumulative n, Σx, Σx² per (experiment, day) for the control and the treatment (vectorized)."""
    sums = []
    for shift in (0.0, effect):
        if kind == "score":
            values = rng.choice(LEVELS, size=(EXPERIMENTS, DAYS, PER_DAY), p=LEVEL_SHARES) + shift
        else:
            values = (rng.random((EXPERIMENTS, DAYS, PER_DAY)) < 0.7 + shift).astype(float)
        n = np.cumsum(np.full((EXPERIMENTS, DAYS), float(PER_DAY)), axis=1)
        sums += [n, np.cumsum(values.sum(axis=2), axis=1), np.cumsum((values**2).sum(axis=2), axis=1)]
    return sums


def _welch_p(n_c, sum_c, sumsq_c, n_t, sum_t, sumsq_t) -> np.ndarray:
    mean_c, mean_t = sum_c / n_c, sum_t / n_t
    var_c, var_t = (sumsq_c - sum_c * mean_c) / (n_c - 1) / n_c, (sumsq_t - sum_t * mean_t) / (n_t - 1) / n_t
    df = (var_c + var_t) ** 2 / (var_c**2 / (n_c - 1) + var_t**2 / (n_t - 1))
    return 2 * t_sf(np.abs(mean_t - mean_c) / np.sqrt(var_c + var_t), df)


@pytest.mark.parametrize(("kind", "effect"), [("score", 0.03), ("passed", 0.05)])
def test_a_a_experiments_read_daily_keep_false_positives_at_alpha(kind, effect, capsys):
    rng = np.random.default_rng(2026)
    phi = phi_from_effect_size(0.1)
    monte_carlo_error = 3 * np.sqrt(ALPHA * (1 - ALPHA) / EXPERIMENTS)  # three standard errors
    figures = {}
    for label, true_effect in (("A/A", 0.0), ("effect", effect)):
        sums = _daily_sums(rng, kind, true_effect)
        welch = _welch_p(*sums)
        always_valid, _, _ = running(mixture_t_test(*sums, alpha=ALPHA, phi=phi), axis=1)
        figures[label] = {
            "welch, read daily": (welch < ALPHA).any(axis=1).mean(),
            "welch, read once on day 30": (welch[:, -1] < ALPHA).mean(),
            "sequential, read daily": (always_valid < ALPHA).any(axis=1).mean(),
        }
    with capsys.disabled():
        print(f"\n{kind}: {EXPERIMENTS} experiments x {DAYS} days x {PER_DAY} per variant and day; effect {effect}")
        for label, rates in figures.items():
            print(f"  {label}: " + ", ".join(f"{name} {rate:.3f}" for name, rate in rates.items()))
    null = figures["A/A"]
    assert null["sequential, read daily"] <= ALPHA + monte_carlo_error
    assert null["welch, read once on day 30"] <= ALPHA + monte_carlo_error  # the fixed horizon, used as designed
    assert null["welch, read daily"] >= 0.15  # peeking: about 0.2-0.3 with 30 looks
    power = figures["effect"]
    # A real effect is found (power reported above); the price of reading daily is power, not validity.
    assert power["sequential, read daily"] > 0.3
    assert power["sequential, read daily"] < power["welch, read once on day 30"]


TRAFFIC = (15, 45)  # per day: a 25 % rollout against the rest


def _normal_sums(rng: np.random.Generator, experiments: int, per_day: int, sd: float) -> list[np.ndarray]:
    values = rng.normal(0.6, sd, (experiments, DAYS, per_day))
    n = np.cumsum(np.full((experiments, DAYS), float(per_day)), axis=1)
    return [n, np.cumsum(values.sum(axis=2), axis=1), np.cumsum((values**2).sum(axis=2), axis=1)]


@pytest.mark.parametrize("prior_effect_size", [0.1, 1.0])
@pytest.mark.parametrize(
    ("sd_small", "sd_large"),
    [(0.2, 0.2), (0.3, 0.1), (0.1, 0.3)],
    ids=["equal spreads", "small arm 3x the spread", "large arm 3x the spread"],
)
def test_unequal_spreads_and_traffic_keep_false_positives_at_alpha(sd_small, sd_large, prior_effect_size, capsys):
    """A/A experiments at 1:3 traffic (15 and 45 a day, identical means), read after every one of 30 days from
    the first day, for equal and three-times-unequal spreads. The false-positive count must not be significantly
    above alpha: at most the binomial(experiments, alpha) 99.9th percentile."""
    experiments = 1000
    rng = np.random.default_rng(30)
    sums = _normal_sums(rng, experiments, TRAFFIC[0], sd_small) + _normal_sums(rng, experiments, TRAFFIC[1], sd_large)
    phi = phi_from_effect_size(prior_effect_size)
    rates = {}
    for variance in ("per_arm", "pooled"):
        always_valid, _, _ = running(mixture_t_test(*sums, alpha=ALPHA, phi=phi, variance=variance), axis=1)
        rates[variance] = (always_valid < ALPHA).any(axis=1).mean()
    bound = binom.ppf(0.999, experiments, ALPHA) / experiments
    with capsys.disabled():
        print(f"\nsd {sd_small} (15/day) vs {sd_large} (45/day), prior effect {prior_effect_size}: {rates}")
    assert rates["per_arm"] <= bound
    if sd_small > sd_large:  # the pooled model's failure the per-arm mode exists for
        assert rates["pooled"] > bound
