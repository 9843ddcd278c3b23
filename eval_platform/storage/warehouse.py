"""Parquet partitions under `<data root>/warehouse/<table>/<key>=<value>/...` and the DuckDB catalog over them.

A partition is one file, written to a temporary name in its folder and renamed over the old one: a
re-materialized partition replaces the previous rows whole, a crash leaves the old file or the new one,
never half of either, and parallel partition runs never share a writer.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import duckdb
import polars as pl

from eval_platform.schemas import QUARANTINE_SCHEMA, conform
from eval_platform.settings import duckdb_path, warehouse_dir

PARTITION_FILE = "part.parquet"


def partition_dir(root: Path, table: str, keys: dict[str, str]) -> Path:
    folder = warehouse_dir(root) / table
    for name, value in keys.items():
        folder = folder / f"{name}={value}"
    return folder


def write_partition(root: Path, table: str, keys: dict[str, str], frame: pl.DataFrame) -> Path:
    """Atomically replace one partition's Parquet file with `frame` (an empty frame still writes a file)."""
    folder = partition_dir(root, table, keys)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".parquet")
    os.close(fd)
    try:
        frame.write_parquet(tmp)
        os.replace(tmp, folder / PARTITION_FILE)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return folder / PARTITION_FILE


def read_partition(root: Path, table: str, keys: dict[str, str]) -> pl.DataFrame | None:
    path = partition_dir(root, table, keys) / PARTITION_FILE
    return pl.read_parquet(path) if path.exists() else None


def table_glob(root: Path, table: str) -> str:
    return str(warehouse_dir(root) / table / "**" / "*.parquet")


def has_files(root: Path, table: str) -> bool:
    folder = warehouse_dir(root) / table
    return folder.is_dir() and any(folder.rglob("*.parquet"))


def write_quarantine(root: Path, source: str, partition: str, frame: pl.DataFrame) -> None:
    """The rejected rows of one source partition (replacing that partition's earlier rejects)."""
    write_partition(root, "quarantine", {"source": source, "partition": partition}, conform(frame, QUARANTINE_SCHEMA))


def _empty_view_sql(schema: dict[str, pl.DataType]) -> str:
    frame = pl.DataFrame(schema=schema)
    columns = []
    for name, dtype in frame.schema.items():
        sql_type = {
            pl.String: "VARCHAR",
            pl.Int64: "BIGINT",
            pl.Float64: "DOUBLE",
            pl.Boolean: "BOOLEAN",
        }.get(type(dtype), "TIMESTAMPTZ" if isinstance(dtype, pl.Datetime) else "VARCHAR")
        columns.append(f"CAST(NULL AS {sql_type}) AS \"{name}\"")
    return f"SELECT {', '.join(columns)} WHERE false"


def refresh_catalog(root: Path, tables: dict[str, dict[str, pl.DataType]], attempts: int = 20) -> bool:
    """(Re)create one DuckDB view per table over its Parquet files; an empty typed view until files exist.

    Returns False when the DuckDB file stayed locked by another process (an analyst's open session):
    the views already point at the Parquet globs, so new partitions show up without a refresh.
    """
    path = duckdb_path(root)
    for attempt in range(attempts):
        try:
            with duckdb.connect(str(path)) as conn:
                for table, schema in tables.items():
                    if has_files(root, table):
                        source = (
                            f"SELECT * FROM read_parquet('{table_glob(root, table)}', "
                            "union_by_name = true, hive_partitioning = false)"
                        )
                    else:
                        source = _empty_view_sql(schema)
                    conn.execute(f'CREATE OR REPLACE VIEW "{table}" AS {source}')
            return True
        except duckdb.IOException:
            time.sleep(min(0.05 * 2**attempt, 1.0))
    return False
