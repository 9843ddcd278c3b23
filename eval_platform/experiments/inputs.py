"""Reading what experiments and regression checks need from the warehouse: only the partitions and columns used."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from eval_platform.schemas import (
    FINAL_COMPLETED,
    JUDGE_SCORE_SCHEMA,
    TRACE_SCHEMA,
    conform,
)
from eval_platform.storage.warehouse import partition_files, scan_parquet

SCORE_COLUMNS = [
    "evaluator",
    "date",
    "trace_id",
    "trace_id_b",
    "is_final",
    "status",
    "score",
    "passed",
    "winner",
    "experiment_id",
    "variant",
]
TRACE_COLUMNS = ["trace_id", "experiment_id", "variant"]


def _scan(root: Path, files: list[str], schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    # Partitions written by older versions may lack newer columns (null here); a file's other columns are not read.
    return scan_parquet(
        root, files, hive_partitioning=False, schema=schema, missing_columns="insert", extra_columns="ignore"
    )


def read_final_scores(root: Path, evaluators: list[str]) -> pl.DataFrame:
    """The final completed `judge_scores` rows of these evaluators (only the columns the analyses use), read by
    polars from those evaluators' partitions only: a third of the time of DuckDB over every file, most of which
    went into handing millions of text values over to polars."""
    schema = {name: JUDGE_SCORE_SCHEMA[name] for name in SCORE_COLUMNS}
    files = partition_files(root, "judge_scores", "evaluator")
    wanted = sorted(set(evaluators) & set(files))
    if not wanted:
        return conform(pl.DataFrame(), schema)
    final = FINAL_COMPLETED & pl.col("evaluator").is_in(wanted)
    return conform(_scan(root, [files[name] for name in wanted], schema).filter(final).collect(), schema)


def read_trace_variants(root: Path) -> pl.DataFrame:
    """trace_id → experiment_id, variant, one row per trace id (its first non-null values when it repeats)."""
    schema = {name: TRACE_SCHEMA[name] for name in TRACE_COLUMNS}
    files = list(partition_files(root, "traces", "date").values())
    if not files:
        return conform(pl.DataFrame(), schema)
    traces = _scan(root, files, schema).collect()
    keys = np.sort(traces["trace_id"].hash().to_numpy())  # distinct hashes: distinct ids, nothing to merge
    if traces["trace_id"].null_count() == 0 and not (keys[1:] == keys[:-1]).any():
        return traces
    return traces.group_by("trace_id", maintain_order=True).agg(
        pl.col(c).drop_nulls().first() for c in TRACE_COLUMNS[1:]
    )
