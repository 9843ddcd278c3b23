"""Keeping an experiment's last `experiment_results` rows, flagged stale, while its file does not load."""

from __future__ import annotations

import polars as pl

from eval_platform.schemas import EXPERIMENT_RESULT_SCHEMA, conform


def keep_stale_rows(fresh: pl.DataFrame, previous: pl.DataFrame | None, unavailable: dict[str, str]) -> pl.DataFrame:
    """The table to write: `fresh` (this run's rows) plus, for each experiment in `unavailable` (name -> why its
    file or an evaluator it names did not load), its rows in `previous` (the table as last written), unchanged but
    flagged `stale` with that reason. A broken file never turns an experiment's results into nothing."""
    if previous is None or not unavailable:
        return fresh
    reasons = pl.DataFrame(
        {"experiment": list(unavailable), "reason": list(unavailable.values())},
        schema={"experiment": pl.String(), "reason": pl.String()},
    )
    kept = (
        conform(previous, EXPERIMENT_RESULT_SCHEMA)
        .filter(~pl.col("experiment").is_in(fresh["experiment"].unique().implode()))
        .join(reasons, on="experiment", how="inner")
        .with_columns(pl.lit(True).alias("stale"), pl.col("reason").alias("stale_reason"))
    )
    return pl.concat([fresh, conform(kept, EXPERIMENT_RESULT_SCHEMA)])
