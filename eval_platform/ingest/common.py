"""Small types shared by the trace readers: a rejected-row error and a candidate row.

A reader turns a file into `Candidate`s, one per input row (JSONL line, JSON array element, CSV data row,
Parquet row) or OTLP request (whose spans become rows of their own, see `ingest/otel`). A candidate carries a
parsed `record` (a dict still to be normalized into the canonical trace), an OTLP request (`otel`), or a
`RowError` saying why the row could not even be parsed. Nothing is dropped on the way: every candidate ends up
either as a trace or as a quarantine row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

RAW_LIMIT = 10_000  # characters of raw text kept per quarantine row


class RowError(Exception):
    """Why one input row was rejected.

    `reason` is the short machine-readable code stored in the quarantine table (e.g. `invalid_type:latency_ms`);
    `message` is a sentence naming the field and the offending value, without the file and line (the caller
    prefixes those).
    """

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Candidate:
    """One input row as read from a file, before validation."""

    line: int | None  # 1-based line / row / element number; None when the whole file is the row
    raw: str  # the raw text of the row (the caller truncates it)
    record: dict[str, Any] | None = None
    error: RowError | None = None
    unit: str = "line"  # what `line` counts, for messages: line, element, row or span
    # an OTLP/JSON request read from this line / element / file: its spans are assembled into traces with the
    # day's other spans (ingest/otel), not normalized as one record
    otel: dict[str, Any] | None = None
    # the file's last row, ended by the end of the file rather than a newline: whole only if the file is final
    # (a file still being written holds it back, see `ingest/traces.py`)
    unterminated: bool = False


def truncate(text: str | None, limit: int = RAW_LIMIT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[:limit]


def dumps(value: Any) -> str:
    """Compact JSON that keeps non-ASCII text readable; unknown objects (datetimes, decimals) become strings."""
    return json.dumps(value, ensure_ascii=False, default=str)


def preview(value: Any, limit: int = 80) -> str:
    """A short, quoted rendering of a value for an error message."""
    text = value if isinstance(value, str) else dumps(value)
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return json.dumps(text, ensure_ascii=False) if isinstance(value, str) else text
