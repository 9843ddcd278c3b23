"""Building quarantine rows (QUARANTINE_SCHEMA) for rejected input; usable by any ingesting asset."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl

from eval_platform.ingest.common import truncate
from eval_platform.schemas import QUARANTINE_SCHEMA, conform, empty_frame


def quarantine_row(
    *,
    source: str,
    partition: str,
    file: str,
    line: int | None,
    reason: str,
    detail: str,
    raw: str | None,
    at: datetime,
) -> dict[str, Any]:
    return {
        "source": source,
        "partition": partition,
        "file": file,
        "line": line,
        "reason": reason,
        "detail": detail,
        "raw": truncate(raw),
        "quarantined_at": at,
    }


def quarantine_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return empty_frame(QUARANTINE_SCHEMA)
    return conform(pl.DataFrame(rows, schema=QUARANTINE_SCHEMA), QUARANTINE_SCHEMA)


def utc_now() -> datetime:
    return datetime.now(UTC)
