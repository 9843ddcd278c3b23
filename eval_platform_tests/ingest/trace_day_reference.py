"""The trace-day reader as it was before it streamed (commit 9184914, `eval_platform/ingest/traces.py`), kept as
the oracle the streaming reader is compared with (test_trace_stream.py): a day read at once, every row in memory,
its OTLP index too (`otel_day_reference.py`). Not product code: nothing imports it but that test."""

from __future__ import annotations

from array import array
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.ingest.common import Candidate, RowError, dumps
from eval_platform.ingest.otel.day import INVALID_RECORD, OtelDay, Rejected
from eval_platform.ingest.otel.day import reject as reject_item
from eval_platform.ingest.otel.envelope import LogEvent, Span
from eval_platform.ingest.quarantine import quarantine_frame, quarantine_row, utc_now
from eval_platform.ingest.readers import file_kind, head_text, iter_candidates
from eval_platform.ingest.records import normalize_record
from eval_platform.ingest.traces import (
    SOURCE,
    TraceDay,
    _check_day,
    _guarded,
    _has_text,
    _normalize,
    _Tally,
    list_trace_files,
)
from eval_platform.schemas import TRACE_SCHEMA, conform, empty_frame
from eval_platform_tests.ingest.otel_day_reference import InMemoryOtelDay


def read_trace_day(data_root: Path, day: str, *, now: datetime | None = None) -> TraceDay:
    """Canonical traces (TRACE_SCHEMA; an OTLP trace's spans in its row) and quarantine rows (QUARANTINE_SCHEMA) of
    `<data_root>/traces/<day>/` (plus the previous day's spans of traces rooted in this day, see `ingest/otel`).

    `now` stamps `quarantined_at` (default: the current UTC time). Raises ValueError only for a malformed
    `day`, RuntimeError when a file of OTLP requests changes while the day is read (`ingest/otel/day.py`); bad
    files and rows never raise.
    """
    _check_day(day)
    data_root = Path(data_root)
    at = now or utc_now()
    rejected: list[dict[str, Any]] = []
    tally = _Tally()
    files: list[str] = []
    previous, following = (date.fromisoformat(day) + timedelta(days=step) for step in (-1, 1))
    otel = InMemoryOtelDay(day, following.isoformat())
    rows = _Rows(day)

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
            source = otel.source(path.relative_to(data_root).as_posix(), path, kind, carried=True)
            for candidate in _guarded(iter_candidates(path, kind)):
                if isinstance(candidate, Exception):
                    break  # the previous day's own ingest reports its unreadable files
                if candidate.otel is not None:
                    otel.index(source, candidate)
            else:
                otel.commit(source)

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
        source = otel.source(rel, path, kind)
        candidates: list[Candidate] = []
        for candidate in _guarded(iter_candidates(path, kind)):  # a parsed OTLP request is indexed, not kept
            if isinstance(candidate, Exception):  # a reader bug must not crash the partition
                message = f"the file could not be read ({type(candidate).__name__}: {candidate})"
                reject(rel, None, "line", RowError("unexpected_error", message), head_text(path))
                break
            if candidate.otel is not None:
                otel.index(source, candidate)
            else:
                candidates.append(candidate)
        else:
            otel.commit(source)
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
            for candidate, row in normalized:
                key = (len(files) - 1, candidate.line or 0, 0, rows.count)
                rows.add(key, row, (rel, candidate.line, candidate.unit), raw=candidate.raw)

    order = {file: i for i, file in enumerate(files)}
    invalid: list[Rejected] = []
    for trace in otel.finish():  # a trace at a time, as soon as its last request is read
        try:
            row = normalize_record(trace.record)
        except RowError as error:
            error = RowError(error.reason, f"trace {trace.record['trace_id']}: {error.message}")
            invalid += [
                reject_item(item, error, (INVALID_RECORD, trace.index, k)) for k, item in enumerate(trace.items)
            ]
            continue
        row.update(trace.extras)
        key = (order.get(trace.file, -1), trace.line or 0, 1, trace.index)
        rows.add(key, row, (trace.file, trace.line, trace.unit), trace.items)
    for item in sorted([*invalid, *otel.rejected], key=lambda r: r.key):  # the order of a day read at once
        reject(item.file, item.line, item.unit, item.error, item.raw)

    trace_frame = rows.finish(otel, reject, tally)  # the first in file/line order wins
    rejected.sort(key=lambda row: (order.get(row["file"], -1), row["line"] or 0))  # stable: by file, then line
    return TraceDay(
        traces=trace_frame,
        quarantine=quarantine_frame(rejected),
        files=files,
        counts=tally.total,
        day=day,
    )


class _Rows:
    """The day's valid trace rows (an OTLP trace's spans in its row), turned into frames a chunk at a time (a day
    of OTLP traces never holds all its rows as Python dicts), then put in file/line order with a repeated trace_id
    quarantined (the first in that order wins, over every kind of input)."""

    CHUNK = 1_000  # trace rows per chunk

    def __init__(self, day: str) -> None:
        self.day = day
        self.count = 0
        self.keys: list[tuple[int, int, int, int]] = []  # (file order, line, 0: a record / 1: an OTLP trace, index)
        self.trace_ids: list[str] = []
        self.sources: list[tuple[str, int | None, str]] = []  # the row's file, line and unit
        self.raws: dict[int, str] = {}  # a record's raw text (an OTLP trace's rows are read again if repeated)
        self.items: dict[int, array[int]] = {}  # an OTLP trace's rows: request << 24 | position << 1 | is_event
        self._traces: list[dict[str, Any]] = []
        self._trace_columns: dict[str, list[pl.Series]] = {name: [] for name in TRACE_SCHEMA}

    def add(
        self,
        key: tuple[int, int, int, int],
        row: dict[str, Any],
        source: tuple[str, int | None, str],
        items: list[Span | LogEvent] | None = None,
        raw: str | None = None,
    ) -> None:
        """One valid row: a record (its `raw` text) or an OTLP trace (its `items`, its rows)."""
        row.update(date=self.day, source_file=source[0], source_line=source[1])
        self.keys.append(key)
        self.trace_ids.append(row["trace_id"])
        self.sources.append(source)
        if items is None:
            self.raws[self.count] = raw or ""
        else:
            self.items[self.count] = array("q", [i.at[0] << 24 | i.at[1] << 1 | isinstance(i, LogEvent) for i in items])
        self._traces.append(row)
        self.count += 1
        if len(self._traces) >= self.CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self._traces:
            frame = conform(pl.DataFrame(self._traces, schema=TRACE_SCHEMA), TRACE_SCHEMA)
            for name in TRACE_SCHEMA:
                self._trace_columns[name].append(frame[name])
        self._traces = []

    def finish(self, otel: OtelDay, reject: Any, tally: _Tally) -> pl.DataFrame:
        """The trace frame, in order; each repeated trace_id quarantined and the rows counted."""
        self._flush()
        ranked = sorted(range(self.count), key=self.keys.__getitem__)
        first_seen: dict[str, int] = {}
        repeated = []
        for t in ranked:
            if self.trace_ids[t] in first_seen:
                repeated.append(t)
            else:
                first_seen[self.trace_ids[t]] = t
        places = {_place(code) for t in repeated if t in self.items for code in self.items[t]}
        again = otel.items_at(places) if places else {}
        repeated_set, kept = set(repeated), []
        for t in ranked:
            trace_id = self.trace_ids[t]
            if t in repeated_set:
                file, line, unit = self.sources[first_seen[trace_id]]
                where = f"{file} {unit} {line}" if line is not None else file
                message = f"trace_id {trace_id!r} already appeared in {where}; the first occurrence is kept"
                error = RowError("duplicate_trace_id", message)
                if t not in self.items:
                    reject(*self.sources[t], error, self.raws[t])
                for code in self.items.get(t, []):
                    item = again[_place(code)]
                    reject(item.file, item.line, item.unit, error, dumps(item.raw))
                continue
            kept.append(t)
            if t not in self.items:
                tally.add(self.sources[t][0], None)
            for code in self.items.get(t, []):
                tally.add(otel.file_of(code >> 24), None)
        return _gathered(self._trace_columns, TRACE_SCHEMA, pl.Series(kept, dtype=pl.UInt32))


def _place(code: int) -> tuple[int, str, int]:
    return (code >> 24, "event" if code & 1 else "span", (code >> 1) & ((1 << 23) - 1))


def _gathered(columns: dict[str, list[pl.Series]], schema: dict[str, pl.DataType], order: pl.Series) -> pl.DataFrame:
    """The frame of the chunks' rows at `order`, a column at a time (each column's chunks freed once gathered);
    the chunks themselves, not copied, when they are in order already (exporter output usually is: a trace's
    root span ends last, so a trace's last request is its root's)."""
    if not len(order):
        return empty_frame(schema)
    in_order = len(order) == sum(len(chunk) for chunk in columns[next(iter(schema))]) and order.equals(
        pl.Series(range(len(order)), dtype=order.dtype)
    )
    gathered = {}
    for name in schema:
        chunks = columns.pop(name)
        gathered[name] = pl.concat(chunks, rechunk=False)
        if not in_order:
            gathered[name] = gathered[name].gather(order)
        del chunks
    return pl.DataFrame(gathered)
