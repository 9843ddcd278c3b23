"""When the analysis assets read judge_scores out of core, and the DuckDB connection they do it on.

In memory, `agreement` and `experiment_results` hold one evaluator's rows (or every final row) at a time: fast up
to tens of millions of judge_scores rows, beyond a few GB. Out of core, DuckDB does the heavy part (joins,
aggregations, reading the rows a statistic needs) under a memory limit, spilling to a temporary directory, and
Python gets only small inputs: the statistics are the same functions on the same values.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import connect, has_files, scan_parquet, table_glob

OUT_OF_CORE_ROWS_ENV = "EVAL_PLATFORM_OUT_OF_CORE_ROWS"
OUT_OF_CORE_ROWS = 20_000_000  # default: judge_scores rows above which the analysis assets read out of core
MEMORY_LIMIT = "512MB"  # DuckDB's buffers; the process's other memory (Python, annotations, inputs) comes on top
THREADS = 2


def reads_out_of_core(root: DataRoot, out_of_core: bool | None = None) -> bool:
    """`out_of_core` when given; else whether judge_scores has more rows than `EVAL_PLATFORM_OUT_OF_CORE_ROWS`
    (default `OUT_OF_CORE_ROWS`; 0: always out of core). The count comes from the Parquet footers."""
    if out_of_core is not None:
        return out_of_core
    if not has_files(root, "judge_scores"):
        return False
    limit = int(os.environ.get(OUT_OF_CORE_ROWS_ENV, OUT_OF_CORE_ROWS))
    rows = scan_parquet(root, table_glob(root, "judge_scores"), hive_partitioning=False).select(pl.len())
    return rows.collect().item() > limit


@contextmanager
def spilling_connection(
    root: DataRoot, memory_limit: str = MEMORY_LIMIT, temp_directory: Path | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A warehouse connection (`connect`) whose DuckDB buffers stay under `memory_limit` and spill to a new folder
    in `temp_directory` (default: the system's temporary directory), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="eval-platform-spill-", dir=temp_directory) as spill, connect(root) as conn:
        conn.execute(f"SET memory_limit = '{memory_limit}'")
        conn.execute(f"SET temp_directory = '{spill}'")
        conn.execute(f"SET threads = {THREADS}")
        conn.execute("SET preserve_insertion_order = false")  # no order is needed, and keeping one costs memory
        yield conn
