"""Read one UTC day of trace exports into canonical traces plus a quarantine of rejected rows.

`stream_trace_day` reads the day in bounded memory and hands its rows out in order, a frame at a time (the `traces`
step writes them straight to its partitions; `day_spill.py` says how); `read_trace_day` is the same rows collected
into frames in memory.

`read_trace_day(data_root, day)` reads every file under `<data_root>/traces/<day>/` (recursively, sorted by
relative path; hidden files and folders are skipped; a missing folder is an empty day). Supported files and
how they split into rows are described in `readers.py` (JSONL, JSON, CSV, Parquet, OTLP/JSON, optionally
gzip-compressed); how a row becomes a canonical trace, the field aliases and the value rules in
`records.py`; OTLP traces (whole traces across lines and files, the conventions, the trace model, the rule for
traces over midnight and traces whose root never arrives, which make this read the two previous days' folders
too) in `ingest/otel/`.

Nothing is dropped silently. Each rejected row becomes a quarantine row (source `traces`, partition = day)
with its file (relative to the data root), 1-based line (null when the whole file is rejected), a reason
code, a detail sentence naming the file, line and field, and the raw text (first 10,000 characters).

Reason codes:
- file level: `unsupported_file_type`, `unreadable_file`, `invalid_encoding`, `invalid_json` (a `.json` file
  that does not parse), `not_an_object` (a `.json` file holding a scalar);
- row level: `invalid_json`, `invalid_encoding`, `not_an_object`, `malformed_csv_row`, `truncated_row` (the last
  row of a final file cut in the middle; in a file still being written it is held back instead, not quarantined),
  `missing_field:trace_id`, `missing_field:timestamp`, `invalid_timestamp`, `invalid_type:<field>`,
  `negative_value:<field>`, `duplicate_trace_id` (the first occurrence in file/line order wins);
- OTLP (one row per span or log record): `invalid_otlp:<what>`, `no_genai_span`, `awaiting_root`, `late_span`,
  `late_root`, `duplicate_span_id`, `parent_cycle`, `orphan_event`, `not_a_genai_event`, `not_a_trace:metrics`;
- `unexpected_error`: a bug in the ingest itself met this row (it is kept rather than crashing the day);
- `not_a_day_folder` (`stray_entries`): an entry directly under `traces/` that no day's ingest reads, a folder
  whose name is not a day (`11-26-2026`, `"2026-11-26 "`) or a file outside any day folder. These rows are in one
  quarantine partition of their own (partition `not_a_day`), which every day's ingest rewrites whole: each entry
  is one row however many days are ingested, and it goes once the entry is renamed or moved.

A trace is kept under the day folder it was exported to, even if its own timestamp falls on another day
(late or early exports); `date` is always the partition day.

`counts` conserves rows: for every file and in total, `read == accepted + quarantined` (a file rejected as
a whole counts as one row read; an OTLP row is a span, a log record or an envelope error, and the previous
day's spans taken into this day's traces count under their own file).
Its layout: `{"read", "accepted", "quarantined", "by_reason": {reason: n},
"files": {file: {"read", "accepted", "quarantined", "by_reason"}}}`.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from eval_platform.ingest.common import Candidate, RowError
from eval_platform.ingest.day_spill import CHUNK_ROWS, OTLP, READING, DaySpill, item_code
from eval_platform.ingest.otel.assembly import AWAITING_ROOT, AWAITING_TRACE
from eval_platform.ingest.otel.day import INVALID_RECORD, OtelDay
from eval_platform.ingest.otel.day import reject as reject_item
from eval_platform.ingest.quarantine import quarantine_frame, quarantine_row, utc_now
from eval_platform.ingest.readers import file_kind, head_text, iter_candidates
from eval_platform.ingest.records import normalize_record
from eval_platform.schemas import (
    NOT_A_DAY_FOLDER,
    QUARANTINE_SCHEMA,
    SPAN_SCHEMA,
    TRACE_SCHEMA,
    conform,
    empty_frame,
    spans_view_sql,
)
from eval_platform.settings import file_settle_s

SOURCE = "traces"
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# The quarantine partition (source `traces`) of what under traces/ is in no day folder (`stray_entries`).
NOT_A_DAY_PARTITION = "not_a_day"


@dataclass
class TraceDay:
    """The traces of one day partition, its quarantine, the files read and the counts."""

    traces: pl.DataFrame
    quarantine: pl.DataFrame
    files: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    day: str = ""

    @property
    def spans(self) -> pl.DataFrame:
        """Its OTLP traces' spans (SPAN_SCHEMA), as the `spans` view shows them: the same query over these traces."""
        return span_rows(self.traces)


def span_rows(traces: pl.DataFrame) -> pl.DataFrame:
    """The `spans` view's rows (SPAN_SCHEMA) of a frame of trace rows: `schemas.spans_view_sql` over it."""
    with duckdb.connect() as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.register("day_traces", traces.select("trace_id", "date", "spans", "span_count").to_arrow())
        return conform(conn.sql(spans_view_sql("day_traces")).pl(), SPAN_SCHEMA)


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
        if path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(folder).parts)
        and not is_being_written(path)
    ]
    return sorted(files, key=lambda path: path.relative_to(folder).as_posix())


# A writer's own convention for a file it has not finished: it writes `<name>.tmp` / `<name>.partial` / `<name>.part`
# and renames it when done. Such a file is not read (nor quarantined) until it has its final name.
WRITING_SUFFIXES = (".tmp", ".partial", ".part")


def is_being_written(path: Path) -> bool:
    """Whether the file's name says its writer has not finished it (`WRITING_SUFFIXES`)."""
    return path.name.lower().endswith(WRITING_SUFFIXES)


def file_is_settled(path: Path, now: float, settle_s: float) -> bool:
    """Whether the file's size and modification time have stayed the same for `settle_s` seconds before `now` (a
    POSIX time): a write changes the modification time, so its age says how long nothing was written."""
    return now - path.stat().st_mtime >= settle_s


def is_day_name(name: str) -> bool:
    """Whether `name` is a day as the partitions and the folders under `traces/` spell it: YYYY-MM-DD, a real date."""
    try:
        return bool(_DAY.match(name)) and bool(date.fromisoformat(name))
    except (TypeError, ValueError):
        return False


def _check_day(day: str) -> None:
    if not is_day_name(day):
        raise ValueError(f"trace day partition must be a UTC date YYYY-MM-DD, got {day!r}")


@dataclass(frozen=True)
class StrayEntry:
    """An entry directly under `traces/` that no day's ingest reads."""

    file: str  # relative to the data root; a folder ends with "/"
    day: str | None  # the one day its name reads as (`11-26-2026` -> 2026-11-26), if any
    detail: str  # the sentence for the log and the quarantine row
    raw: str | None  # a folder's files (relative to it), one a line


def _reads_as_day(name: str) -> str | None:
    """The one day a misnamed folder's name reads as: year first (`2026_11_26`, `20261126`, `"2026-11-26 "`), or
    year last, month or day first (`11-26-2026`); None when it reads as no day or as two (`03-04-2026`)."""
    parts = re.findall(r"\d+", name)
    if len(parts) == 1 and len(parts[0]) == 8:
        parts = [parts[0][:4], parts[0][4:6], parts[0][6:]]
    if len(parts) != 3:
        return None
    first, second, third = parts
    orders = [(first, second, third)] if len(first) == 4 else []
    orders += [(third, first, second), (third, second, first)] if len(third) == 4 else []
    days = set()
    for year, month, day in orders:
        try:
            days.add(date(int(year), int(month), int(day)).isoformat())
        except ValueError:
            continue
    return days.pop() if len(days) == 1 else None


def stray_entries(data_root: Path) -> list[StrayEntry]:
    """What directly under `<data_root>/traces/` no day's ingest reads, sorted by name: a folder whose name is not
    a day (YYYY-MM-DD), a file outside any day folder. Hidden entries are skipped, as inside a day folder."""
    base = Path(data_root) / "traces"
    if not base.is_dir():
        return []
    found = []
    for path in sorted(base.iterdir(), key=lambda p: p.name):
        name = path.name
        if name.startswith(".") or (path.is_dir() and is_day_name(name)):
            continue
        day = _reads_as_day(name)
        if path.is_dir():
            files = list_trace_files(data_root, name)
            fix = f"rename it to '{day}' (the day its name reads as)" if day else "move its files to a day folder"
            detail = (
                f"the folder {name!r} under traces/ is not a day (YYYY-MM-DD, a UTC day): its {len(files)} file(s) "
                f"are not read; {fix}"
            )
            raw = "\n".join(p.relative_to(path).as_posix() for p in files) or None
            found.append(StrayEntry(f"traces/{name}/", day, detail, raw))
        else:
            fix = f"move it into traces/{day}/" if day else "move it into its day's folder"
            detail = f"the file {name!r} under traces/ is in no day folder (traces/YYYY-MM-DD/): it is not read; {fix}"
            found.append(StrayEntry(f"traces/{name}", day, detail, None))
    return found


def stray_quarantine(entries: list[StrayEntry], *, now: datetime | None = None) -> pl.DataFrame:
    """The quarantine rows (QUARANTINE_SCHEMA, partition `NOT_A_DAY_PARTITION`) of `stray_entries`."""
    at = now or utc_now()
    return quarantine_frame(
        [
            quarantine_row(
                source=SOURCE,
                partition=NOT_A_DAY_PARTITION,
                file=entry.file,
                line=None,
                reason=NOT_A_DAY_FOLDER,
                detail=entry.detail,
                raw=entry.raw,
                at=at,
            )
            for entry in entries
        ]
    )


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

    def accept(self, file: str, n: int) -> None:
        """`n` rows of `file` accepted."""
        per_file = self.total["files"].setdefault(file, {"read": 0, "accepted": 0, "quarantined": 0, "by_reason": {}})
        for bucket in (self.total, per_file):
            bucket["read"] += n
            bucket["accepted"] += n

    def forget(self, file: str) -> None:
        """Take back every row of `file` counted so far (its reader failed: the file becomes one row)."""
        per_file = self.total["files"][file]
        for name in ("read", "accepted", "quarantined"):
            self.total[name] -= per_file[name]
        for reason, n in per_file["by_reason"].items():
            self.total["by_reason"][reason] -= n
            if not self.total["by_reason"][reason]:
                del self.total["by_reason"][reason]
        self.total["files"][file] = {"read": 0, "accepted": 0, "quarantined": 0, "by_reason": {}}


class TraceDayRows:
    """A day read by `stream_trace_day`: its rows come out in order, a frame of at most `day_spill.BATCH_ROWS` rows at
    a time (`traces()`, `quarantine()`, each iterable once), never all in memory."""

    def __init__(self, spill: DaySpill, files: list[str], counts: dict[str, Any], day: str) -> None:
        self._spill, self.files, self.counts, self.day = spill, files, counts, day
        # files still being written (changed within EVAL_PLATFORM_FILE_SETTLE_S) whose cut last row was not read
        self.waiting: list[str] = []
        self.otlp = False  # whether a file read holds OTLP requests
        self.flat: set[str] = set()  # the files read with trace rows that are not OTLP (flat records)
        self.ids: dict[str, list[str]] = {}  # with `traces`: the trace ids each file read names

    def traces(self) -> Iterator[pl.DataFrame]:
        return self._spill.traces()

    def quarantine(self) -> Iterator[pl.DataFrame]:
        return self._spill.quarantine()


def settled(quarantine: pl.DataFrame, taken: pl.Series | None) -> pl.DataFrame:
    """`quarantine` (a traces day's rows) without its `awaiting_root` rows whose trace is in `taken` (the trace ids
    of the next day's partition, which took them, whole or as a partial trace): they wait no more."""
    if taken is None or not quarantine.height:
        return quarantine
    waits = pl.col("reason") == AWAITING_ROOT
    trace = pl.col("detail").str.extract(AWAITING_TRACE.pattern, 1)
    return quarantine.filter(~(waits & trace.is_in(taken.implode()).fill_null(False)))


def read_trace_day(data_root: Path, day: str, *, now: datetime | None = None) -> TraceDay:
    """Canonical traces (TRACE_SCHEMA; an OTLP trace's spans in its `spans`) and quarantine rows (QUARANTINE_SCHEMA) of
    `<data_root>/traces/<day>/` (plus the previous day's spans of traces rooted in this day, see `ingest/otel`),
    as frames in memory: `stream_trace_day` with its rows collected.

    `now` stamps `quarantined_at` (default: the current UTC time). Raises ValueError only for a malformed
    `day`, RuntimeError when a file of OTLP requests changes while the day is read (`ingest/otel/day.py`); bad
    files and rows never raise.
    """
    with stream_trace_day(data_root, day, now=now) as rows:
        return TraceDay(
            traces=_collected(rows.traces(), TRACE_SCHEMA),
            quarantine=_collected(rows.quarantine(), QUARANTINE_SCHEMA),
            files=rows.files,
            counts=rows.counts,
            day=day,
        )


def _collected(frames: Iterator[pl.DataFrame], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    found = list(frames)
    return pl.concat(found) if found else empty_frame(schema)


@contextmanager
def stream_trace_day(
    data_root: Path,
    day: str,
    *,
    now: datetime | None = None,
    chunk_rows: int = CHUNK_ROWS,
    only: set[str] | None = None,
    traces: set[str] | None = None,
    before: set[str] | None = None,
    file_ids: bool = False,
) -> Iterator[TraceDayRows]:
    """`read_trace_day` in bounded memory: the day is read a row (an OTLP trace) at a time, its rows spilled to a
    temporary folder `chunk_rows` trace rows at a time (`day_spill.py`), and handed out in order, a frame at a
    time, inside the block (the folder is removed after it):

        with stream_trace_day(root, day) as rows:
            for frame in rows.traces(): ...

    The rows, their order, `files` and `counts` are `read_trace_day`'s. Raises as `read_trace_day` does.

    `only` (files relative to the data root): read those of the day's files alone, and no day before (for a day of
    flat files, whose traces take no span of another day: `ingest/increments.py`); `rows.otlp` says whether one
    of them held OTLP after all (its rows are then not the day's).

    `traces` (with `only` and `before`, the files of the two days before to index): the OTLP rows of those traces
    alone (`ingest/otlp_increments.py`), assembled as the whole day would, from the files given, which must hold
    every span and log record of theirs; other rows of those files come out too, the caller's to leave out.
    `rows.ids` then (or with `file_ids`) names the trace ids each file read holds; `rows.flat` the files with flat
    trace rows.
    """
    _check_day(day)
    data_root = Path(data_root)
    at = now or utc_now()
    tally = _Tally()
    files: list[str] = []
    waiting: list[str] = []  # files still being written whose cut end was not read
    order: dict[str, int] = {}  # each file of the day: its place in reading order
    two_back, previous, following = (date.fromisoformat(day) + timedelta(days=step) for step in (-2, -1, 1))
    with tempfile.TemporaryDirectory(prefix="eval_platform-ingest-") as folder:
        spill = DaySpill(Path(folder), day, chunk_rows)
        otel = OtelDay(day, following.isoformat(), Path(folder) / "otlp", traces)
        flat: set[str] = set()  # the files read with trace rows that are not OTLP (flat records)

        def reject(
            file: str,
            line: int | None,
            unit: str,
            error: RowError,
            raw: str | None,
            place: tuple[int, int, int, int] = (READING, 0, 0, 0),
        ) -> None:
            where = f"{file} {unit} {line}" if line is not None else file
            row = quarantine_row(
                source=SOURCE,
                partition=day,
                file=file,
                line=line,
                reason=error.reason,
                detail=f"{where}: {error.message}",
                raw=raw,
                at=at,
            )
            spill.reject(row, (order.get(file, -1), line or 0, *place))
            tally.add(file, error.reason)

        def drain() -> None:  # the OTLP rows quarantined so far, in the order of a day read at once
            for item in otel.rejected:
                reject(item.file, item.line, item.unit, item.error, item.raw, (OTLP, *item.key))  # type: ignore[arg-type]
            otel.rejected.clear()

        try:
            if only is None or before is not None:
                _read_previous_day(data_root, two_back.isoformat(), otel, early=True, only=before)  # ids only
                _read_previous_day(data_root, previous.isoformat(), otel, only=before)
            for path in list_trace_files(data_root, day):
                rel = path.relative_to(data_root).as_posix()
                if only is not None and rel not in only:
                    continue
                order[rel] = len(files)
                files.append(rel)
                tally.touch(rel)
                _read_file(data_root, path, rel, order[rel], otel, spill, reject, tally, waiting, flat)
                drain()
            for trace in otel.finish():  # a trace at a time, as soon as its last request is read
                try:
                    row = normalize_record(trace.record)
                except RowError as error:
                    error = RowError(error.reason, f"trace {trace.record['trace_id']}: {error.message}")
                    otel.rejected += [
                        reject_item(item, error, (INVALID_RECORD, trace.index, k)) for k, item in enumerate(trace.items)
                    ]
                    drain()
                    continue
                row.update(trace.extras)
                accepted: dict[str, int] = {}
                for item in trace.items:
                    accepted[item.file] = accepted.get(item.file, 0) + 1
                spill.add(
                    (order.get(trace.file, -1), trace.line or 0, 1, trace.index),
                    row,
                    (trace.file, trace.line, trace.unit),
                    accepted=accepted,
                    items=[item_code(item) for item in trace.items],
                )
                drain()
            drain()
            for file, n in spill.finish(otel, reject).items():  # the first of a repeated trace_id wins
                tally.accept(file, n)
            rows = TraceDayRows(spill, files, tally.total, day)
            rows.waiting = waiting
            rows.otlp = otel.indexed > 0
            rows.flat = flat
            if traces is not None or file_ids:
                rows.ids = otel.ids_by_file()
            yield rows
        finally:
            otel.close()
            spill.close()


def _read_previous_day(
    data_root: Path, previous: str, otel: OtelDay, *, early: bool = False, only: set[str] | None = None
) -> None:
    """Index the OTLP files of a day before (`early`: two days before, whose spans are never taken); `only`: those
    of its files alone (relative to the data root)."""
    for path in list_trace_files(data_root, previous):
        if only is not None and path.relative_to(data_root).as_posix() not in only:
            continue
        kind = file_kind(path)
        if kind in ("json", "jsonl"):  # only the spans of the day's traces are taken (and counted) from it
            source = otel.source(path.relative_to(data_root).as_posix(), path, kind, carried=True, early=early)
            for candidate in _guarded(iter_candidates(path, kind)):
                if isinstance(candidate, Exception):
                    break  # the previous day's own ingest reports its unreadable files
                if candidate.otel is not None:
                    otel.index(source, candidate)
            else:
                otel.commit(source)


def _read_file(
    data_root: Path,
    path: Path,
    rel: str,
    number: int,
    otel: OtelDay,
    spill: DaySpill,
    reject: Any,
    tally: _Tally,
    waiting: list[str],
    flat: set[str],
) -> None:
    """One file of the day, a row at a time: its records to `spill`, its OTLP requests indexed into `otel`. A file
    changed within `EVAL_PLATFORM_FILE_SETTLE_S` seconds whose end is not whole is named in `waiting`."""
    kind = file_kind(path)
    if kind is None:
        kind_name = "".join(path.suffixes) or path.name
        message = f"files of type '{kind_name}' are not trace exports (expected .jsonl, .json, .csv or .parquet)"
        reject(rel, None, "line", RowError("unsupported_file_type", message), head_text(path))
        return
    final = file_is_settled(path, time.time(), file_settle_s())
    source = otel.source(rel, path, kind)
    mark = spill.mark()
    rows = with_text = 0
    for candidate in _guarded(iter_candidates(path, kind)):  # a parsed OTLP request is indexed, not kept
        if not final and isinstance(candidate, Candidate) and _unfinished(candidate, kind):
            # A file still being written: its cut last row (or, for a whole-file format, the file) is not read
            # now, neither as a trace nor in quarantine; the sensor requests the day again once the file settles.
            waiting.append(rel)
            if candidate.line is None:
                spill.rollback(mark, rel)
                tally.forget(rel)
                return
            continue
        if isinstance(candidate, Exception):  # a reader bug must not crash the partition: the file is one row
            spill.rollback(mark, rel)
            tally.forget(rel)
            message = f"the file could not be read ({type(candidate).__name__}: {candidate})"
            reject(rel, None, "line", RowError("unexpected_error", message), head_text(path))
            return
        if candidate.otel is not None:
            otel.index(source, candidate)
            continue
        row = _normalize(candidate, rel, kind, reject)
        if row is None:
            continue
        flat.add(rel)
        rows += 1
        with_text = with_text or _has_text(row)
        source_of = (rel, candidate.line, candidate.unit)
        spill.add((number, candidate.line or 0, 0, spill.count), row, source_of, accepted={rel: 1}, raw=candidate.raw)
    otel.commit(source)
    if rows and not with_text:
        # A file with no text in any row (a CSV without input/output columns, say) is quarantined whole,
        # row by row with its raw text: judging it would cost money and say nothing.
        error = RowError(
            "missing_field:input_output",
            "no row of the file has 'input' or 'output' text (nor spans): there is nothing for a judge to read",
        )
        spill.textless(mark, rel, error)


def _unfinished(candidate: Candidate, kind: str) -> bool:
    """Whether a candidate of a file that is not settled may be a row (or a file) cut by its writer: a last row
    that is not whole, any unterminated last CSV row (its last field may be cut mid-text), or a whole-file format
    (JSON, Parquet, gzip) that does not read."""
    if candidate.unterminated:
        return candidate.error is not None or kind == "csv"
    return candidate.line is None and candidate.error is not None and candidate.error.reason in _UNREADABLE


_UNREADABLE = ("invalid_json", "unreadable_file")


def _guarded(candidates: Iterator[Candidate]) -> Iterator[Candidate | Exception]:
    """The candidates of a file, then the exception that stopped its reader (a reader bug), if one did."""
    try:
        yield from candidates
    except Exception as exc:
        yield exc


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
        unexpected = RowError("unexpected_error", f"the row could not be normalized ({type(exc).__name__}: {exc})")
        reject(rel, candidate.line, candidate.unit, unexpected, candidate.raw)
    return None
