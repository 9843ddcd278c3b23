"""Judge verdicts produced elsewhere (another tool, a published study) -> the table `imported_judgments`.

`read_judgments(data_root)` reads every file under `<data_root>/judgments/` (JSONL, JSON array, CSV, Parquet,
optionally gzip; see `export_files.py`). One input row is one judge's verdict on one item:

    {"source": "gpt-3.5-turbo (PandaLM study)", "item_id": "pandalm-0000", "verdict": "1",
     "reason": "Response 1 is better because ...", "response1_trace_id": "...", "response2_trace_id": "..."}

and becomes one output row with the columns:

- source: the judge or study the verdict comes from: `source` (aliases `judge`, `judge_model`); default: the
  file name without extensions
- task, criterion: optional: what was judged (`criterion` alias `metric`)
- item_id: `item_id` (aliases `item`, `example_id`; else `trace_id`)
- verdict: the verdict exactly as recorded, as text (`verdict`, aliases `label`, `winner`, `result`); default:
  the score
- value: a numeric score: `score` (alias `value`), else the verdict when it is a number; else null
- reasoning: the judge's explanation: `reasoning` (aliases `reason`, `explanation`, `rationale`)
- trace_id, response1_trace_id, response2_trace_id: references to the judged traces
- judged_at: `judged_at` (aliases `created_at`, `timestamp`), UTC
- metadata: every other field of the row, as a JSON object
- source_file, source_line: where the row came from (CSV: the header is line 1)

Rejected rows go to the quarantine (source `imported_judgments`) with file, line and one of
`missing_field:item_id`, `missing_field:verdict` (neither a verdict nor a score), `invalid_type:<field>`,
`invalid_timestamp`, `duplicate_judgment` (the same source, item, task and criterion again: the first in
file/line order is kept), the file-level reasons of `export_files.py`, or `unexpected_error`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.ingest.common import RowError, dumps, preview
from eval_platform.ingest.export_files import (
    ExportRow,
    Rejects,
    export_files,
    export_rows,
    file_stem,
    first_present,
    number_text,
    text_field,
)
from eval_platform.ingest.quarantine import utc_now
from eval_platform.ingest.records import parse_timestamp
from eval_platform.schemas import IMPORTED_JUDGMENT_SCHEMA, conform, empty_frame

SOURCE = "imported_judgments"
FOLDER = "judgments"

ALIASES: dict[str, tuple[str, ...]] = {
    "source": ("source", "judge", "judge_model"),
    "task": ("task", "task_name"),
    "criterion": ("criterion", "metric"),
    "item_id": ("item_id", "item", "example_id", "trace_id"),
    "verdict": ("verdict", "label", "winner", "result"),
    "value": ("score", "value"),
    "reasoning": ("reasoning", "reason", "explanation", "rationale"),
    "judged_at": ("judged_at", "created_at", "timestamp"),
}
REFERENCES = ("trace_id", "response1_trace_id", "response2_trace_id")
_KNOWN = {alias for names in ALIASES.values() for alias in names} | set(REFERENCES) | {"metadata"}


@dataclass
class Judgments:
    judgments: pl.DataFrame
    quarantine: pl.DataFrame
    files: list[str] = field(default_factory=list)


def read_judgments(data_root: Path, *, now: datetime | None = None) -> Judgments:
    """Every judgment export under `<data_root>/judgments/`; bad rows and files are quarantined, never raised."""
    data_root = Path(data_root)
    rejects = Rejects(SOURCE, now or utc_now())
    files = export_files(data_root, FOLDER)
    rows: list[dict[str, Any]] = []
    first_seen: dict[tuple, str] = {}
    for row in export_rows(data_root, files, rejects, "judgment exports"):
        try:
            normalized = normalize_judgment(row)
        except RowError as error:
            rejects.reject(row, error)
            continue
        except Exception as exc:  # an ingest bug must not crash the asset nor lose the row
            rejects.reject(
                row, RowError("unexpected_error", f"the row could not be normalized ({type(exc).__name__}: {exc})")
            )
            continue
        key = (normalized["source"], normalized["item_id"], normalized["task"], normalized["criterion"])
        if key in first_seen:
            message = (
                f"{normalized['source']!r} already judged item {normalized['item_id']!r} in {first_seen[key]}; "
                "the first occurrence is kept"
            )
            rejects.reject(row, RowError("duplicate_judgment", message))
            continue
        first_seen[key] = row.where
        rows.append(normalized)
    frame = (
        conform(pl.DataFrame(rows, schema=IMPORTED_JUDGMENT_SCHEMA), IMPORTED_JUDGMENT_SCHEMA)
        if rows
        else empty_frame(IMPORTED_JUDGMENT_SCHEMA)
    )
    return Judgments(frame, rejects.frame(), [p.relative_to(data_root).as_posix() for p in files])


def normalize_judgment(row: ExportRow) -> dict[str, Any]:
    """The output row of one export row; RowError when it is unusable."""
    record = row.record
    if row.from_text:
        record = {k: v for k, v in record.items() if not (isinstance(v, str) and not v.strip())}
        if isinstance(record.get("metadata"), str):
            try:
                record["metadata"] = json.loads(record["metadata"])
            except ValueError:
                raise RowError(
                    "invalid_type:metadata", f"field 'metadata' is not a JSON object: {preview(record['metadata'])}"
                ) from None
    item_id = text_field(first_present(record, ALIASES["item_id"]), "item_id")
    if item_id is None:
        raise RowError("missing_field:item_id", "no item_id (looked for 'item_id', 'item', 'example_id', 'trace_id')")
    value = first_present(record, ALIASES["value"])
    number = None if value is None else _number(value, "score")
    verdict = _verdict_text(first_present(record, ALIASES["verdict"]))
    if verdict is None:
        if number is None:
            raise RowError(
                "missing_field:verdict", "no verdict (looked for 'verdict', 'label', 'winner', 'result') and no score"
            )
        verdict = number_text(number)
    if number is None:
        number = _number_or_none(verdict)
    judged_at = first_present(record, ALIASES["judged_at"])
    nested = record.get("metadata")
    if nested is not None and not isinstance(nested, dict):
        raise RowError("invalid_type:metadata", f"field 'metadata' value {preview(nested)} is not an object")
    extras = {k: v for k, v in record.items() if k not in _KNOWN}
    reasoning = first_present(record, ALIASES["reasoning"])
    return {
        "source": text_field(first_present(record, ALIASES["source"]), "source") or file_stem(row.file),
        "task": text_field(first_present(record, ALIASES["task"]), "task"),
        "criterion": text_field(first_present(record, ALIASES["criterion"]), "criterion"),
        "item_id": item_id,
        "verdict": verdict,
        "value": number,
        "reasoning": None if reasoning is None else (reasoning if isinstance(reasoning, str) else dumps(reasoning)),
        "judged_at": None if judged_at is None else parse_timestamp(judged_at, "judged_at"),
        "metadata": dumps({**(nested or {}), **extras}),
        "source_file": row.file,
        "source_line": row.line,
        **{name: text_field(record.get(name), name) for name in REFERENCES},
    }


def _number_or_none(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _number(value: Any, name: str) -> float:
    number = _number_or_none(value)
    if number is None:
        raise RowError(f"invalid_type:{name}", f"field '{name}' value {preview(value)} is not a finite number")
    return number


def _verdict_text(value: Any) -> str | None:
    """A verdict as text: strings as written, numbers without a spurious `.0`, booleans as true/false."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return number_text(float(value))
    raise RowError("invalid_type:verdict", f"field 'verdict' value {preview(value)} is not a single verdict")
