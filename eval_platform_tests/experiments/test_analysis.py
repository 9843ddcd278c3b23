"""`experiment_results` over constructed judge scores: every statistic is recomputed here with scipy, the
pairwise figures by hand."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest
from scipy import integrate, stats

from eval_platform.experiments.analysis import experiment_results
from eval_platform.experiments.config import ExperimentConfig
from eval_platform.schemas import EXPERIMENT_RESULT_SCHEMA

DAY = "2026-11-09"


def score_rows(evaluator: str, variant: str, values, day: str = DAY, experiment_id: str = "exp", field: str = "score"):
    return [
        {
            "evaluator": evaluator,
            "date": day,
            "trace_id": f"{evaluator}-{variant}-{day}-{i}",
            "trace_id_b": None,
            "is_final": True,
            "status": "COMPLETED",
            "score": float(v) if field == "score" else None,
            "passed": bool(v) if field == "passed" else None,
            "winner": None,
            "experiment_id": experiment_id,
            "variant": variant,
        }
        for i, v in enumerate(values)
    ]


def frame(rows) -> pl.DataFrame:
    return pl.DataFrame(rows, infer_schema_length=None)


NO_TRACES = pl.DataFrame(schema={"trace_id": pl.String, "experiment_id": pl.String, "variant": pl.String})


def experiment(**fields) -> ExperimentConfig:
    base = {
        "name": "exp",
        "experiment_id": "exp",
        "control": "a",
        "treatments": ["b"],
        "primary_metric": {"evaluator": "helpfulness"},
        "minimum_sample_size": 5,
    }
    return ExperimentConfig.model_validate({**base, **fields})


def one(results: pl.DataFrame, **where) -> dict:
    rows = results.filter(**where)
    assert rows.height == 1, rows
    return rows.row(0, named=True)


RNG = np.random.default_rng(7)
CONTROL = RNG.normal(0.50, 0.15, 60)
TREATED = RNG.normal(0.62, 0.20, 45)


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_frequentist_comparison_matches_scipy(alpha):
    noise = [  # neither a final verdict nor completed: never counted
        {**score_rows("helpfulness", "b", [0.0])[0], "trace_id": "member", "is_final": False},
        {**score_rows("helpfulness", "b", [0.0])[0], "trace_id": "failed", "status": "FAILED"},
        *score_rows("helpfulness", "b", [0.0] * 5, experiment_id="another experiment"),
        *score_rows("helpfulness", "z", [0.0] * 5),  # not a variant of the experiment
    ]
    scores = frame(score_rows("helpfulness", "a", CONTROL) + score_rows("helpfulness", "b", TREATED) + noise)
    results = experiment_results([experiment(alpha=alpha)], scores, NO_TRACES)
    assert results.schema == pl.Schema(EXPERIMENT_RESULT_SCHEMA)

    peer = stats.ttest_ind(TREATED, CONTROL, equal_var=False)
    interval = peer.confidence_interval(1 - alpha)
    row = one(results, kind="comparison", metric="helpfulness.score")
    assert (row["n"], row["n_control"]) == (45, 60)
    assert row["difference"] == pytest.approx(TREATED.mean() - CONTROL.mean(), rel=1e-12)
    assert (row["t_statistic"], row["df"], row["p_value"]) == pytest.approx(
        (peer.statistic, peer.df, peer.pvalue), rel=1e-10
    )
    assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((interval.low, interval.high), rel=1e-10)
    pooled = np.sqrt((44 * TREATED.var(ddof=1) + 59 * CONTROL.var(ddof=1)) / 103)
    d = (TREATED.mean() - CONTROL.mean()) / pooled
    assert row["cohens_d"] == pytest.approx(d, rel=1e-10)
    assert row["effect_interpretation"] == ("large" if d >= 0.8 else "medium" if d >= 0.5 else "small")
    assert row["prob_improvement"] is None and row["expected_loss"] is None  # frequentist only
    assert row["significant"] is True and row["outcome"] == "better" and row["insufficient_sample"] is False
    p_text = "p<0.001" if peer.pvalue < 0.001 else f"p={peer.pvalue:.3f}"
    assert row["recommendation"] == (
        f"ship b: helpfulness.score improved significantly ({row['difference']:+.3f}, {p_text}) "
        "and there are no guardrails"
    )

    for variant, values in (("a", CONTROL), ("b", TREATED)):
        summary = one(results, kind="variant", variant=variant)
        low, high = stats.t.interval(1 - alpha, values.size - 1, loc=values.mean(), scale=stats.sem(values))
        assert (summary["n"], summary["mean"], summary["std"]) == pytest.approx(
            (values.size, values.mean(), values.std(ddof=1))
        )
        assert (summary["ci_low"], summary["ci_high"]) == pytest.approx((low, high), rel=1e-10)
    assert (row["start_date"], row["end_date"]) == (DAY, DAY)


def test_insufficient_sample_gives_no_statistics_and_says_so():
    scores = frame(score_rows("helpfulness", "a", CONTROL[:40]) + score_rows("helpfulness", "b", TREATED[:12]))
    results = experiment_results([experiment(minimum_sample_size=30)], scores, NO_TRACES)
    row = one(results, kind="comparison")
    assert row["insufficient_sample"] is True and row["outcome"] == "insufficient sample"
    assert (
        row["p_value"] is None and row["t_statistic"] is None and row["cohens_d"] is None and row["significant"] is None
    )
    assert row["recommendation"] == "insufficient sample: 12 < 30 per variant (b: 12, a: 40)"
    assert row["difference"] == pytest.approx(TREATED[:12].mean() - CONTROL[:40].mean())  # still described
    assert one(results, kind="variant", variant="b")["insufficient_sample"] is True
    assert one(results, kind="variant", variant="a")["insufficient_sample"] is False


def test_a_variant_without_data_is_listed_with_n_zero():
    scores = frame(score_rows("helpfulness", "a", CONTROL))
    results = experiment_results([experiment()], scores, NO_TRACES)
    assert one(results, kind="variant", variant="b")["n"] == 0
    assert one(results, kind="comparison")["recommendation"] == "insufficient sample: 0 < 5 per variant (b: 0, a: 60)"


def test_no_significant_difference():
    values = RNG.normal(0.5, 0.1, 80)
    scores = frame(score_rows("helpfulness", "a", values[:40]) + score_rows("helpfulness", "b", values[40:]))
    row = one(experiment_results([experiment()], scores, NO_TRACES), kind="comparison")
    peer = stats.ttest_ind(values[40:], values[:40], equal_var=False)
    assert peer.pvalue > 0.05 and row["p_value"] == pytest.approx(peer.pvalue)
    assert row["outcome"] == "no significant difference" and row["significant"] is False
    assert row["recommendation"].startswith("no significant difference in helpfulness.score (")
    assert row["recommendation"].endswith("): keep a")


def test_direction_decrease_turns_a_lower_mean_into_an_improvement():
    scores = frame(score_rows("latency", "a", CONTROL) + score_rows("latency", "b", TREATED))
    config = experiment(primary_metric={"evaluator": "latency", "direction": "decrease"}, method="both")
    row = one(experiment_results([config], scores, NO_TRACES), kind="comparison")
    assert row["difference"] > 0 and row["outcome"] == "worse" and row["significant"] is True
    assert row["prob_improvement"] < 0.01
    assert row["recommendation"].startswith("keep a: latency.score is significantly worse with b (+0.")


def guardrail_scores(treated_toxicity) -> pl.DataFrame:
    return frame(
        score_rows("helpfulness", "a", CONTROL)
        + score_rows("helpfulness", "b", TREATED)
        + score_rows("toxicity", "a", RNG.normal(0.9, 0.05, 60))
        + score_rows("toxicity", "b", treated_toxicity)
    )


def test_a_failed_guardrail_blocks_shipping():
    scores = guardrail_scores(RNG.normal(0.8, 0.05, 50))
    config = experiment(guardrails=[{"evaluator": "toxicity", "must_not_be_significantly_worse": True}])
    results = experiment_results([config], scores, NO_TRACES)
    guard = one(results, kind="comparison", metric="toxicity.score")
    assert guard["metric_role"] == "guardrail" and guard["outcome"] == "worse" and guard["guardrail_passed"] is False
    assert guard["guardrail_rule"] == "not significantly worse"
    primary = one(results, kind="comparison", metric="helpfulness.score")
    assert primary["recommendation"].startswith("do not ship b: helpfulness.score improved significantly (+0.1")
    assert re.search(
        r"but guardrails failed: toxicity\.score \(-0\.\d{3}, p<0\.001; rule: not significantly worse\)$",
        primary["recommendation"],
    )
    assert primary["guardrail_passed"] is None  # the primary metric is not a guardrail


def test_max_degradation_is_a_non_inferiority_margin():
    # A 0.01 drop: within a 0.05 margin once the interval is narrow, but not with a 0.005 margin.
    control, treated = RNG.normal(0.9, 0.02, 200), RNG.normal(0.89, 0.02, 200)
    scores = frame(
        score_rows("helpfulness", "a", CONTROL)
        + score_rows("helpfulness", "b", TREATED)
        + score_rows("toxicity", "a", control)
        + score_rows("toxicity", "b", treated)
    )
    interval = stats.ttest_ind(treated, control, equal_var=False).confidence_interval(0.95)
    assert -interval.low < 0.05 and -interval.low > 0.005
    for margin, passed in ((0.05, True), (0.005, False)):
        config = experiment(guardrails=[{"evaluator": "toxicity", "max_degradation": margin}])
        results = experiment_results([config], scores, NO_TRACES)
        assert one(results, kind="comparison", metric="toxicity.score")["guardrail_passed"] is passed
        text = one(results, kind="comparison", metric="helpfulness.score")["recommendation"]
        assert text.startswith("ship b") if passed else text.startswith("do not ship b")
    ship = one(
        experiment_results(
            [experiment(guardrails=[{"evaluator": "toxicity", "max_degradation": 0.05}])], scores, NO_TRACES
        ),
        kind="comparison",
        metric="helpfulness.score",
    )
    assert ship["recommendation"].endswith("and all guardrails passed")


def test_a_guardrail_without_enough_data_holds_the_decision():
    scores = guardrail_scores(RNG.normal(0.9, 0.05, 3))
    config = experiment(guardrails=[{"evaluator": "toxicity", "max_degradation": 0.1}])
    results = experiment_results([config], scores, NO_TRACES)
    assert one(results, kind="comparison", metric="toxicity.score")["guardrail_passed"] is None
    assert one(results, kind="comparison", metric="helpfulness.score")["recommendation"].startswith(
        "hold b: helpfulness.score improved significantly"
    )


def test_bayesian_mean_comparison_reports_posterior_figures():
    scores = frame(score_rows("helpfulness", "a", CONTROL) + score_rows("helpfulness", "b", TREATED))
    row = one(experiment_results([experiment(method="bayesian")], scores, NO_TRACES), kind="comparison")
    assert row["p_value"] is None and row["diff_ci_low"] is None
    # Under the non-informative prior each mean's posterior is x̄ + s/√n · t(n−1): P(μb > μa) by quadrature.
    post_a = stats.t(CONTROL.size - 1, loc=CONTROL.mean(), scale=stats.sem(CONTROL))
    post_b = stats.t(TREATED.size - 1, loc=TREATED.mean(), scale=stats.sem(TREATED))
    probability = integrate.quad(lambda x: post_a.pdf(x) * post_b.sf(x), 0, 1.2, limit=200)[0]
    assert row["prob_improvement"] == pytest.approx(probability, abs=0.002)
    assert row["expected_lift"] == pytest.approx(TREATED.mean() - CONTROL.mean(), rel=1e-12)
    assert row["credible_low"] < row["expected_lift"] < row["credible_high"]
    assert 0 <= row["expected_loss"] < 0.001
    assert row["outcome"] == "better" and row["recommendation"].startswith(
        "ship b: helpfulness.score improved significantly (+0."
    )
    assert "P(better)=" in row["recommendation"] and "p=" not in row["recommendation"]


def test_pass_rates_use_wilson_intervals_and_the_beta_binomial_posterior():
    control = [1] * 30 + [0] * 20
    treated = [1] * 40 + [0] * 10
    scores = frame(
        score_rows("strict", "a", control, field="passed") + score_rows("strict", "b", treated, field="passed")
    )
    config = experiment(primary_metric={"evaluator": "strict", "field": "passed"}, method="both")
    results = experiment_results([config], scores, NO_TRACES)
    summary = one(results, kind="variant", variant="a")
    centre, z = (30 + 1.959964**2 / 2) / (50 + 1.959964**2), 1.959964
    half = z * np.sqrt(50 * 0.6 * 0.4 + z**2 / 4) / (50 + z**2)
    assert summary["mean"] == pytest.approx(0.6) and (summary["ci_low"], summary["ci_high"]) == pytest.approx(
        (centre - half, centre + half), rel=1e-5
    )
    row = one(results, kind="comparison")
    probability = integrate.quad(lambda x: stats.beta(31, 21).pdf(x) * stats.beta(41, 11).sf(x), 0, 1)[0]
    assert row["prob_improvement"] == pytest.approx(probability, abs=1e-9)
    assert row["expected_lift"] == pytest.approx(41 / 52 - 31 / 52)
    assert row["p_value"] == pytest.approx(stats.ttest_ind(treated, control, equal_var=False).pvalue)


def test_window_and_experiment_id_select_the_rows():
    scores = frame(
        score_rows("helpfulness", "a", CONTROL)
        + score_rows("helpfulness", "b", TREATED)
        + score_rows("helpfulness", "a", [0.0] * 10, day="2026-11-01")
        + score_rows("helpfulness", "b", [1.0] * 10, day="2026-12-01")
    )
    results = experiment_results([experiment(start_date="2026-11-05", end_date="2026-11-30")], scores, NO_TRACES)
    assert (one(results, kind="variant", variant="a")["n"], one(results, kind="variant", variant="b")["n"]) == (60, 45)
    assert set(results["start_date"]) == {"2026-11-05"} and set(results["end_date"]) == {"2026-11-30"}
    everything = experiment_results([experiment(experiment_id=None)], scores, NO_TRACES)
    assert one(everything, kind="variant", variant="a")["n"] == 70
    assert (everything["start_date"][0], everything["end_date"][0]) == ("2026-11-01", "2026-12-01")


def test_no_experiments_gives_an_empty_typed_table():
    results = experiment_results([], frame(score_rows("helpfulness", "a", [0.5])), NO_TRACES)
    assert results.height == 0 and results.schema == pl.Schema(EXPERIMENT_RESULT_SCHEMA)


# --- pairwise: win rates and Bradley–Terry -------------------------------------------------------------------


def pairwise_fixture():
    """Variants a, b, c. a–b: a wins 6, b wins 2, 2 ties. a–c: a wins 3, c wins 3. b–c: c wins 4, b wins 1.
    The verdict rows carry a wrong `variant`: both sides' variants must come from `traces`."""
    games = [("a", "b", "A")] * 6 + [("a", "b", "B")] * 2 + [("b", "a", "tie")] * 2
    games += [("c", "a", "A")] * 3 + [("a", "c", "A")] * 3
    games += [("b", "c", "B")] * 4 + [("c", "b", "B")] * 1
    games += [("a", "a", "A")]  # a variant against itself says nothing
    traces, rows = [], []
    for i, (left, right, winner) in enumerate(games):
        traces += [
            {"trace_id": f"t{i}a", "experiment_id": "exp", "variant": left},
            {"trace_id": f"t{i}b", "experiment_id": "exp", "variant": right},
        ]
        rows.append(
            {
                "evaluator": "preference",
                "date": DAY,
                "trace_id": f"t{i}a",
                "trace_id_b": f"t{i}b",
                "is_final": True,
                "status": "COMPLETED",
                "score": None,
                "passed": None,
                "winner": winner,
                "experiment_id": "exp",
                "variant": "wrong",
            }
        )
    rows.append({**rows[0], "status": "FAILED", "winner": None})
    rows.append({**rows[0], "is_final": False, "winner": "B"})
    return frame(rows), pl.DataFrame(traces)


def test_win_rates_and_head_to_head_by_hand():
    scores, traces = pairwise_fixture()
    config = experiment(treatments=["b", "c"], pairwise_evaluator="preference", minimum_sample_size=12)
    results = experiment_results([config], scores, traces).filter(pl.col("kind") == "win_rate")
    assert set(results["metric"]) == {"preference.winner"} and set(results["metric_role"]) == {"pairwise"}
    overall = {r["variant"]: r for r in results.filter(pl.col("opponent").is_null()).iter_rows(named=True)}
    # a: vs b 6W 2L 2T, vs c 3W 3L → 9W 5L 2T of 16; b: 2W 6L 2T + 1W 4L → 3W 10L 2T of 15;
    # c: 3W 3L + 4W 1L → 7W 4L of 11
    expected = {"a": (9, 5, 2, 16), "b": (3, 10, 2, 15), "c": (7, 4, 0, 11)}
    for variant, (wins, losses, ties, n) in expected.items():
        row = overall[variant]
        assert (row["wins"], row["losses"], row["ties"], row["n"]) == (wins, losses, ties, n)
        rate = (wins + ties / 2) / n
        assert row["win_rate"] == pytest.approx(rate)
        z = stats.norm.ppf(0.975)
        centre = (rate + z**2 / (2 * n)) / (1 + z**2 / n)
        half = z / (1 + z**2 / n) * np.sqrt(rate * (1 - rate) / n + z**2 / (4 * n**2))
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((centre - half, centre + half))
        assert row["insufficient_sample"] is (n < 12)
        assert row["significant"] is bool(centre - half > 0.5 or centre + half < 0.5)

    duel = {r["variant"]: r for r in results.filter(pl.col("opponent") == "a").iter_rows(named=True)}
    assert (duel["b"]["wins"], duel["b"]["losses"], duel["b"]["ties"], duel["b"]["win_rate"]) == (2, 6, 2, 0.3)
    assert (duel["c"]["wins"], duel["c"]["losses"], duel["c"]["win_rate"]) == (3, 3, 0.5)


def test_bradley_terry_strengths_are_the_maximum_likelihood_solution():
    scores, traces = pairwise_fixture()
    config = experiment(treatments=["b", "c"], pairwise_evaluator="preference")
    ranking = experiment_results([config], scores, traces).filter(pl.col("kind") == "bradley_terry")
    strength = dict(zip(ranking["variant"], ranking["strength"], strict=True))
    assert sum(strength.values()) == pytest.approx(1.0)
    # The MLE solves, for every variant, (its points) = Σ_j games_ij · p_i / (p_i + p_j); ties are half a point.
    games = {("a", "b"): 10, ("a", "c"): 6, ("b", "c"): 5}
    points = {"a": 7 + 3, "b": 3 + 1, "c": 3 + 4}
    for variant in "abc":
        expected = sum(
            n * strength[variant] / (strength[variant] + strength[other])
            for pair, n in games.items()
            if variant in pair
            for other in pair
            if other != variant
        )
        assert points[variant] == pytest.approx(expected, rel=1e-7)
    assert ranking["rank"].to_list() == [1, 2, 3]
    assert ranking["strength"].is_sorted(descending=True)  # the rows come best first


def test_bradley_terry_with_two_variants_is_the_win_share_and_equal_strengths_share_a_rank():
    scores, traces = pairwise_fixture()
    two = experiment(treatments=["c"], pairwise_evaluator="preference")  # only a–c games: 3 wins each
    ranking = experiment_results([two], scores, traces).filter(pl.col("kind") == "bradley_terry")
    assert ranking["strength"].to_list() == pytest.approx([0.5, 0.5])
    assert ranking["rank"].to_list() == [1, 1]
    one_sided = experiment(control="b", treatments=["c"], pairwise_evaluator="preference")  # b–c: c 4, b 1
    ranking = experiment_results([one_sided], scores, traces).filter(pl.col("kind") == "bradley_terry").sort("variant")
    assert ranking["strength"].to_list() == pytest.approx([0.2, 0.8])


def test_constant_scores_give_no_decision_instead_of_an_error():
    scores = frame(score_rows("helpfulness", "a", [1.0] * 10) + score_rows("helpfulness", "b", [1.0] * 10))
    row = one(experiment_results([experiment()], scores, NO_TRACES), kind="comparison")
    assert row["outcome"] == "undefined" and row["significant"] is None and row["p_value"] is None
    assert row["recommendation"] == "no decision: helpfulness.score cannot be tested (both groups have zero variance)"
