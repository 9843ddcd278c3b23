"""Human-calibrated experiment figures: beside each variant's judge mean (or pass rate) its prediction-powered mean,
and beside each comparison the prediction-powered difference, when humans labelled some of the experiment's
traces (`agreement.calibration.human_truth`; the statistic is `stats.ppi`).

Per variant, the variant's labelled traces pair each human label with the judge's value and its other traces are
the unlabelled set; the difference of two variants is the difference of their two independent estimates. The
interval is a normal one at 1 − the experiment's alpha. These columns are reported, never decided on: `outcome`,
`significant` and the recommendation stay the judge-only test's (a calibrated decision needs enough labels per
variant to be powered, which few experiments have).
"""

from __future__ import annotations

import polars as pl

from eval_platform.agreement.calibration import calibrated_mean
from eval_platform.experiments.comparisons import metric_values
from eval_platform.experiments.config import ExperimentConfig
from eval_platform.stats.ppi import PPIEstimate, ppi_difference


def _columns(estimate: PPIEstimate) -> dict:
    return {
        "human_n": estimate.n_labelled,
        "ppi_mean": estimate.mean,
        "ppi_ci_low": estimate.ci_low,
        "ppi_ci_high": estimate.ci_high,
    }


def add_calibrated(
    config: ExperimentConfig, scores: pl.DataFrame | pl.LazyFrame, rows: list[dict], human: dict[str, pl.DataFrame]
) -> None:
    """Fill the `human_n`, `ppi_*` columns of an experiment's variant and comparison rows (in place) for every
    metric whose evaluator has human labels in `human` (evaluator -> `human_truth`)."""
    for _, metric in config.metrics:
        truth = human.get(metric.evaluator)
        if truth is None or truth.is_empty() or truth[metric.field].null_count() == truth.height:
            continue
        values = metric_values(config, metric, scores)
        estimates = {
            variant: calibrated_mean(
                values.filter(pl.col("variant") == variant), truth, metric.field, alpha=config.alpha
            )
            for variant in config.variants
        }
        control = estimates[config.control]
        for row in rows:
            if row.get("metric") != metric.name or row["kind"] not in ("variant", "comparison"):
                continue
            estimate = estimates[row["variant"]]
            row |= _columns(estimate)
            if row["kind"] == "comparison":
                difference = ppi_difference(estimate, control, alpha=config.alpha)
                row |= {
                    "human_n_control": control.n_labelled,
                    "ppi_mean_control": control.mean,
                    "ppi_difference": difference.difference,
                    "ppi_diff_ci_low": difference.ci_low,
                    "ppi_diff_ci_high": difference.ci_high,
                }
