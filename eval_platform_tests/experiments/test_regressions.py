"""Regression alerts: a day's mean score against its trailing baseline, checked against scipy."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import polars as pl
import pytest
from scipy import stats

from eval_platform.experiments.regressions import (
    current_alerts,
    latest_days,
    regressions,
)
from eval_platform.schemas import ALERT_SCHEMA

START = date(2026, 11, 1)


def day(i: int) -> str:
    return (START + timedelta(days=i)).isoformat()


def scores(daily: dict[str, list[np.ndarray]]) -> pl.DataFrame:
    """Final completed rows: daily[evaluator][i] are the scores of day i."""
    frames = [
        pl.DataFrame({"evaluator": evaluator, "date": day(i), "score": values})
        for evaluator, days in daily.items()
        for i, values in enumerate(days)
    ]
    return pl.concat(frames).with_columns(is_final=pl.lit(True), status=pl.lit("COMPLETED"))


def noise(rng, days: int, mean: float = 0.6, n: int = 40) -> list[np.ndarray]:
    return [np.clip(rng.normal(mean, 0.15, n), 0, 1) for _ in range(days)]


def test_a_drop_fires_with_welch_figures_from_scipy():
    rng = np.random.default_rng(3)
    history = noise(rng, 10)
    history[9] = np.clip(rng.normal(0.45, 0.15, 40), 0, 1)
    alerts = regressions(scores({"helpfulness": history}))
    assert alerts.schema == pl.Schema(ALERT_SCHEMA)
    row = alerts.filter(pl.col("day") == day(9)).row(0, named=True)
    baseline = np.concatenate(history[2:9])  # the 7 days before day 9
    peer = stats.ttest_ind(history[9], baseline, equal_var=False)
    assert (row["t_statistic"], row["df"], row["p_value"]) == pytest.approx(
        (peer.statistic, peer.df, peer.pvalue), rel=1e-10
    )
    assert (row["mean"], row["baseline_mean"]) == pytest.approx((history[9].mean(), baseline.mean()))
    assert (row["n"], row["baseline_n"], row["baseline_days"]) == (40, 280, 7)
    assert (row["baseline_start"], row["baseline_end"]) == (day(2), day(8))
    assert row["difference"] == pytest.approx(history[9].mean() - baseline.mean())
    pooled = np.sqrt((39 * history[9].var(ddof=1) + 279 * baseline.var(ddof=1)) / 318)
    assert row["cohens_d"] == pytest.approx((history[9].mean() - baseline.mean()) / pooled)
    size = abs(row["cohens_d"])
    assert row["severity"] == ("high" if size >= 0.8 else "medium" if size >= 0.5 else "low")
    assert row["message"].startswith(f"helpfulness dropped on {day(9)}: mean ")
    assert f"over {day(2)}..{day(8)}: -0." in row["message"] and row["message"].endswith("p<0.001")


def test_noise_alerts_at_about_half_alpha():
    """Two-sided p < alpha and a lower mean: a one-sided false-alarm rate of alpha / 2 on pure noise."""
    rng = np.random.default_rng(11)
    daily = {f"evaluator_{k}": noise(rng, 9) for k in range(150)}
    alerts = regressions(scores(daily), alpha=0.05)
    tests = 150 * 8  # every day but the first has a baseline
    assert 0.01 < alerts.height / tests < 0.045
    assert (alerts["difference"] < 0).all() and (alerts["p_value"] < 0.05).all()


def test_steady_scores_and_rises_do_not_alert():
    rng = np.random.default_rng(5)
    steady = noise(rng, 8)
    rising = noise(rng, 7) + [np.clip(rng.normal(0.9, 0.05, 40), 0, 1)]
    alerts = regressions(scores({"steady": steady, "rising": rising}))
    assert alerts.filter(pl.col("evaluator") == "rising").height == 0
    assert regressions(scores({"steady": steady})).filter(pl.col("day") == day(7)).height == 0


def test_only_the_trailing_window_is_the_baseline():
    # High for three days, then a lower level that stays: the step alerts once, the new level is the new normal.
    rng = np.random.default_rng(8)
    history = noise(rng, 3, mean=0.85) + noise(rng, 7, mean=0.5)
    alerts = regressions(scores({"quality": history}), baseline_days=3)
    assert day(3) in alerts["day"].to_list()
    assert day(9) not in alerts["day"].to_list()
    # With a window reaching back to the high days, the last day still looks like a drop.
    overrides = regressions(scores({"quality": history}), baseline_days=3, baseline_days_by_evaluator={"quality": 9})
    assert day(9) in overrides["day"].to_list() and set(overrides["baseline_days"]) == {9}


def test_small_days_are_not_tested():
    rng = np.random.default_rng(2)
    history = noise(rng, 7) + [np.full(5, 0.1)]
    assert regressions(scores({"quality": history}), min_n=10).height == 0
    assert regressions(scores({"quality": history}), min_n=5)["day"].to_list() == [day(7)]


def test_only_final_completed_scores_count():
    rng = np.random.default_rng(4)
    frame = scores({"quality": noise(rng, 8)})
    bad_day = pl.DataFrame(
        {"evaluator": "quality", "date": day(7), "score": [0.0] * 40, "is_final": False, "status": "COMPLETED"}
    )
    assert regressions(pl.concat([frame, bad_day])).filter(pl.col("day") == day(7)).height == 0


def test_latest_day_alerts_are_what_the_check_fails_on():
    rng = np.random.default_rng(6)
    early_drop = noise(rng, 8)
    early_drop[4] = np.full(40, 0.1)
    late_drop = noise(rng, 8)
    late_drop[7] = np.full(40, 0.1) + rng.normal(0, 0.01, 40)
    frame = scores({"early": early_drop, "late": late_drop})
    alerts = regressions(frame)
    assert {("early", day(4)), ("late", day(7))} <= set(alerts.select("evaluator", "day").rows())
    latest = latest_days(frame)
    assert latest == {"early": day(7), "late": day(7)}
    assert current_alerts(alerts, latest).select("evaluator", "day").rows() == [("late", day(7))]


def test_empty_input_gives_an_empty_typed_table():
    empty = pl.DataFrame(
        schema={
            "evaluator": pl.String,
            "date": pl.String,
            "score": pl.Float64,
            "is_final": pl.Boolean,
            "status": pl.String,
        }
    )
    assert regressions(empty).schema == pl.Schema(ALERT_SCHEMA)
    assert latest_days(empty) == {}


def test_an_alert_carries_the_days_human_calibrated_mean():
    """A judge 0.1 too generous on a day that dropped, 40 of its 200 traces labelled by humans: the alert row shows
    the prediction-powered mean of the day (equal to ppi-python) beside the judge's mean."""
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(9)
    history = noise(rng, 10, n=200)
    truth = np.clip(rng.normal(0.35, 0.15, 200), 0, 1)
    history[9] = np.clip(truth + 0.1 + rng.normal(0, 0.03, 200), 0, 1)
    frame = scores({"helpfulness": history}).with_columns(
        trace_id=pl.format("{}-{}", pl.col("date"), pl.int_range(pl.len()).over("date"))
    )
    labelled = [f"{day(9)}-{i}" for i in range(40)]
    human = {"helpfulness": pl.DataFrame({"trace_id": labelled, "score": truth[:40], "passed": [None] * 40})}
    alerts = regressions(frame, human=human)
    row = alerts.filter(pl.col("day") == day(9)).row(0, named=True)
    point = float(np.squeeze(ppi_py.ppi_mean_pointestimate(truth[:40], history[9][:40], history[9][40:])))
    low, high = ppi_py.ppi_mean_ci(truth[:40], history[9][:40], history[9][40:], alpha=0.05)
    assert row["human_n"] == 40 and row["ppi_mean"] == pytest.approx(point, abs=1e-9)
    assert (row["ppi_ci_low"], row["ppi_ci_high"]) == pytest.approx((float(low[0]), float(high[0])), abs=1e-9)
    assert row["ppi_mean"] < row["mean"]  # the judge's generosity taken out
    assert alerts.filter(pl.col("day") != day(9))["ppi_mean"].null_count() == alerts.height - 1
