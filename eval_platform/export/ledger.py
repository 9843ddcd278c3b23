"""The export ledger: the warehouse table `verdict_exports`, one partition per destination × evaluator × day.

A verdict whose row says `sent` is never sent to that destination again, however often its partition is exported
or re-judged unchanged. A batch is recorded only after the receiver accepted it (at least once: a process killed
between the receiver's answer and the ledger's write sends that batch again; Phoenix's annotation identifier makes
that repeat an update, an OTLP receiver sees the events twice). A refused batch is recorded `failed` with its
redacted error, and the next run sends it again. The partition file is replaced whole (`write_partition`), so a
crash leaves the previous ledger or the new one.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from eval_platform.schemas import UTC_TS, VERDICT_EXPORT_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition, write_partition

TABLE = "verdict_exports"
SENT, FAILED_SEND = "sent", "failed"


def keys(destination: str, evaluator: str, day: str) -> dict[str, str]:
    return {"destination": destination, "evaluator": evaluator, "date": day}


def read_ledger(root: DataRoot, destination: str, evaluator: str, day: str) -> pl.DataFrame:
    """The destination's ledger of a partition (no rows when nothing was tried yet)."""
    frame = read_partition(root, TABLE, keys(destination, evaluator, day))
    return conform(frame if frame is not None else pl.DataFrame(), VERDICT_EXPORT_SCHEMA)


def sent_keys(ledger: pl.DataFrame) -> pl.Series:
    return ledger.filter(pl.col("status") == SENT)["verdict_key"]


def attempt_rows(batch: pl.DataFrame, destination: str, at: datetime, error: str | None) -> pl.DataFrame:
    """One attempt at sending `batch` (VERDICT_COLUMNS): sent (`error` None) or failed with its redacted error."""
    return batch.select(
        pl.lit(destination).alias("destination"),
        "evaluator",
        "date",
        "verdict_key",
        "trace_id",
        "otel_trace_id",
        "otel_span_id",
        pl.lit(SENT if error is None else FAILED_SEND).alias("status"),
        pl.lit(1, pl.Int64).alias("attempts"),
        pl.lit(at, UTC_TS).alias("first_attempt_at"),
        pl.lit(at, UTC_TS).alias("last_attempt_at"),
        pl.lit(at if error is None else None, UTC_TS).alias("sent_at"),
        pl.lit(error, pl.String).alias("last_error"),
    )


def merge(ledger: pl.DataFrame, attempts: list[pl.DataFrame]) -> pl.DataFrame:
    """The ledger after `attempts` (in order): a verdict tried before keeps its first attempt and counts this one."""
    if not attempts:
        return ledger
    new = conform(pl.concat(attempts), VERDICT_EXPORT_SCHEMA)
    before = ledger.select(
        "verdict_key", pl.col("attempts").alias("_before"), pl.col("first_attempt_at").alias("_first")
    )
    new = new.join(before, on="verdict_key", how="left").with_columns(
        (pl.col("attempts") + pl.col("_before").fill_null(0)).alias("attempts"),
        pl.coalesce("_first", "first_attempt_at").alias("first_attempt_at"),
    )
    kept = ledger.filter(~pl.col("verdict_key").is_in(new["verdict_key"].implode()))
    return conform(pl.concat([kept, conform(new, VERDICT_EXPORT_SCHEMA)]), VERDICT_EXPORT_SCHEMA).sort(
        "trace_id", "verdict_key"
    )


def write_ledger(root: DataRoot, destination: str, evaluator: str, day: str, ledger: pl.DataFrame) -> None:
    write_partition(root, TABLE, keys(destination, evaluator, day), conform(ledger, VERDICT_EXPORT_SCHEMA))
