"""Keeping a config file's last rows, flagged `stale`, while the file does not load (or is gone).

A broken experiment file keeps its last `experiment_results` rows, a broken or removed suite file its last
`leaderboard` rows: unchanged but flagged `stale` with the reason in `stale_reason`, so the UI, the views and the
report all say the same thing instead of serving old numbers as current or turning them into nothing.
"""

from __future__ import annotations

import polars as pl

from eval_platform.schemas import EXPERIMENT_RESULT_SCHEMA, conform


def keep_stale_rows(
    fresh: pl.DataFrame,
    previous: pl.DataFrame | None,
    unavailable: dict[str, str],
    key: str = "experiment",
    schema: dict[str, pl.DataType] = EXPERIMENT_RESULT_SCHEMA,
) -> pl.DataFrame:
    """The table to write: `fresh` (this run's rows) plus, for each `key` value in `unavailable` (value -> why its
    file, or a file it names, did not load), its rows in `previous` (the table as last written), unchanged but
    flagged `stale` with that reason. A broken file never turns its results into nothing."""
    if previous is None or not unavailable:
        return fresh
    reasons = pl.DataFrame(
        {key: list(unavailable), "_reason": list(unavailable.values())},
        schema={key: pl.String(), "_reason": pl.String()},
    )
    kept = (
        conform(previous, schema)
        .filter(~pl.col(key).is_in(fresh[key].unique().implode()))
        .join(reasons, on=key, how="inner")
        .with_columns(pl.lit(True).alias("stale"), pl.col("_reason").alias("stale_reason"))
    )
    return pl.concat([fresh, conform(kept, schema)])
