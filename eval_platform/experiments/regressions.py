"""Quality regressions: each evaluator's daily mean score against its own trailing baseline.

For every evaluator and trace day, the day's final completed scores are compared with those of the previous
`baseline_days` calendar days (the day itself excluded) by Welch's t-test. A day is an alert when its mean is
lower and the two-sided p-value is below alpha (so a one-sided test of a drop at alpha / 2: alerts are meant
to be rare), and both the day and the baseline have at least `min_n` scores. Higher scores are better for every
built-in evaluator (toxicity and hallucination score 1 for clean answers), so only drops alert.

Columns of `alerts` (one row per alert):

- `evaluator`, `day`: the evaluator and the trace day whose scores dropped.
- `mean`, `n`: that day's mean score and number of final completed scores.
- `baseline_mean`, `baseline_n`, `baseline_start`, `baseline_end`, `baseline_days`: the same over the window.
- `difference` = mean − baseline_mean (negative); `relative_difference` = difference / baseline_mean.
- `t_statistic`, `df` (Welch–Satterthwaite), `p_value` (two-sided Welch's t-test), `alpha`.
- `cohens_d`: the drop in pooled standard deviations; `severity` from |d|: `high` ≥ 0.8, `medium` ≥ 0.5,
  `low` below.
- `message`: one line for a notification; `detected_at`: when the table was computed (UTC).
- `human_n`, `ppi_mean`, `ppi_ci_low`, `ppi_ci_high`: where humans labelled some of the day's traces (the
  evaluator's `human_agreement` task), the day's prediction-powered mean score and its 1 − alpha interval
  (`agreement.calibration`), beside the judge's `mean`; null otherwise. The alert itself is decided on the
  judge's scores.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np
import polars as pl

from eval_platform.agreement.calibration import calibrated_mean
from eval_platform.schemas import ALERT_SCHEMA, FINAL_COMPLETED, UTC_TS, conform
from eval_platform.stats.experiments import cohens_d, welch_t_test

DEFAULT_BASELINE_DAYS = 7
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_N = 10


def daily_scores(scores: pl.DataFrame, evaluators: list[str] | None = None) -> pl.DataFrame:
    """(evaluator, date, scores: list of the day's final completed scores), sorted."""
    frame = scores.filter(FINAL_COMPLETED & pl.col("score").is_not_null())
    if evaluators is not None:
        frame = frame.filter(pl.col("evaluator").is_in(evaluators))
    return frame.group_by("evaluator", "date").agg(pl.col("score").alias("scores")).sort("evaluator", "date")


def regressions(
    scores: pl.DataFrame,
    evaluators: list[str] | None = None,
    baseline_days: int = DEFAULT_BASELINE_DAYS,
    alpha: float = DEFAULT_ALPHA,
    min_n: int = DEFAULT_MIN_N,
    baseline_days_by_evaluator: dict[str, int] | None = None,
    detected_at: datetime | None = None,
    human: dict[str, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """The `alerts` table: every (evaluator, day) whose mean score dropped significantly below its baseline.

    `scores` has `judge_scores` columns (evaluator, date, is_final, status, score); `evaluators` limits the check
    (None: all); `baseline_days_by_evaluator` overrides the window per evaluator; `human`: per evaluator, its
    human labels (`agreement.calibration.human_truth`) for the calibrated columns.
    """
    windows = baseline_days_by_evaluator or {}
    human = human or {}
    alerts = []
    # One loop step per evaluator-day (not per score): the scores stay numpy arrays.
    for (evaluator,), days in daily_scores(scores, evaluators).group_by("evaluator", maintain_order=True):
        by_day = {
            day: np.asarray(values, dtype=float) for day, values in zip(days["date"], days["scores"], strict=True)
        }
        window = windows.get(evaluator, baseline_days)
        for day, current in by_day.items():
            alert = _compare(evaluator, day, current, by_day, window, alpha, min_n)
            if alert is not None:
                if evaluator in human:  # alerts are few: the day's rows are read again only for them
                    alert |= _calibrated(scores, evaluator, day, human[evaluator], alpha)
                alerts.append(alert)
    frame = pl.DataFrame(alerts, schema={k: v for k, v in ALERT_SCHEMA.items() if k != "detected_at"})
    return conform(
        frame.with_columns(pl.lit(detected_at or datetime.now(UTC), dtype=UTC_TS).alias("detected_at")), ALERT_SCHEMA
    )


def _compare(evaluator, day, current, by_day, window, alpha, min_n) -> dict | None:
    end = date.fromisoformat(day) - timedelta(days=1)
    start = end - timedelta(days=window - 1)
    baseline_keys = [(start + timedelta(days=i)).isoformat() for i in range(window)]
    baseline = np.concatenate([by_day[k] for k in baseline_keys if k in by_day] or [np.empty(0)])
    if min(current.size, baseline.size) < max(min_n, 2):
        return None
    test = welch_t_test(baseline, current, alpha=alpha, min_n=min_n)
    difference = test.difference
    if test.p_value is None or test.p_value >= alpha or difference is None or difference >= 0:
        return None
    effect = cohens_d(baseline, current, min_n=min_n).value
    size = abs(effect) if effect is not None else 0.0
    severity = "high" if size >= 0.8 else "medium" if size >= 0.5 else "low"
    p_text = "p<0.001" if test.p_value < 0.001 else f"p={test.p_value:.3f}"
    message = (
        f"{evaluator} dropped on {day}: mean {test.mean_treatment:.3f} (n={current.size}) vs {test.mean_control:.3f} "
        f"(n={baseline.size}) over {start.isoformat()}..{end.isoformat()}: {test.difference:+.3f}, {p_text}"
    )
    return {
        "evaluator": evaluator,
        "day": day,
        "mean": test.mean_treatment,
        "n": current.size,
        "baseline_mean": test.mean_control,
        "baseline_n": baseline.size,
        "baseline_start": start.isoformat(),
        "baseline_end": end.isoformat(),
        "baseline_days": window,
        "difference": difference,
        "relative_difference": difference / test.mean_control if test.mean_control else None,
        "t_statistic": test.t,
        "df": test.df,
        "p_value": test.p_value,
        "alpha": alpha,
        "cohens_d": effect,
        "severity": severity,
        "message": message,
    }


def _calibrated(scores: pl.DataFrame, evaluator: str, day: str, human: pl.DataFrame, alpha: float) -> dict:
    day_rows = scores.filter(FINAL_COMPLETED & (pl.col("evaluator") == evaluator) & (pl.col("date") == day))
    values = day_rows.select("trace_id", pl.col("score").alias("value")).drop_nulls("value")
    estimate = calibrated_mean(values, human, "score", alpha=alpha)
    return {
        "human_n": estimate.n_labelled,
        "ppi_mean": estimate.mean,
        "ppi_ci_low": estimate.ci_low,
        "ppi_ci_high": estimate.ci_high,
    }


def latest_days(scores: pl.DataFrame, evaluators: list[str] | None = None) -> dict[str, str]:
    """Each evaluator's most recent trace day with a final completed score."""
    daily = daily_scores(scores, evaluators)
    return dict(daily.group_by("evaluator").agg(pl.col("date").max()).sort("evaluator").rows())


def current_alerts(alerts: pl.DataFrame, latest: dict[str, str]) -> pl.DataFrame:
    """The alerts on each evaluator's latest day: what the `no_quality_regression` check fails on."""
    latest_frame = pl.DataFrame(
        {"evaluator": list(latest), "day": list(latest.values())}, schema={"evaluator": pl.String, "day": pl.String}
    )
    return alerts.join(latest_frame, on=["evaluator", "day"], how="semi")
