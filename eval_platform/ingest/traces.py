"""Read one UTC day of trace exports into canonical traces plus a quarantine of rejected rows.

`read_trace_day(data_root, day)` reads every file under `<data_root>/traces/<day>/` (recursively, sorted by
relative path; hidden files and folders are skipped; a missing folder is an empty day). Supported files and
how they split into rows are described in `readers.py` (JSONL, JSON, CSV, Parquet, OTLP/JSON, optionally
gzip-compressed); how a row becomes a canonical trace, the field aliases and the value rules in
`records.py`; the OTLP GenAI mapping in `otlp.py`.

Nothing is dropped silently. Each rejected row becomes a quarantine row (source `traces`, partition = day)
with its file (relative to the data root), 1-based line (null when the whole file is rejected), a reason
code, a detail sentence naming the file, line and field, and the raw text (first 10,000 characters).

Reason codes:
- file level: `unsupported_file_type`, `unreadable_file`, `invalid_encoding`, `invalid_json` (a `.json` file
  that does not parse), `not_an_object` (a `.json` file holding a scalar);
- row level: `invalid_json`, `invalid_encoding`, `not_an_object`, `malformed_csv_row`,
  `missing_field:trace_id`, `missing_field:timestamp`, `invalid_timestamp`, `invalid_type:<field>`,
  `negative_value:<field>`, `duplicate_trace_id` (the first occurrence in file/line order wins);
- OTLP: `invalid_otlp:<what>`, `no_genai_span`;
- `unexpected_error`: a bug in the ingest itself met this row (it is kept rather than crashing the day).

A trace is kept under the day folder it was exported to, even if its own timestamp falls on another day
(late or early exports); `date` is always the partition day.

`counts` conserves rows: for every file and in total, `read == accepted + quarantined` (a file rejected as
a whole counts as one row read). Its layout: `{"read", "accepted", "quarantined", "by_reason": {reason: n},
"files": {file: {"read", "accepted", "quarantined", "by_reason"}}}`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.ingest.common import Candidate, RowError, dumps
from eval_platform.ingest.otel.day import ModelledTrace, OtelDay
from eval_platform.ingest.quarantine import quarantine_frame, quarantine_row, utc_now
from eval_platform.ingest.readers import file_kind, head_text, read_candidates
from eval_platform.ingest.records import normalize_record
from eval_platform.schemas import SPAN_SCHEMA, TRACE_SCHEMA, conform, empty_frame

SOURCE = "traces"
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass
class TraceDay:
    """The traces of one day partition, their spans (SPAN_SCHEMA), its quarantine, the files read and the counts."""

    traces: pl.DataFrame
    quarantine: pl.DataFrame
    spans: pl.DataFrame = field(default_factory=lambda: empty_frame(SPAN_SCHEMA))
    files: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    day: str = ""


def traces_dir(data_root: Path, day: str) -> Path:
    return Path(data_root) / "traces" / day


def list_trace_files(data_root: Path, day: str) -> list[Path]:
    """The files `read_trace_day` reads for `day`, in reading order."""
    folder = traces_dir(data_root, day)
    if not folder.is_dir():
        return []
    files = [
        path
        for path in folder.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    ]
    return sorted(files, key=lambda path: path.relative_to(folder).as_posix())


def _check_day(day: str) -> None:
    try:
        if not _DAY.match(day):
            raise ValueError
        date.fromisoformat(day)
    except (TypeError, ValueError):
        raise ValueError(f"trace day partition must be a UTC date YYYY-MM-DD, got {day!r}") from None


class _Tally:
    def __init__(self) -> None:
        self.total: dict[str, Any] = {"read": 0, "accepted": 0, "quarantined": 0, "by_reason": {}, "files": {}}

    def add(self, file: str, reason: str | None) -> None:
        per_file = self.total["files"].setdefault(file, {"read": 0, "accepted": 0, "quarantined": 0, "by_reason": {}})
        for bucket in (self.total, per_file):
            bucket["read"] += 1
            if reason is None:
                bucket["accepted"] += 1
            else:
                bucket["quarantined"] += 1
                bucket["by_reason"][reason] = bucket["by_reason"].get(reason, 0) + 1

    def touch(self, file: str) -> None:
        self.total["files"].setdefault(file, {"read": 0, "accepted": 0, "quarantined": 0, "by_reason": {}})


def read_trace_day(data_root: Path, day: str, *, now: datetime | None = None) -> TraceDay:
    """Canonical traces (TRACE_SCHEMA), their spans (SPAN_SCHEMA) and quarantine rows (QUARANTINE_SCHEMA) of
    `<data_root>/traces/<day>/` (plus the previous day's spans of traces rooted in this day, see `ingest/otel`).

    `now` stamps `quarantined_at` (default: the current UTC time). Raises ValueError only for a malformed
    `day`; bad files and rows never raise.
    """
    _check_day(day)
    data_root = Path(data_root)
    at = now or utc_now()
    rejected: list[dict[str, Any]] = []
    tally = _Tally()
    files: list[str] = []
    previous, following = (date.fromisoformat(day) + timedelta(days=step) for step in (-1, 1))
    otel = OtelDay(day, following.isoformat())
    accepted: list[_Accepted] = []

    def reject(file: str, line: int | None, unit: str, error: RowError, raw: str | None) -> None:
        where = f"{file} {unit} {line}" if line is not None else file
        rejected.append(
            quarantine_row(
                source=SOURCE,
                partition=day,
                file=file,
                line=line,
                reason=error.reason,
                detail=f"{where}: {error.message}",
                raw=raw,
                at=at,
            )
        )
        tally.add(file, error.reason)

    for path in list_trace_files(data_root, previous.isoformat()):
        kind = file_kind(path)
        if kind in ("json", "jsonl"):  # only the spans of traces rooted today are taken (and counted) from it
            rel = path.relative_to(data_root).as_posix()
            for candidate in _read_quietly(path, kind):
                if candidate.otel is not None:
                    otel.add(candidate.otel, rel, _otel_line(candidate), carried=True)

    for path in list_trace_files(data_root, day):
        rel = path.relative_to(data_root).as_posix()
        files.append(rel)
        tally.touch(rel)
        kind = file_kind(path)
        if kind is None:
            kind_name = "".join(path.suffixes) or path.name
            message = f"files of type '{kind_name}' are not trace exports (expected .jsonl, .json, .csv or .parquet)"
            reject(rel, None, "line", RowError("unsupported_file_type", message), head_text(path))
            continue
        try:
            candidates = read_candidates(path, kind)
        except Exception as exc:  # a reader bug must not crash the partition
            reject(
                rel,
                None,
                "line",
                RowError("unexpected_error", f"the file could not be read ({type(exc).__name__}: {exc})"),
                head_text(path),
            )
            continue
        for candidate in candidates:
            if candidate.otel is not None:
                otel.add(candidate.otel, rel, _otel_line(candidate))
        candidates = [c for c in candidates if c.otel is None]
        normalized = [(c, row) for c in candidates if (row := _normalize(c, rel, kind, reject)) is not None]
        if normalized and not any(_has_text(row) for _, row in normalized):
            # A file with no text in any row (a CSV without input/output columns, say) is quarantined whole,
            # row by row with its raw text: judging it would cost money and say nothing.
            error = RowError(
                "missing_field:input_output",
                "no row of the file has 'input' or 'output' text (nor spans): there is nothing for a judge to read",
            )
            for candidate, _ in normalized:
                reject(rel, candidate.line, candidate.unit, error, candidate.raw)
            continue
        accepted += [_Accepted(rel, c.line, c.unit, row, c.raw) for c, row in normalized]

    for trace in otel.finish():
        try:
            row = normalize_record(trace.record)
        except RowError as error:
            error = RowError(error.reason, f"trace {trace.record['trace_id']}: {error.message}")
            for item in trace.items:
                reject(item.file, item.line, item.unit, error, dumps(item.raw))
            continue
        row.update(trace.extras)
        accepted.append(_Accepted(trace.file, trace.line, trace.unit, row, None, trace))
    for item in otel.rejected:
        reject(item.file, item.line, item.unit, item.error, item.raw)

    order = {file: i for i, file in enumerate(files)}
    accepted.sort(key=lambda entry: (order.get(entry.file, -1), entry.line or 0))  # the first in file/line order wins
    traces, spans = _accept_all(accepted, day, reject, tally)
    rejected.sort(key=lambda row: (order.get(row["file"], -1), row["line"] or 0))  # stable: by file, then line
    trace_frame = (
        conform(pl.DataFrame(traces, schema=TRACE_SCHEMA), TRACE_SCHEMA) if traces else empty_frame(TRACE_SCHEMA)
    )
    span_frame = conform(pl.DataFrame(spans, schema=SPAN_SCHEMA), SPAN_SCHEMA) if spans else empty_frame(SPAN_SCHEMA)
    return TraceDay(
        traces=trace_frame,
        quarantine=quarantine_frame(rejected),
        spans=span_frame,
        files=files,
        counts=tally.total,
        day=day,
    )


def _read_quietly(path: Path, kind: str) -> list[Candidate]:
    try:
        return read_candidates(path, kind)
    except Exception:  # the previous day's own ingest reports its unreadable files
        return []


def _otel_line(candidate: Candidate) -> int | None:
    """The line an OTLP request's items get: its JSONL line or array element; None for a lone document."""
    return candidate.line if candidate.unit in ("line", "element") else None


def _has_text(row: dict[str, Any]) -> bool:
    return bool((row.get("input") or "").strip() or (row.get("output") or "").strip() or row.get("spans"))


def _normalize(candidate: Candidate, rel: str, kind: str, reject: Any) -> dict[str, Any] | None:
    """The canonical trace fields of a candidate, or None after quarantining it with its reason."""
    if candidate.error is not None:
        reject(rel, candidate.line, candidate.unit, candidate.error, candidate.raw)
        return None
    try:
        return normalize_record(candidate.record or {}, from_text=kind == "csv")
    except RowError as error:
        reject(rel, candidate.line, candidate.unit, error, candidate.raw)
    except Exception as exc:  # an ingest bug must not crash the partition nor lose the row
        error = RowError("unexpected_error", f"the row could not be normalized ({type(exc).__name__}: {exc})")
        reject(rel, candidate.line, candidate.unit, error, candidate.raw)
    return None


@dataclass
class _Accepted:
    """A valid trace row waiting for the duplicate check (done in file/line order over every kind of input)."""

    file: str
    line: int | None
    unit: str
    row: dict[str, Any]
    raw: str | None
    otel: ModelledTrace | None = None


def _accept_all(
    accepted: list[_Accepted], day: str, reject: Any, tally: _Tally
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Trace rows and span rows of the accepted candidates; a repeated trace_id is quarantined (all its rows)."""
    traces: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    first_seen: dict[str, str] = {}
    for entry in accepted:
        trace_id = entry.row["trace_id"]
        if trace_id in first_seen:
            message = f"trace_id {trace_id!r} already appeared in {first_seen[trace_id]}; the first occurrence is kept"
            error = RowError("duplicate_trace_id", message)
            if entry.otel is None:
                reject(entry.file, entry.line, entry.unit, error, entry.raw)
            else:
                for item in entry.otel.items:
                    reject(item.file, item.line, item.unit, error, dumps(item.raw))
            continue
        first_seen[trace_id] = f"{entry.file} {entry.unit} {entry.line}" if entry.line is not None else entry.file
        entry.row.update(date=day, source_file=entry.file, source_line=entry.line)
        traces.append(entry.row)
        if entry.otel is None:
            tally.add(entry.file, None)
            continue
        for item in entry.otel.items:
            tally.add(item.file, None)
        spans += [{**span, "date": day} for span in entry.otel.span_rows]
    return traces, spans
