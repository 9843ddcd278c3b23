"""`experiment_results`: one long table per run, over every experiment, metric and variant.

Only final, completed verdicts count (`is_final AND status = 'COMPLETED'`), inside the experiment's window of
trace days. A per-trace metric takes each trace's `experiment_id` and `variant` from its `judge_scores` row; a
pairwise verdict takes both sides' from `traces` (A is `trace_id`, B is `trace_id_b`).

Conventions: every difference is treatment − control in the metric's own units; "better" follows the metric's
`direction`. Intervals are at 1 − alpha: Student t for a mean score, Wilson for a pass rate or a win rate,
Welch–Satterthwaite for a difference of means, equal-tailed posterior quantiles for a credible interval.
Frequentist p-values are two-sided. With `method: both`, `significant`, `outcome`, guardrails and the
recommendation follow the frequentist test and the Bayesian columns are reported beside it. With `method:
sequential` they follow the always-valid p-value and confidence sequence read per trace day
(`eval_platform.experiments.sequential`). Decisions on p-values are taken after the experiment's
`multiple_comparisons` adjustment over all its treatments × metrics.

Columns of `experiment_results` (null where they do not apply to the row's kind):

- `experiment`: the experiment's name (its file stem); `experiment_id`: the traces it covers (null: all).
- `kind`: `variant` (one variant on one metric), `comparison` (a treatment against the control on one metric),
  `win_rate` (a variant's pairwise record), `bradley_terry` (a variant's Bradley–Terry strength and rank).
- `metric`: `<evaluator>.score`, `<evaluator>.passed`, or `<evaluator>.winner` for pairwise rows;
  `evaluator`; `metric_role`: `primary`, `guardrail` or `pairwise`; `direction`: `increase` or `decrease`.
- `variant`: the variant the row describes (for a comparison, the treatment); `control_variant`: the control;
  `opponent`: for `win_rate` rows, null for the record against every other variant, else the variant of a
  head-to-head record (the control).
- `method` (`frequentist`, `bayesian`, `both`, `sequential`), `alpha`: the experiment's settings.
- `n`: observations of the variant (comparison: of the treatment; win_rate and bradley_terry: comparisons);
  `n_control`: the control's observations.
- `mean`, `std`: the variant's (comparison: the treatment's) mean and sample standard deviation;
  `ci_low`, `ci_high`: the interval of `mean` (variant rows) or of `win_rate` (win_rate rows).
- `mean_control`; `difference` = mean − mean_control; `relative_difference` = difference / |mean_control|.
- Frequentist: `diff_ci_low`, `diff_ci_high` (interval of the difference), `t_statistic`, `df`
  (Welch–Satterthwaite), `p_value` (two-sided Welch's t-test).
- Bayesian: `prob_improvement` (posterior probability that the treatment is better, in the metric's direction),
  `expected_lift` (posterior mean of treatment − control), `credible_low`, `credible_high` (its interval),
  `expected_loss` (posterior expected shortfall in the metric's direction if the treatment ships). Scores use the
  Student-t posterior of each mean (non-informative prior); pass rates a Beta(1, 1)–binomial model.
- `cohens_d` (difference over the pooled standard deviation), `effect_interpretation` (negligible < 0.2 ≤ small
  < 0.5 ≤ medium < 0.8 ≤ large, on |d|).
- `significant`: comparison rows: p < alpha (Bayesian: P(better) ≥ 1 − alpha or ≤ alpha); win_rate rows: the
  interval of the win rate excludes 0.5. `outcome`: `better`, `worse`, `no significant difference`,
  `insufficient sample` or `undefined` (no variance). `insufficient_sample`: a group below
  `minimum_sample_size` (statistics are then null).
- `guardrail_rule`, `guardrail_passed` (guardrail comparison rows): with `max_degradation` m the guardrail
  passes only when the interval of the difference rules out a degradation larger than m (non-inferiority);
  with `must_not_be_significantly_worse` it fails when the outcome is `worse`. Null when it cannot be judged.
- `recommendation` (primary comparison rows): the decision for that treatment, in words.
- `wins`, `losses`, `ties`, `win_rate` = (wins + ties / 2) / comparisons (win_rate rows).
- `strength` (Bradley–Terry strengths sum to 1 across the variants), `rank` (1 = best).
- `note`: why a statistic is missing, or a caveat of the estimate.
- `start_date`, `end_date`: the configured window, or the first and last trace day with data.
- `stale`: false for rows computed by this run; true for the last rows of an experiment whose file, or an
  evaluator file it names, no longer loads: they are kept as they were (figures and `computed_at` included)
  rather than replaced by nothing, until the file is fixed. `stale_reason`: the load error (file and field).
- `computed_at`: when the row was computed (UTC).
- `p_value_adjusted` (comparison rows with a p-value): the decision's p-value (Welch's or the always-valid one)
  after the `multiple_comparisons` rule; `significance_rule`: the rule that decided `significant`, in words.
- `always_valid_p_value`, `cs_low`, `cs_high` (null while unbounded), `sequential_looks` (`method: sequential`).
- `mde`, `target_effect`, `required_n`, `power` (comparison rows): planning (`eval_platform.experiments.planning`).
- Human-calibrated (`experiments.calibrated`; null unless the metric's evaluator names a `human_agreement` task
  with labels on some of the experiment's traces): `human_n`, the variant's (comparison: the treatment's) traces
  with a human label; `ppi_mean`, `ppi_ci_low`, `ppi_ci_high`, its prediction-powered mean and interval at
  1 − alpha; comparison rows also `human_n_control`, `ppi_mean_control`, and `ppi_difference`, `ppi_diff_ci_low`,
  `ppi_diff_ci_high` (treatment − control). Reported beside the judge-only figures; decisions do not use them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import polars as pl

from eval_platform.experiments.calibrated import add_calibrated
from eval_platform.experiments.comparisons import (
    comparison_row,
    decide_with_correction,
    metric_values,
    recommendation,
    variant_rows,
)
from eval_platform.experiments.config import ExperimentConfig
from eval_platform.experiments.pairwise import pairwise_rows, pairwise_verdicts
from eval_platform.schemas import EXPERIMENT_RESULT_SCHEMA, FINAL_COMPLETED, UTC_TS, conform


def experiment_results(
    experiments: Iterable[ExperimentConfig],
    scores: pl.DataFrame | pl.LazyFrame,
    traces: pl.DataFrame,
    computed_at: datetime | None = None,
    human: dict[str, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """The `experiment_results` table for every experiment (see the module docstring for its columns).

    `scores` has `judge_scores` columns (at least evaluator, date, trace_id, trace_id_b, is_final, status, score,
    passed, winner, experiment_id, variant); `traces` has trace_id, experiment_id and variant. `human`: per
    evaluator, its human labels (`agreement.calibration.human_truth`) for the calibrated columns.
    """
    final = scores.filter(FINAL_COMPLETED)
    frames = [analyze_experiment(config, final, traces, human) for config in experiments]
    if not frames:
        return conform(pl.DataFrame(), EXPERIMENT_RESULT_SCHEMA)
    stamp = pl.lit(computed_at or datetime.now(UTC), dtype=UTC_TS).alias("computed_at")
    return pl.concat(frames).with_columns(stamp)


def _first_and_last(days: pl.Series) -> list[str]:
    """The first and the last day of a column of days (none when it is empty)."""
    return [str(day) for day in (days.min(), days.max()) if day is not None]


def analyze_experiment(
    config: ExperimentConfig,
    scores: pl.DataFrame | pl.LazyFrame,
    traces: pl.DataFrame,
    human: dict[str, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """All rows of one experiment: variant and comparison rows per metric, then the pairwise rows."""
    rows: list[dict] = []
    days: list[str] = []
    comparisons: dict[str, list[dict]] = {t: [] for t in config.treatments}
    family = []
    for role, metric in config.metrics:
        values = metric_values(config, metric, scores)
        days += _first_and_last(values["date"])
        rows += variant_rows(config, metric, role, values)
        by_variant = {v: values.filter(pl.col("variant") == v)["value"].to_numpy() for v in config.variants}
        for treatment in config.treatments:
            control, treated = by_variant[config.control], by_variant[treatment]
            row = comparison_row(config, metric, role, treatment, control, treated, values=values)
            comparisons[treatment].append(row)
            family.append((metric, row))
    decide_with_correction(config, family)  # treatments × metrics, decided together
    for treatment, (primary, *guardrails) in comparisons.items():
        primary["recommendation"] = recommendation(config, treatment, primary, guardrails)
        rows += [primary, *guardrails]
    if config.pairwise_evaluator:
        pairs = pairwise_verdicts(config, scores, traces)
        days += _first_and_last(pairs["date"])
        rows += pairwise_rows(config, pairs)
    add_calibrated(config, scores, rows, human or {})
    start = str(config.start_date) if config.start_date else min(days, default=None)
    end = str(config.end_date) if config.end_date else max(days, default=None)
    base = {
        "experiment": config.name,
        "experiment_id": config.experiment_id,
        "control_variant": config.control,
        "method": config.method,
        "alpha": config.alpha,
        "start_date": start,
        "end_date": end,
        "stale": False,
    }
    return conform(pl.DataFrame([{**base, **row} for row in rows], infer_schema_length=None), EXPERIMENT_RESULT_SCHEMA)
