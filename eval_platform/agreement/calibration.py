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

import numpy as np
import polars as pl

from eval_platform.agreement.humans import human_reference
from eval_platform.agreement.periods import in_window, sorted_by_date, windows
from eval_platform.agreement.rows import Rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.stats.ppi import PPIEstimate, ppi_mean

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


def human_truth(config: EvaluatorConfig, annotations: pl.DataFrame, cache: dict | None = None) -> pl.DataFrame:
    """(trace_id, score, passed): the human majority of each labelled trace in the evaluator's terms (null where
    the label says nothing of that field). Empty when the evaluator names no task or has no calibrated field."""
    if not calibrated_fields(config) or annotations.is_empty():
        return pl.DataFrame(schema=HUMAN_SCHEMA)
    options = config.human_agreement
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


def split_labelled(values: pl.DataFrame, human: pl.DataFrame, field: str) -> tuple[np.ndarray, ...]:
    """(human labels, judge values on those traces, judge values on the other traces) of `values`' (trace_id,
    value) rows; a trace whose human label says nothing of `field` counts as unlabelled."""
    labelled = human.select("trace_id", pl.col(field).alias("human")).drop_nulls("human")
    joined = values.join(labelled, on="trace_id", how="left")
    has_label = joined["human"].is_not_null().to_numpy()
    value = joined["value"].to_numpy()
    return joined["human"].to_numpy()[has_label], value[has_label], value[~has_label]


def calibrated_mean(values: pl.DataFrame, human: pl.DataFrame, field: str, alpha: float = ALPHA) -> PPIEstimate:
    """The prediction-powered mean of `values` (trace_id, value: the judge's `field`) with the human labels."""
    return ppi_mean(*split_labelled(values, human, field), alpha=alpha)


def calibrated(
    config: EvaluatorConfig,
    scores: pl.DataFrame,
    annotations: pl.DataFrame,
    rows: Rows,
    trailing_days: int,
    cache: dict | None = None,
) -> None:
    """`agreement` rows of section `calibrated`, per window (all, day, trailing) and field: the judge-only mean,
    the human-only mean of the labelled traces, and the prediction-powered mean with its 95 % interval and λ.
    `n` is the number of labelled traces (of judged traces for the judge-only mean); `details` has the number of
    judged traces, alpha and the rectifier (mean human − judge on the labelled traces)."""
    fields = calibrated_fields(config)
    human = human_truth(config, annotations, cache)
    if not fields or human.is_empty():
        return
    final = scores.filter(pl.col("is_final") & (pl.col("status") == "COMPLETED"))
    base = {
        "section": "calibrated",
        "task": config.human_agreement.task,
        "criterion": config.human_agreement.criterion,
        "subject": config.name,
        "reference": "human_majority",
        "convention": "failed_excluded",
    }
    for field in fields:
        values = sorted_by_date(final.select("date", "trace_id", pl.col(field).cast(pl.Float64).alias("value")))
        values = values.drop_nulls("value")
        if values.is_empty():
            continue
        names = FIELD_STATISTICS[field]
        for window, start, end in windows(values["date"].unique().to_list(), trailing_days):
            part = in_window(values, start, end)
            labels, judged, unlabelled = split_labelled(part, human, field)
            estimate = ppi_mean(labels, judged, unlabelled, alpha=ALPHA)
            fields_of_row = {**base, "period": window, "period_start": start, "period_end": end}
            details = json.dumps({"n_judged": part.height, "alpha": ALPHA, "rectifier": estimate.rectifier})
            judge_mean = float(part["value"].mean())
            human_mean = float(labels.mean()) if labels.size else None
            figures = (judge_mean, human_mean, estimate.mean, estimate.ci_low, estimate.ci_high, estimate.lam)
            for name, value in zip(names, figures, strict=True):
                judge_only = name == names[0]
                note = estimate.note if name.startswith("ppi") else None
                n = part.height if judge_only else labels.size
                rows.add(name, value, n, note=note, details=details, **fields_of_row)
