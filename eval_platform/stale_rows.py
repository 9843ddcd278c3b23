"""Keeping a config file's last rows, flagged `stale`, while the file does not load (or is gone).

A broken experiment file keeps its last `experiment_results` rows, a broken or removed suite file its last
`leaderboard`, `benchmark_cases` and `benchmark_results` rows: unchanged but flagged `stale` with the reason in
`stale_reason`, so the UI, the views and the report all say the same thing instead of serving old numbers as
current or turning them into nothing.
"""

from __future__ import annotations

import polars as pl

from eval_platform.schemas import EXPERIMENT_RESULT_SCHEMA, TABLES, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_schema, partition_values, read_partition, write_partition

# A suite's tables beside `leaderboard`, each with its partition key under `suite` (then `model`).
SUITE_TABLES = {"benchmark_cases": "task", "benchmark_results": "name"}


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


def flag_suite_partitions(root: DataRoot, suite: str, reason: str | None) -> int:
    """Flag every `benchmark_cases` and `benchmark_results` partition of `suite` `stale` with `reason` (its file no
    longer loads, or is gone), or with `reason` None clear a flag left from a time it did not load (the rows are
    current again: the leaderboard is computed from them). Only a partition whose flag differs is read whole and
    rewritten (its rows otherwise unchanged); returns how many rows were rewritten."""
    rewritten = 0
    for table, key in SUITE_TABLES.items():
        schema = TABLES[table].schema
        for name in partition_values(root, table, {"suite": suite}, key):
            for model in partition_values(root, table, {"suite": suite, key: name}, "model"):
                keys = {"suite": suite, key: name, "model": model}
                columns = partition_schema(root, table, keys) or {}
                if "stale" in columns and "stale_reason" in columns:
                    flags = read_partition(root, table, keys, ["stale", "stale_reason"])
                elif reason is None:
                    continue  # written before rows carried the flag: never flagged
                else:
                    flags = None
                if flags is not None and _flagged_as(flags, reason):
                    continue
                previous = read_partition(root, table, keys)
                if previous is None:
                    continue
                rows = conform(previous, schema).with_columns(
                    pl.lit(reason is not None).alias("stale"), pl.lit(reason, pl.String()).alias("stale_reason")
                )
                write_partition(root, table, keys, rows)
                rewritten += rows.height
    return rewritten


def _flagged_as(flags: pl.DataFrame, reason: str | None) -> bool:
    if reason is None:
        return not flags["stale"].fill_null(False).any()
    return bool(flags["stale"].fill_null(False).all()) and bool(
        (flags["stale_reason"] == reason).fill_null(False).all()
    )
