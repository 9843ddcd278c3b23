"""Human-calibrated judge figures: an evaluator's mean score and pass rate corrected by the human labels of a subset
of its traces (prediction-powered inference, `eval_platform.stats.ppi`).

The human label of a trace is the majority of the task its `human_agreement` names (`humans.human_reference`),
put in the judge's own terms: a rating on the evaluator's `score_scale` normalized to 0..1 as the judge's raw
score is; a `true` / `false` label as a pass (1) or a fail (0); a categorical label as the score the evaluator maps
it to. Labels that are none of these are left out. Pairwise and n-wise evaluators (relative scores) have none.

The labelled traces pair each human label with the judge's verdict; the judge's verdicts on every other trace of
the same window are the unlabelled set. Only final COMPLETED verdicts count, as in every judge figure.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import polars as pl

from eval_platform.agreement.humans import human_reference
from eval_platform.agreement.periods import in_window, period_windows, sorted_by_date
from eval_platform.agreement.rows import Rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import FINAL_COMPLETED
from eval_platform.stats.ppi import Moments, PPIEstimate, ppi_mean, ppi_mean_of_moments

ALPHA = 0.05  # the agreement table's calibrated intervals are 95 %
HUMAN_SCHEMA = {"trace_id": pl.String(), "score": pl.Float64(), "passed": pl.Float64()}
# (field, statistic names: judge-only, human-only, calibrated, its interval, its lambda)
FIELD_STATISTICS = {
    "score": ("judge_mean", "human_mean", "ppi_mean", "ppi_ci_low", "ppi_ci_high", "ppi_lambda"),
    "passed": (
        "judge_pass_rate",
        "human_pass_rate",
        "ppi_pass_rate",
        "ppi_pass_rate_ci_low",
        "ppi_pass_rate_ci_high",
        "ppi_pass_rate_lambda",
    ),
}


def calibrated_fields(config: EvaluatorConfig | None) -> tuple[str, ...]:
    """The judge_scores fields a human label calibrates for this evaluator: `score`, and `passed` for pass/fail."""
    if config is None or config.human_agreement is None or config.judge_mode.relative:
        return ()
    return ("score", "passed") if config.judge_mode.vote_column == "passed" else ("score",)


def human_truth(
    config: EvaluatorConfig, annotations: pl.DataFrame | pl.LazyFrame, cache: dict | None = None
) -> pl.DataFrame:
    """(trace_id, score, passed): the human majority of each labelled trace in the evaluator's terms (null where
    the label says nothing of that field). Empty when the evaluator names no task or has no calibrated field.
    `annotations` may be a lazy scan (out of core): the task's rows are read by `human_reference`."""
    if not calibrated_fields(config) or (isinstance(annotations, pl.DataFrame) and annotations.is_empty()):
        return pl.DataFrame(schema=HUMAN_SCHEMA)
    options = config.human_agreement
    assert options is not None  # calibrated_fields is empty without it
    reference = human_reference(annotations, options.task, options.criterion, cache).filter(
        pl.col("trace_id").is_not_null()
    )
    score, passed = verdict_values(config, pl.col("label"), pl.col("value"))
    return reference.select("trace_id", score.alias("score"), passed.alias("passed"))


def verdict_values(config: EvaluatorConfig, label: pl.Expr, value: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(score, passed) in the judge's terms of a verdict given outside the judge (a human label, an anchor's
    expected verdict): a rating `value` on the score_scale normalized to 0..1; a `true` / `false` label as 1 / 0
    (score and passed); a categorical label as the score the evaluator maps it to. Null where it is none of these."""
    label = label.cast(pl.String).str.strip_chars().str.to_lowercase()
    if config.judge_mode.agreement == "scores":
        scale = config.score_scale
        assert scale is not None  # a scores evaluator has its scale once loaded (defaulted or required)
        score = (value - scale.min) / (scale.max - scale.min)
        passed = pl.lit(None, pl.Float64)
    elif config.judge_mode.vote_column == "passed":
        passed = pl.when(label == "true").then(1.0).when(label == "false").then(0.0)
        score = passed
    else:
        mapping = {k.lower(): v for k, v in (config.labels or {}).items()}
        score = label.replace_strict(mapping, default=None, return_dtype=pl.Float64)
        passed = pl.lit(None, pl.Float64)
    return score.cast(pl.Float64), passed.cast(pl.Float64)


def labelled_traces(human: pl.DataFrame, field: str) -> pl.Series:
    """The traces whose human label says something of `field`: the others count as unlabelled."""
    return human.drop_nulls(field)["trace_id"]


def split_labelled_rows(values: pl.DataFrame, human: pl.DataFrame, field: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(labelled, unlabelled) rows of `values` (trace_id, ...): those whose trace is one of `labelled_traces`, and
    the others (a null trace_id among them)."""
    has_label = pl.col("trace_id").is_in(labelled_traces(human, field).implode()).fill_null(False)
    return values.filter(has_label), values.filter(~has_label)


def with_labels(labelled: pl.DataFrame, human: pl.DataFrame, field: str) -> pl.DataFrame:
    """`labelled` rows with their trace's human label of `field` beside, as `human` (a row once per label)."""
    return labelled.join(human.select("trace_id", pl.col(field).alias("human")).drop_nulls("human"), on="trace_id")


def split_labelled(values: pl.DataFrame, human: pl.DataFrame, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(human labels, judge values on those traces, judge values on the other traces) of `values`' (trace_id,
    value) rows; a trace whose human label says nothing of `field` counts as unlabelled."""
    labelled, unlabelled = split_labelled_rows(values, human, field)
    paired = with_labels(labelled, human, field)
    return paired["human"].to_numpy(), paired["value"].to_numpy(), unlabelled["value"].to_numpy()


def calibrated_mean(values: pl.DataFrame, human: pl.DataFrame, field: str, alpha: float = ALPHA) -> PPIEstimate:
    """The prediction-powered mean of `values` (trace_id, value: the judge's `field`) with the human labels."""
    return ppi_mean(*split_labelled(values, human, field), alpha=alpha)


def daily_moments(values: pl.DataFrame) -> pl.DataFrame:
    """(date, n, mean, m2) of `values` (date, value) per date: what `OutOfCoreScores.daily_moments` computes in
    DuckDB, here in memory."""
    value = pl.col("value")
    return values.group_by("date").agg(
        pl.len().alias("n"), value.mean().alias("mean"), ((value - value.mean()) ** 2).sum().alias("m2")
    )


def _window_moments(days: dict[str | None, Moments], start: str | None, end: str | None) -> Moments:
    """The moments of the days start..end (every day, undated included, for the `all` window), in date order."""
    total = Moments()
    for day in sorted(days, key=lambda d: (d is None, d)):
        if start is None or (day is not None and end is not None and start <= day <= end):
            total += days[day]
    return total


UnlabelledMoments = Callable[[str, pl.Series], pl.DataFrame]


def calibrated(
    config: EvaluatorConfig,
    scores: pl.DataFrame,
    annotations: pl.DataFrame | pl.LazyFrame,
    rows: Rows,
    trailing_days: int,
    cache: dict | None = None,
    unlabelled_moments: UnlabelledMoments | None = None,
) -> None:
    """`agreement` rows of section `calibrated`, per window (all, day, trailing) and field: the judge-only mean,
    the human-only mean of the labelled traces, and the prediction-powered mean with its 95 % interval and λ.
    `n` is the number of labelled traces (of judged traces for the judge-only mean); `details` has the number of
    judged traces, alpha and the rectifier (mean human − judge on the labelled traces).

    `scores` are the evaluator's rows, all of them; or, out of core, only those whose trace the human reference has,
    with `unlabelled_moments(field, labelled traces)` giving (date, n, mean, m2) per date of the final COMPLETED
    non-null `field` values of the other traces (`OutOfCoreScores.daily_moments`). Either way a window's
    unlabelled set enters by the sum of its days' `Moments` (`ppi_mean_of_moments`), the same figures."""
    fields = calibrated_fields(config)
    human = human_truth(config, annotations, cache)
    if not fields or human.is_empty() or config.human_agreement is None:  # no fields without human_agreement
        return
    final = scores.filter(FINAL_COMPLETED)
    base = {
        "section": "calibrated",
        "task": config.human_agreement.task,
        "criterion": config.human_agreement.criterion,
        "subject": config.name,
        "reference": "human_majority",
        "convention": "failed_excluded",
    }
    for field in fields:
        values = final.select("date", "trace_id", pl.col(field).cast(pl.Float64).alias("value")).drop_nulls("value")
        labelled, unlabelled = split_labelled_rows(values, human, field)
        if unlabelled_moments is None:
            per_day = daily_moments(unlabelled)
        else:
            per_day = unlabelled_moments(field, labelled_traces(human, field))
        days = {d: Moments(n, m, m2) for d, n, m, m2 in per_day.select("date", "n", "mean", "m2").iter_rows() if n}
        if labelled.is_empty() and not days:
            continue
        paired = sorted_by_date(with_labels(labelled, human, field))
        labelled = sorted_by_date(labelled)
        names = FIELD_STATISTICS[field]
        dates = list(days) + labelled["date"].unique().to_list()
        for start, end, fields_of_row in period_windows(dates, trailing_days, base):
            part = in_window(paired, start, end)
            labels, judged = part["human"].to_numpy(), part["value"].to_numpy()
            others = _window_moments(days, start, end)
            estimate = ppi_mean_of_moments(labels, judged, others, alpha=ALPHA)
            judged_all = Moments.of(in_window(labelled, start, end)["value"].to_numpy()) + others  # each row once
            details = json.dumps({"n_judged": judged_all.n, "alpha": ALPHA, "rectifier": estimate.rectifier})
            human_mean = float(labels.mean()) if labels.size else None
            figures = (judged_all.mean, human_mean, estimate.mean, estimate.ci_low, estimate.ci_high, estimate.lam)
            for name, value in zip(names, figures, strict=True):
                judge_only = name == names[0]
                note = estimate.note if name.startswith("ppi") else None
                n = judged_all.n if judge_only else labels.size
                rows.add(name, value, n, note=note, details=details, **fields_of_row)
