"""Which export partitions the next sensor tick sends again: those whose ledger has verdicts recorded `failed`.

A run that could not send a batch (the receiver down past the run's own retries) records it `failed` in the ledger
(`verdict_exports`). The `verdict_export_retries` sensor (defs/export.py) asks `failed_partitions` on each tick and
requests one export run per such evaluator × day, keyed by the partition and its last failed attempt: a failed
attempt is retried by one run, never by two ticks, and a new failure (a later attempt) is retried once more, up to
`max_attempts` attempts of a verdict, after which a person looks (the run's error and the ledger say why). The run
sends only what the ledger does not show as `sent`: a verdict is never sent twice to a destination.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from eval_platform.export.ledger import FAILED_SEND, TABLE
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import has_files, scan_parquet, table_glob


@dataclass(frozen=True)
class FailedPartition:
    evaluator: str
    day: str
    failed: int  # verdicts recorded failed (every destination)
    attempts: int  # the most attempts of one of them
    run_key: str  # one run per failed attempt of this partition


def failed_partitions(root: DataRoot, max_attempts: int) -> list[FailedPartition]:
    """The evaluator × day partitions with verdicts recorded failed after fewer than `max_attempts` attempts."""
    if not has_files(root, TABLE):
        return []
    failed = (
        scan_parquet(root, table_glob(root, TABLE), hive_partitioning=False)
        .filter(pl.col("status") == FAILED_SEND)
        .group_by("evaluator", "date")
        .agg(
            pl.len().alias("failed"),
            pl.col("attempts").max().alias("attempts"),
            pl.col("last_attempt_at").max().alias("last"),
        )
        .filter(pl.col("attempts") < max_attempts)
        .sort("evaluator", "date")
        .collect()
    )
    return [
        FailedPartition(
            row["evaluator"],
            row["date"],
            row["failed"],
            row["attempts"],
            f"verdict_exports|{row['evaluator']}|{row['date']}|{row['last'].isoformat() if row['last'] else ''}",
        )
        for row in failed.iter_rows(named=True)
    ]
