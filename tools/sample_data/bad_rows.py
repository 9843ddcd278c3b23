"""Deliberately broken sample rows: one per kind of defect the trace ingest must quarantine.

All rows are synthetic (ids `bad-00NN`), except the duplicate, which re-sends the id of a PandaLM trace
exported earlier the same day (the earlier one wins, so no PandaLM pair is broken).
"""

from __future__ import annotations

import json

NOTES_TEXT = """Export notes for 2026-11-12
==========================

This file was dropped next to the exports by the export job. It is not a trace export:
the ingest must report it (unsupported_file_type) and not try to read it.
"""


def bad_rows(day: str, duplicate_of: str) -> list[tuple[str, str]]:
    """(raw JSONL line, expected quarantine reason) pairs, in file order."""

    def row(**fields: object) -> str:
        return json.dumps(fields, ensure_ascii=False)

    ts = f"{day}T09:15:00Z"
    return [
        ('{"trace_id": "bad-0001", "timestamp": "' + ts + '", "input": "a line cut off in the mid', "invalid_json"),
        (
            row(timestamp=ts, input="A row without any id.", output="Nobody can refer to this row."),
            "missing_field:trace_id",
        ),
        (
            row(trace_id="bad-0003", input="A row without a timestamp.", output="When did this happen?"),
            "missing_field:timestamp",
        ),
        (
            row(
                trace_id="bad-0004", timestamp="yesterday afternoon", input="Free-text time.", output="Not a timestamp."
            ),
            "invalid_timestamp",
        ),
        (
            row(trace_id="bad-0005", timestamp=ts, input="Latency as a word.", output="ok", latency_ms="fast"),
            "invalid_type:latency_ms",
        ),
        (
            row(
                trace_id="bad-0006",
                timestamp=ts,
                input="Negative usage.",
                output="ok",
                prompt_tokens=-12,
                completion_tokens=30,
            ),
            "negative_value:prompt_tokens",
        ),
        (
            row(
                trace_id=duplicate_of,
                timestamp=ts,
                input="A retried export of a trace already sent today.",
                output="A second, different copy.",
            ),
            "duplicate_trace_id",
        ),
        ('["not", "an", "object"]', "not_an_object"),
        (
            row(
                trace_id="bad-0009",
                timestamp=ts,
                input="Metadata as a list.",
                output="ok",
                metadata=["item_id", "bad-0009"],
            ),
            "invalid_type:metadata",
        ),
        (
            row(trace_id={"nested": "bad-0010"}, timestamp=ts, input="An object as the id.", output="ok"),
            "invalid_type:trace_id",
        ),
    ]
