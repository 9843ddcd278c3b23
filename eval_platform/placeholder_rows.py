"""Marking figures computed from the local judge's placeholder verdicts (`schemas.PLACEHOLDER_ROW`).

`experiment_results`, `alerts` and `agreement` rows are computed from final COMPLETED `judge_scores` verdicts; a
row any of whose verdicts came from the placeholder (`local/mock`, no quality judgment) has `placeholder` true,
so the UI, the views and the report never show such a figure as a judge's.
"""

from __future__ import annotations

import polars as pl

from eval_platform.alerting.rules import BUDGET_METRICS, REGRESSION
from eval_platform.schemas import FINAL_COMPLETED, JUDGE_SCORE_SCHEMA, PLACEHOLDER_ROW, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_files, scan_parquet

_KEYS = ["evaluator", "date", "experiment_id", "variant"]
_READ = [*_KEYS, "is_final", "status", "model", "provider_model"]
PLACEHOLDER_DAYS_SCHEMA = {name: JUDGE_SCORE_SCHEMA[name] for name in _KEYS}

# The agreement sections whose subject (and, judge vs judge, reference) is an evaluator's verdicts.
JUDGE_SECTIONS = ("judge_vs_human", "calibrated", "position_consistency", "judge_vs_judge")


def placeholder_days(root: DataRoot) -> pl.DataFrame:
    """Each distinct (evaluator, date, experiment_id, variant) with at least one final COMPLETED verdict from the
    placeholder: a few rows, read with only the columns that say so."""
    files = list(partition_files(root, "judge_scores", "evaluator").values())
    if not files:
        return conform(pl.DataFrame(), PLACEHOLDER_DAYS_SCHEMA)
    schema = {name: JUDGE_SCORE_SCHEMA[name] for name in _READ}
    scan = scan_parquet(
        root, files, hive_partitioning=False, schema=schema, missing_columns="insert", extra_columns="ignore"
    )
    found = scan.filter(FINAL_COMPLETED & PLACEHOLDER_ROW).select(_KEYS).unique().collect()
    return conform(found, PLACEHOLDER_DAYS_SCHEMA)


def _flag(rows: pl.DataFrame, hits: pl.LazyFrame) -> pl.DataFrame:
    """`rows` with `placeholder` set on the row indices `hits` (column `_row`) names."""
    marked = hits.select("_row").unique().collect()["_row"]
    return (
        rows.with_row_index("_row")
        .with_columns(pl.col("_row").is_in(marked.implode()).alias("placeholder"))
        .drop("_row")
    )


def mark_experiment_results(results: pl.DataFrame, days: pl.DataFrame) -> pl.DataFrame:
    """`placeholder` true on an experiment row when a placeholder verdict of its evaluator lies in its window
    (`start_date`..`end_date`) on its experiment's traces (`experiment_id`, when set) and, for a variant or
    comparison row, on its variant or its control's."""
    keyed = results.with_row_index("_row").lazy()
    hits = keyed.join(
        days.lazy().rename({"experiment_id": "_experiment_id", "variant": "_variant"}), on="evaluator"
    ).filter(
        pl.col("date").is_between(pl.col("start_date"), pl.col("end_date"))
        & (pl.col("experiment_id").is_null() | (pl.col("experiment_id") == pl.col("_experiment_id")))
        & (
            ~pl.col("kind").is_in(["variant", "comparison"])
            | pl.col("_variant").eq_missing(pl.col("variant"))
            | pl.col("_variant").eq_missing(pl.col("control_variant"))
        )
    )
    return _flag(results, hits)


def mark_alerts(alerts: pl.DataFrame, days: pl.DataFrame) -> pl.DataFrame:
    """`placeholder` true on an alert when a placeholder verdict of its evaluator is on its day or, for a
    regression, in its baseline; a budget rule (spend, not verdicts) is never marked."""
    keyed = alerts.with_row_index("_row").lazy()
    budget = pl.any_horizontal(pl.col("rule").fill_null("").str.starts_with(m) for m in BUDGET_METRICS)
    in_baseline = (pl.col("kind") == REGRESSION) & pl.col("date").is_between(
        pl.col("baseline_start"), pl.col("baseline_end")
    )
    hits = keyed.join(days.lazy().select("evaluator", "date").unique(), on="evaluator").filter(
        ~budget & ((pl.col("date") == pl.col("day")) | in_baseline.fill_null(False))
    )
    return _flag(alerts, hits)


def mark_agreement(rows: pl.DataFrame, days: pl.DataFrame) -> pl.DataFrame:
    """`placeholder` true on a judge section's row (`JUDGE_SECTIONS`) when its subject or reference is an
    evaluator (`name`, or `name:member` for a panel's member) with a placeholder verdict in the row's period
    (any day for `all`)."""
    keyed = rows.with_row_index("_row").lazy().filter(pl.col("section").is_in(JUDGE_SECTIONS))
    sides = pl.concat(
        [
            keyed.select("_row", "period", "period_start", "period_end", pl.col(side).alias("_side"))
            for side in ("subject", "reference")
        ]
    ).with_columns(pl.col("_side").str.split(":").list.first().alias("evaluator"))
    in_period = (pl.col("period") == "all") | pl.col("date").is_between(pl.col("period_start"), pl.col("period_end"))
    hits = sides.join(days.lazy().select("evaluator", "date").unique(), on="evaluator").filter(in_period)
    return _flag(rows, hits)
