"""One input record (a dict from JSONL, JSON, CSV, Parquet or OTLP) -> one canonical trace row.

`normalize_record` validates and converts; a problem raises `RowError` with a reason code:

| reason | when |
| --- | --- |
| `missing_field:trace_id` / `missing_field:timestamp` | absent, null or empty |
| `invalid_type:trace_id` | not a string or integer |
| `invalid_timestamp` | not ISO 8601 and not an epoch number |
| `invalid_type:<field>` | wrong type, e.g. `latency_ms: "fast"`, a fractional token count, a non-object `metadata` |
| `negative_value:<field>` | a negative `latency_ms`, token count or `cost_usd` |

Field aliases (used only when the canonical field is absent; the first one present wins):

| canonical | also accepted |
| --- | --- |
| `trace_id` | `traceId`, `id` |
| `timestamp` | `start_time`, `startTime`, `created_at` |
| `input` | `prompt`, `messages` |
| `output` | `completion`, `response` |
| `expected_output` | `expected`, `reference`, `ground_truth` |
| `context` | `contexts`, `documents` |
| `project_id` | `project`, `projectId` |
| `model` | `model_name` |
| `experiment_id` | `experiment` |
| `latency_ms` | `duration_ms`; else `end_time`/`endTime` minus the timestamp |
| `prompt_tokens` | `input_tokens`, `usage.prompt_tokens`, `usage.input_tokens` |
| `completion_tokens` | `output_tokens`, `usage.completion_tokens`, `usage.output_tokens` |
| `cost_usd` | `cost`, `total_cost`, `usage.cost_usd` |

`usage.x` means a nested object (`{"usage": {"prompt_tokens": 3}}`) or a flat column named `usage.x`.
`session_id` (alias `session`, `sessionId`) and `user_id` (`userId`) fill the columns of those names and, as
before, are also copied into `metadata`; `tags` has no column and is copied into `metadata` only (unless metadata
already has that key); so are flat `metadata.<key>` columns. Other unknown fields are ignored.

Values: `timestamp` is ISO 8601 (a trailing `Z` or an offset is honoured, no offset means UTC) or an epoch
number (seconds below 1e11, milliseconds below 1e14, microseconds below 1e17, else nanoseconds); it is
stored in UTC. `input`, `output` and `expected_output` are text or chat messages (see `messages.py`); any
other object is kept as its JSON text. `context` is a string or a list of strings/documents and is stored
as a JSON list of strings. `metadata` is an object (or a JSON string holding one). Numbers may be given as
numeric strings. With `from_text=True` (CSV cells) an empty cell is a missing value, except for `input`
and `output` where it is the empty string, and JSON-looking cells of `metadata`, `context`, `input`,
`output` and `spans` are decoded.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from typing import Any

from eval_platform.ingest.common import RowError, dumps, preview
from eval_platform.ingest.messages import (
    document_text,
    is_message_list,
    maybe_json,
    render_messages,
)

UTC = UTC
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

ALIASES: dict[str, tuple[str, ...]] = {
    "trace_id": ("trace_id", "traceId", "id"),
    "timestamp": ("timestamp", "start_time", "startTime", "created_at"),
    "end_time": ("end_time", "endTime"),
    "input": ("input", "prompt", "messages"),
    "output": ("output", "completion", "response"),
    "expected_output": ("expected_output", "expected", "reference", "ground_truth"),
    "context": ("context", "contexts", "documents"),
    "metadata": ("metadata",),
    "project_id": ("project_id", "project", "projectId"),
    "model": ("model", "model_name"),
    "experiment_id": ("experiment_id", "experiment"),
    "variant": ("variant",),
    "latency_ms": ("latency_ms", "duration_ms"),
    "prompt_tokens": ("prompt_tokens", "input_tokens", "usage.prompt_tokens", "usage.input_tokens"),
    "completion_tokens": (
        "completion_tokens",
        "output_tokens",
        "usage.completion_tokens",
        "usage.output_tokens",
    ),
    "cost_usd": ("cost_usd", "cost", "total_cost", "usage.cost_usd"),
    "spans": ("spans",),
}
METADATA_EXTRAS: dict[str, tuple[str, ...]] = {
    "session_id": ("session_id", "session", "sessionId"),
    "user_id": ("user_id", "userId"),
    "tags": ("tags",),
}
_MISSING = object()


def _lookup(record: dict[str, Any], key: str) -> Any:
    """`record[key]`, or for a dotted key a flat column of that name, else the nested value."""
    if key in record:
        return record[key]
    if "." in key:
        head, tail = key.split(".", 1)
        inner = record.get(head)
        if isinstance(inner, dict):
            return _lookup(inner, tail)
    return _MISSING


def _first(record: dict[str, Any], field: str, aliases: dict[str, tuple[str, ...]] = ALIASES) -> tuple[Any, str]:
    """The value of the first present alias of `field` (null counts as absent) and the key it came from."""
    for key in aliases[field]:
        value = _lookup(record, key)
        if value is not _MISSING and value is not None:
            return value, key
    return None, field


# --- scalar parsers -----------------------------------------------------------------------------------


def epoch_to_datetime(number: float) -> datetime:
    """Epoch seconds, milliseconds, microseconds or nanoseconds (by magnitude) -> UTC datetime."""
    magnitude = abs(number)
    if magnitude < 1e11:
        micros = number * 1e6
    elif magnitude < 1e14:
        micros = number * 1e3
    elif magnitude < 1e17:
        micros = number
    else:
        micros = number / 1e3
    return EPOCH + timedelta(microseconds=round(micros))


def parse_timestamp(value: Any, field: str = "timestamp") -> datetime:
    """ISO 8601 text, an epoch number (or numeric text) or a datetime -> aware UTC datetime."""
    problem = f"field '{field}' value {preview(value)} is not an ISO 8601 timestamp or an epoch number"
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, datetime):
            parsed = value
        elif isinstance(value, date):
            parsed = datetime(value.year, value.month, value.day)
        elif isinstance(value, (int, float)):
            if not math.isfinite(value):
                raise ValueError
            parsed = epoch_to_datetime(value)
        elif isinstance(value, str):
            text = value.strip()
            try:
                number: float | None = float(text)
            except ValueError:
                number = None
            if number is not None:
                if not math.isfinite(number):
                    raise ValueError
                parsed = epoch_to_datetime(number)
            else:
                if len(text) < 10:  # fromisoformat also takes odd short forms; a timestamp is longer
                    raise ValueError
                parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        else:
            raise ValueError
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise RowError("invalid_timestamp", problem) from exc


def _number(value: Any, field: str, *, integer: bool) -> float | int:
    kind = "an integer" if integer else "a number"
    bad = RowError(f"invalid_type:{field}", f"field '{field}' value {preview(value)} is not {kind}")
    if isinstance(value, bool):
        raise bad
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise bad from None
    if isinstance(value, int):
        number: float | int = value
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise bad
        if integer:
            if not value.is_integer():
                raise bad
            number = int(value)
        else:
            number = value
    else:
        try:  # decimals and numpy scalars from Parquet
            number = float(value)
        except (TypeError, ValueError):
            raise bad from None
        if not math.isfinite(number) or (integer and not number.is_integer()):
            raise bad
        number = int(number) if integer else number
    if number < 0:
        raise RowError(f"negative_value:{field}", f"field '{field}' is negative ({value})")
    return number


def _label(value: Any, field: str) -> str:
    """A short identifier-like text field (project_id, model, ...)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise RowError(f"invalid_type:{field}", f"field '{field}' value {preview(value)} is not a string")


def text_and_messages(value: Any, single_role: str) -> tuple[str | None, str | None]:
    """Text or chat messages -> (rendered text, JSON of the messages or None)."""
    if value is None:
        return None, None
    if isinstance(value, str):
        return value, None
    if isinstance(value, dict) and is_message_list(value.get("messages")):
        value = value["messages"]
    elif isinstance(value, dict) and "role" in value:
        value = [value]
    if is_message_list(value):
        return render_messages(value, single_role), dumps(value)
    if isinstance(value, list) and not value:
        return "", dumps(value)
    if isinstance(value, (dict, list)):
        return dumps(value), None
    return str(value), None


def reference_value(text: str | None) -> Any:
    """A trace's `expected_output` as its scorers read it: a list of accepted answers when the column holds the
    JSON text of a list (how `text_and_messages` stores a list that is not chat messages: the trace file's
    `"expected_output": ["Lima", "Lima, Peru"]`), else the text. The suite's counterpart is
    `ingest.datasets.expected_value`; a trace has no flag column, so text that is itself a JSON array counts as a
    list too."""
    if text is None or not text.lstrip().startswith("["):
        return text
    value = maybe_json(text)
    return value if isinstance(value, list) and value else text


def _context(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        raise RowError(
            "invalid_type:context", f"field 'context' value {preview(value)} is not a string or a list of documents"
        )
    return dumps([document_text(item) for item in value if item is not None])


def _metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        value = maybe_json(value)
    if not isinstance(value, dict):
        raise RowError("invalid_type:metadata", f"field 'metadata' value {preview(value)} is not a JSON object")
    return dict(value)


def _decode_text_cells(record: dict[str, Any]) -> dict[str, Any]:
    """CSV semantics: empty cell = missing (input/output: empty text), JSON cells decoded where expected."""
    decoded: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, str) and value == "":
            decoded[key] = "" if key in ("input", "output") else None
            continue
        if isinstance(value, str) and key in ALIASES["context"] + ALIASES["metadata"] + ALIASES["spans"]:
            value = maybe_json(value)
        elif isinstance(value, str) and key in ALIASES["input"] + ALIASES["output"] + ALIASES["expected_output"]:
            parsed = maybe_json(value)
            value = parsed if is_message_list(parsed) else value
        decoded[key] = value
    return decoded


def normalize_record(record: dict[str, Any], *, from_text: bool = False) -> dict[str, Any]:
    """Validate one record and return the canonical trace fields (all but date/source_file/source_line)."""
    if from_text:
        record = _decode_text_cells(record)

    trace_id, key = _first(record, "trace_id")
    if isinstance(trace_id, str):
        trace_id = trace_id.strip()
    elif isinstance(trace_id, int) and not isinstance(trace_id, bool):
        trace_id = str(trace_id)
    elif trace_id is not None:
        raise RowError("invalid_type:trace_id", f"field '{key}' value {preview(trace_id)} is not a string")
    if not trace_id:
        raise RowError("missing_field:trace_id", "required field 'trace_id' is missing or empty")

    raw_ts, key = _first(record, "timestamp")
    if raw_ts is None or (isinstance(raw_ts, str) and not raw_ts.strip()):
        raise RowError("missing_field:timestamp", "required field 'timestamp' is missing or empty")
    timestamp = parse_timestamp(raw_ts, key)

    row: dict[str, Any] = {"trace_id": trace_id, "timestamp": timestamp}
    row["input"], row["input_messages"] = text_and_messages(_first(record, "input")[0], "user")
    row["output"], row["output_messages"] = text_and_messages(_first(record, "output")[0], "assistant")
    row["expected_output"], _ = text_and_messages(_first(record, "expected_output")[0], "assistant")
    row["context"] = _context(_first(record, "context")[0])

    metadata = _metadata(_first(record, "metadata")[0])
    for meta_key, value in record.items():
        if isinstance(meta_key, str) and meta_key.startswith("metadata.") and value is not None:
            metadata.setdefault(meta_key[len("metadata.") :], value)
    for meta_key in METADATA_EXTRAS:
        value, _ = _first(record, meta_key, METADATA_EXTRAS)
        if value is not None:
            metadata.setdefault(meta_key, value)
    row["metadata"] = dumps(metadata)
    for field in ("session_id", "user_id"):
        value, _ = _first(record, field, METADATA_EXTRAS)
        row[field] = None if value is None else _label(value, field)

    for field in ("project_id", "model", "experiment_id", "variant"):
        value, key = _first(record, field)
        row[field] = None if value is None else _label(value, field)

    for field, integer in (
        ("latency_ms", False),
        ("prompt_tokens", True),
        ("completion_tokens", True),
        ("cost_usd", False),
    ):
        value, key = _first(record, field)
        row[field] = None if value is None else _number(value, field, integer=integer)
    if row["latency_ms"] is None:
        end, key = _first(record, "end_time")
        if end is not None:
            latency = (parse_timestamp(end, key) - timestamp).total_seconds() * 1000
            if latency < 0:
                raise RowError("negative_value:latency_ms", f"field '{key}' is before the timestamp")
            row["latency_ms"] = latency
    if row["latency_ms"] is not None:
        row["latency_ms"] = float(row["latency_ms"])
    if row["cost_usd"] is not None:
        row["cost_usd"] = float(row["cost_usd"])

    spans, _ = _first(record, "spans")
    if spans is not None and not isinstance(spans, list):
        raise RowError("invalid_type:spans", f"field 'spans' value {preview(spans)} is not a list")
    row["spans"] = None if spans is None else dumps(spans)
    return row
