"""`experiment_results` with `method: sequential`, multiple-comparison corrections and planning columns, each
against its peer on the same data: savvi (the always-valid test read per day), statsmodels' `multipletests` and
its power functions."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower, TTestIndPower
from statsmodels.stats.proportion import proportion_effectsize

from eval_platform.experiments.analysis import experiment_results
from eval_platform.experiments.sequential import daily_cumulative
from eval_platform.stats.sequential import mixture_t_test, phi_from_effect_size, running
from eval_platform_tests.experiments.test_analysis import NO_TRACES, experiment, frame, one, score_rows
from tools.perf.stats_peers import SavviRegression

DAYS = [str(dt.date(2026, 11, 1) + dt.timedelta(days=i)) for i in range(6)]


def daily_scores(rng, evaluator: str, effect: float, field: str = "score"):
    rows, days = [], []
    for day in DAYS:
        n_c, n_t = rng.integers(15, 30, 2)
        if field == "score":
            control, treated = rng.beta(2, 3, n_c), np.clip(rng.beta(2, 3, n_t) + effect, 0, 1)
        else:
            control, treated = rng.random(n_c) < 0.5, rng.random(n_t) < 0.5 + effect
        days.append((control.astype(float), treated.astype(float)))
        rows += score_rows(evaluator, "a", control, day=day, field=field)
        rows += score_rows(evaluator, "b", treated, day=day, field=field)
    return rows, days


def savvi_after_each_day(days, alpha: float, prior_effect_size: float):
    model = SavviRegression(alpha, 2, phi=1 / prior_effect_size**2)  # savvi with the model's degrees of freedom
    for control, treated in days:
        for value, is_treated in [(v, 0.0) for v in control] + [(v, 1.0) for v in treated]:
            model.update(np.array([value, 1.0, is_treated]))
        with np.errstate(divide="ignore"):  # savvi divides by zero for a still unbounded interval (it is inf)
            model.infer()
    return model.p_value[1], model.conf_int[1]


@pytest.mark.parametrize("field", ["score", "passed"])
def test_sequential_experiment_equals_savvi_read_daily(field):
    rng = np.random.default_rng(11)
    rows, days = daily_scores(rng, "helpfulness", 0.15 if field == "score" else 0.3, field)
    config = experiment(
        method="sequential",
        sequential_variance="pooled",  # savvi's model: one residual variance
        primary_metric={"evaluator": "helpfulness", "field": field},
    )
    row = one(experiment_results([config], frame(rows), NO_TRACES), kind="comparison")
    p_value, (low, high) = savvi_after_each_day(days, config.alpha, config.sequential_prior_effect_size)
    assert row["sequential_looks"] == len(DAYS)
    assert row["always_valid_p_value"] == pytest.approx(p_value, rel=1e-6)
    assert (row["cs_low"], row["cs_high"]) == pytest.approx((low, high), rel=1e-6)
    assert row["p_value"] is None and row["diff_ci_low"] is None  # no fixed-horizon figures to peek at
    assert row["outcome"] == "better" and row["significant"] is True
    assert row["significance_rule"] == "always-valid p (mixture sequential t-test) < 0.05 (one test)"
    assert row["recommendation"].startswith(f"ship b: helpfulness.{field} improved significantly (+0.")
    assert "always-valid p" in row["recommendation"]


def test_a_sequential_experiment_uses_each_variants_own_spread_by_default():
    """A 1:3 rollout whose smaller variant is three times as spread: the default (`per_arm`) is what the
    experiment reports, with a wider confidence sequence than the pooled model's, which understates the noise."""
    rng = np.random.default_rng(21)
    rows = []
    for day in DAYS:
        rows += score_rows("helpfulness", "a", np.clip(rng.normal(0.6, 0.1, 45), 0, 1), day=day)
        rows += score_rows("helpfulness", "b", np.clip(rng.normal(0.62, 0.3, 15), 0, 1), day=day)
    scores = frame(rows)
    default, pooled = (
        one(experiment_results([experiment(method="sequential", **extra)], scores, NO_TRACES), kind="comparison")
        for extra in ({}, {"sequential_variance": "pooled"})
    )
    config = experiment(method="sequential")
    assert config.sequential_variance == "per_arm"
    values = scores.filter(pl.col("evaluator") == "helpfulness").select(
        pl.col("date"), pl.col("variant"), pl.col("score").alias("value")
    )
    totals = daily_cumulative(values, "a", "b")
    sums = [totals[f"{stat}_{role}"] for role in ("c", "t") for stat in ("n", "sum", "sumsq")]
    p_value, low, high = running(
        mixture_t_test(*sums, alpha=0.05, phi=phi_from_effect_size(config.sequential_prior_effect_size))
    )
    assert default["always_valid_p_value"] == pytest.approx(p_value[-1], rel=1e-12)
    assert (default["cs_low"], default["cs_high"]) == pytest.approx((low[-1], high[-1]), rel=1e-12)
    assert default["cs_high"] - default["cs_low"] > 1.3 * (pooled["cs_high"] - pooled["cs_low"])


def test_sequential_reads_only_days_with_the_minimum_sample_and_keeps_earlier_evidence():
    rng = np.random.default_rng(5)
    rows, days = daily_scores(rng, "helpfulness", 0.2)
    config = experiment(method="sequential", minimum_sample_size=40)
    row = one(experiment_results([config], frame(rows), NO_TRACES), kind="comparison")
    sizes = np.minimum(np.cumsum([len(c) for c, _ in days]), np.cumsum([len(t) for _, t in days]))
    assert row["sequential_looks"] == int((sizes >= 40).sum()) < len(DAYS)
    # A sequential guardrail's non-inferiority margin is judged on the confidence sequence.
    guarded = experiment(
        method="sequential",
        guardrails=[{"evaluator": "helpfulness", "field": "score", "max_degradation": 0.5}],
        primary_metric={"evaluator": "toxicity"},
    )
    toxicity, _ = daily_scores(rng, "toxicity", 0.0)
    guard = one(
        experiment_results([guarded], frame(rows + toxicity), NO_TRACES), metric="helpfulness.score", kind="comparison"
    )
    assert guard["cs_low"] > -0.5 and guard["guardrail_passed"] is True


def holm_family_scores(rng):
    rows = []
    for evaluator, effect in (("helpfulness", 0.08), ("toxicity", 0.06), ("faithfulness", 0.0)):
        for variant, shift in (("a", 0.0), ("b", effect), ("c", effect / 2)):
            rows += score_rows(evaluator, variant, rng.normal(0.5 + shift, 0.2, 120))
    return frame(rows)


@pytest.mark.parametrize(
    ("rule", "peer", "name"), [("holm", "holm", "Holm"), ("benjamini_hochberg", "fdr_bh", "Benjamini-Hochberg")]
)
def test_the_family_of_treatments_times_metrics_is_adjusted_as_statsmodels_does(rule, peer, name):
    scores = holm_family_scores(np.random.default_rng(2))
    fields = {
        "treatments": ["b", "c"],
        "guardrails": [
            {"evaluator": "toxicity", "must_not_be_significantly_worse": True, "direction": "decrease"},
            {"evaluator": "faithfulness", "must_not_be_significantly_worse": True},
        ],
    }
    adjusted = experiment_results([experiment(**fields, multiple_comparisons=rule)], scores, NO_TRACES)
    alone = experiment_results([experiment(**fields, multiple_comparisons="none")], scores, NO_TRACES)
    rows = adjusted.filter(kind="comparison").sort("metric", "variant")
    raw = rows["p_value"].to_numpy()
    reject, expected, _, _ = multipletests(raw, alpha=0.05, method=peer)
    np.testing.assert_allclose(rows["p_value_adjusted"].to_numpy(), expected, rtol=1e-12)
    assert rows["significant"].to_list() == list(reject)
    assert set(rows["significance_rule"]) == {f"{name}-adjusted Welch p < 0.05 (6 tests)"}
    unadjusted = alone.filter(kind="comparison").sort("metric", "variant")
    assert unadjusted["significant"].to_list() == list(raw < 0.05)
    assert set(unadjusted["significance_rule"]) == {"Welch p < 0.05 (not adjusted, 6 tests)"}
    # The data are built so that the correction changes decisions; the recommendation shows both p-values then.
    changed = rows.filter(pl.col("p_value") < 0.05, ~pl.col("significant"))
    assert changed.height == 2 and set(changed["outcome"]) == {"no significant difference"}
    primary = rows.filter(metric="helpfulness.score", variant="c").row(0, named=True)
    assert (
        f"p={primary['p_value']:.3f}, {name}-adjusted p={primary['p_value_adjusted']:.3f}"
        in (primary["recommendation"])
    )


def test_planning_columns_equal_statsmodels_power():
    rng = np.random.default_rng(8)
    control, treated = rng.normal(0.6, 0.2, 80), rng.normal(0.62, 0.25, 100)
    passes_c, passes_t = rng.random(80) < 0.6, rng.random(100) < 0.65
    rows = score_rows("helpfulness", "a", control) + score_rows("helpfulness", "b", treated)
    rows += score_rows("assertion", "a", passes_c, field="passed") + score_rows(
        "assertion", "b", passes_t, field="passed"
    )
    config = experiment(
        primary_metric={"evaluator": "helpfulness", "target_effect": 0.05},
        guardrails=[
            {"evaluator": "assertion", "field": "passed", "target_effect": 0.1, "must_not_be_significantly_worse": True}
        ],
        power=0.8,
    )
    results = experiment_results([config], frame(rows), NO_TRACES)
    score = one(results, kind="comparison", metric="helpfulness.score")
    sd = np.sqrt((79 * control.var(ddof=1) + 99 * treated.var(ddof=1)) / 178)
    d = TTestIndPower().solve_power(None, nobs1=80, alpha=0.05, power=0.8, ratio=100 / 80)
    assert score["mde"] == pytest.approx(d * sd, rel=1e-5)
    n = TTestIndPower().solve_power(0.05 / sd, nobs1=None, alpha=0.05, power=0.8, ratio=1.0)
    assert (score["target_effect"], score["power"], score["required_n"]) == (0.05, 0.8, int(np.ceil(n)))
    rate = one(results, kind="comparison", metric="assertion.passed")
    p_c = passes_c.mean()
    h = NormalIndPower().solve_power(None, nobs1=80, alpha=0.05, power=0.8, ratio=100 / 80)
    assert proportion_effectsize(p_c + rate["mde"], p_c) == pytest.approx(h, rel=1e-5)
    n = NormalIndPower().solve_power(proportion_effectsize(p_c + 0.1, p_c), nobs1=None, alpha=0.05, power=0.8)
    assert rate["required_n"] == int(np.ceil(n))
    assert one(results, kind="variant", variant="a", metric="helpfulness.score")["mde"] is None  # comparisons only


def test_planning_is_there_before_the_minimum_sample_is():
    rng = np.random.default_rng(9)
    rows = score_rows("helpfulness", "a", rng.normal(0.6, 0.2, 10)) + score_rows(
        "helpfulness", "b", rng.normal(0.6, 0.2, 10)
    )
    config = experiment(minimum_sample_size=50, primary_metric={"evaluator": "helpfulness", "target_effect": 0.1})
    row = one(experiment_results([config], frame(rows), NO_TRACES), kind="comparison")
    assert row["outcome"] == "insufficient sample" and row["mde"] > 0.2 and row["required_n"] > 50
    assert row["p_value_adjusted"] is None and row["significant"] is None
