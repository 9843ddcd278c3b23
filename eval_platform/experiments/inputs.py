"""Reading what experiments and regression checks need from the warehouse, with the filters pushed into DuckDB."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from eval_platform.schemas import JUDGE_SCORE_SCHEMA, TRACE_SCHEMA, conform
from eval_platform.storage.warehouse import has_files, table_glob

SCORE_COLUMNS = [
    "evaluator", "date", "trace_id", "trace_id_b", "is_final", "status", "score", "passed", "winner",
    "experiment_id", "variant",
]
TRACE_COLUMNS = ["trace_id", "experiment_id", "variant"]


def _source(root: Path, table: str) -> str:
    # union_by_name: partitions written by older versions may lack newer columns; hive keys duplicate columns.
    return f"read_parquet('{table_glob(root, table)}', union_by_name = true, hive_partitioning = false)"


def read_final_scores(root: Path, evaluators: list[str]) -> pl.DataFrame:
    """The final completed `judge_scores` rows of these evaluators (only the columns the analyses use)."""
    schema = {name: JUDGE_SCORE_SCHEMA[name] for name in SCORE_COLUMNS}
    if not evaluators or not has_files(root, "judge_scores"):
        return conform(pl.DataFrame(), schema)
    with duckdb.connect() as conn:
        frame = conn.sql(
            f"""
            SELECT {", ".join(SCORE_COLUMNS)} FROM {_source(root, "judge_scores")}
            WHERE is_final AND status = 'COMPLETED' AND list_contains($evaluators, evaluator)
            """,
            params={"evaluators": sorted(evaluators)},
        ).pl()
    return conform(frame, schema)


def read_trace_variants(root: Path) -> pl.DataFrame:
    """trace_id → experiment_id, variant, one row per trace id."""
    schema = {name: TRACE_SCHEMA[name] for name in TRACE_COLUMNS}
    if not has_files(root, "traces"):
        return conform(pl.DataFrame(), schema)
    with duckdb.connect() as conn:
        frame = conn.sql(
            f"""
            SELECT trace_id, any_value(experiment_id) AS experiment_id, any_value(variant) AS variant
            FROM {_source(root, "traces")} GROUP BY trace_id
            """
        ).pl()
    return conform(frame, schema)
