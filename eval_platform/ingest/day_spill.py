"""The rows of one trace day on their way to the warehouse, in bounded memory whatever the day's size.

`traces.py` reads a day a row (an OTLP trace) at a time; its trace rows (an OTLP trace's spans in its row) and
quarantine rows are
written here, a chunk of `chunk_rows` trace rows at a time, to Parquet files in a temporary folder (each with a
few hidden columns: the row's place in the order a day read at once has, its raw text or OTLP rows), never held.
Once the day is read, `finish` decides what only the whole day can decide, with DuckDB over those files under a
memory limit (it sorts and aggregates out of core, spilling to the same folder):

- a repeated `trace_id`: the first in file/line order is kept, each later one quarantined
  (`duplicate_trace_id`, with its raw text, or its OTLP rows read again from their files);
- the rows of a file found to have no text in any row (quarantined whole) or whose reader failed part-way (the
  file becomes one `unexpected_error` row): dropped from the traces;
- the order of the rows: traces by (file, line) of the row (of the root span),
  quarantine by (file, line) then the order a day read at once rejected them in.

The frames then come out in that order a batch at a time (`traces`, `quarantine`), for a streaming
partition writer. When the day needs none of it (rows already in order, no repeat, nothing dropped: plain exports
usually) the files are read back as they are, without a sort.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb
import polars as pl
import pyarrow.parquet as pq

from eval_platform.ingest.common import RowError, dumps
from eval_platform.ingest.otel.envelope import LogEvent, Span
from eval_platform.schemas import QUARANTINE_SCHEMA, TRACE_SCHEMA, conform

if TYPE_CHECKING:  # otel/day.py's index uses `spilling_duckdb`
    from eval_platform.ingest.otel.day import OtelDay

CHUNK_ROWS = 1_000  # trace rows per chunk written to the spill files
BATCH_ROWS = 10_000  # rows per frame handed out by `traces` / `quarantine`
DUCKDB_MEMORY_LIMIT = "512MB"  # DuckDB's own memory while sorting and deduplicating (it spills beyond it)

_KEY = ("_k0", "_k1", "_k2", "_k3")  # (file order, line, 0: a record / 1: an OTLP trace, index)
_PLACE = ("_o0", "_o1", "_o2", "_o3", "_o4", "_o5")  # (file order, line, phase, a, b, c) of a quarantine row
_TRACE_SPILL = {
    **TRACE_SCHEMA,
    **{name: pl.Int64() for name in _KEY},
    "_seq": pl.Int64(),
    "_unit": pl.String(),
    "_raw": pl.String(),
    "_items": pl.List(pl.Int64()),
}
_QUARANTINE_SPILL = {**QUARANTINE_SCHEMA, **{name: pl.Int64() for name in _PLACE}, "_rseq": pl.Int64()}

# The phases of a quarantine row (its place's third field), in the order a day read at once rejected rows:
# while reading the files, then the OTLP rows (by their `Rejected.key`), then repeated trace ids.
READING, OTLP, DUPLICATE = 0, 1, 2


class Reject(Protocol):
    def __call__(
        self,
        file: str,
        line: int | None,
        unit: str,
        error: RowError,
        raw: str | None,
        place: tuple[int, int, int, int] = ...,
    ) -> None: ...


class _SpillFile:
    """One spill file, written a chunk of dict rows at a time as row groups."""

    def __init__(self, path: Path, schema: dict[str, pl.DataType]) -> None:
        self.path, self.schema = path, schema
        self.rows: list[dict[str, Any]] = []
        self.count = 0
        self._writer: pq.ParquetWriter | None = None

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.count += 1

    def flush(self) -> None:
        if not self.rows:
            return
        table = conform(pl.DataFrame(self.rows, schema=self.schema), self.schema).to_arrow()
        if self._writer is None:
            self._writer = pq.ParquetWriter(str(self.path), table.schema)
        self._writer.write_table(table)
        self.rows = []

    def close(self) -> None:
        self.flush()
        if self._writer is not None:
            self._writer.close()

    @property
    def written(self) -> bool:
        return self._writer is not None

    def sql(self) -> str:
        return f"read_parquet('{self.path}')"


class DaySpill:
    """A day's rows, spilled to `folder` as they are read; see the module docstring."""

    def __init__(self, folder: Path, day: str, chunk_rows: int = CHUNK_ROWS) -> None:
        self.folder, self.day, self.chunk_rows = folder, day, chunk_rows
        self._traces = _SpillFile(folder / "traces.parquet", _TRACE_SPILL)
        self._quarantine = _SpillFile(folder / "quarantine.parquet", _QUARANTINE_SPILL)
        self._accepted: dict[str, int] = {}  # per file, the rows of the trace rows added (until `finish` decides)
        self._traces_in_order = self._quarantine_in_order = True
        self._last_key: tuple[int, ...] = ()
        self._last_place: tuple[int, ...] = ()
        self._dropped: list[tuple[int, int]] = []  # trace rows [start, end) dropped
        self._dropped_rejects: list[tuple[int, int]] = []  # quarantine rows [start, end) dropped
        self._textless: list[tuple[int, int, str, RowError]] = []  # trace rows [start, end) of a file without text
        self._duplicates = False
        self._conn: duckdb.DuckDBPyConnection | None = None

    @property
    def count(self) -> int:
        """Trace rows added so far."""
        return self._traces.count

    def add(
        self,
        key: tuple[int, int, int, int],
        row: dict[str, Any],
        source: tuple[str, int | None, str],
        *,
        accepted: dict[str, int],
        raw: str | None = None,
        items: list[int] | None = None,
    ) -> None:
        """One valid trace row: a record (its `raw` text) or an OTLP trace (its `items`, the codes of its rows; its
        spans are in its row); `accepted`: its rows per file, counted as accepted unless `finish` quarantines it."""
        seq = self._traces.count
        row.update(date=self.day, source_file=source[0], source_line=source[1], _seq=seq, _unit=source[2])
        row.update(zip(_KEY, key, strict=True))
        if items is None:
            row["_raw"] = raw or ""
        else:
            row["_items"] = items
        self._traces.add(row)
        for file, n in accepted.items():
            self._accepted[file] = self._accepted.get(file, 0) + n
        if key < self._last_key:
            self._traces_in_order = False
        self._last_key = key
        if len(self._traces.rows) >= self.chunk_rows:
            self._traces.flush()

    def reject(self, row: dict[str, Any], place: tuple[int, ...]) -> None:
        """One quarantine row (QUARANTINE_SCHEMA) at `place`: (file order, line, phase, a, b, c)."""
        self._quarantine.add({**row, **dict(zip(_PLACE, place, strict=True)), "_rseq": self._quarantine.count})
        if place < self._last_place:
            self._quarantine_in_order = False
        self._last_place = place
        if len(self._quarantine.rows) >= self.chunk_rows:
            self._quarantine.flush()

    def mark(self) -> tuple[int, int]:
        """Where the rows of the file about to be read start (for `rollback` and `textless`)."""
        return self._traces.count, self._quarantine.count

    def rollback(self, mark: tuple[int, int], file: str) -> None:
        """Forget the trace and quarantine rows added since `mark` (all of `file`)."""
        self._drop(mark[0], file)
        if self._quarantine.count > mark[1]:
            self._dropped_rejects.append((mark[1], self._quarantine.count))

    def textless(self, mark: tuple[int, int], file: str, error: RowError) -> None:
        """The trace rows added since `mark` (all of `file`) are quarantined with `error` instead."""
        self._textless.append((mark[0], self._traces.count, file, error))
        self._drop(mark[0], file)

    def _drop(self, start: int, file: str) -> None:
        if self._traces.count > start:
            self._dropped.append((start, self._traces.count))
            self._accepted[file] -= self._traces.count - start

    # once the day is read
    def finish(self, otel: OtelDay, reject: Reject) -> dict[str, int]:
        """Quarantine what only the whole day shows (files without text, repeated trace ids); returns the rows
        accepted per file."""
        self._traces.close()
        conn = self._connect()
        for start, end, file, error in self._textless:
            query = (
                f"SELECT source_line, _unit, _raw FROM {self._traces.sql()} WHERE _seq >= ? AND _seq < ? ORDER BY _seq"
            )
            cursor = conn.execute(query, [start, end])
            while batch := cursor.fetchmany(BATCH_ROWS):
                for line, unit, raw in batch:
                    reject(file, line, unit, error, raw)
        if self._traces.written:
            self._quarantine_duplicates(conn, otel, reject)
        self._quarantine.close()
        return {file: n for file, n in self._accepted.items() if n}

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self._conn is None:
            self._conn = spilling_duckdb(self.folder / "duckdb")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _kept(self, column: str, dropped: list[tuple[int, int]]) -> str:
        """A SQL condition: the row is not in a dropped range."""
        return " AND ".join(f"NOT ({column} >= {a} AND {column} < {b})" for a, b in dropped) or "TRUE"

    def _quarantine_duplicates(self, conn: duckdb.DuckDBPyConnection, otel: OtelDay, reject: Reject) -> None:
        spill, kept = self._traces.sql(), self._kept("_seq", self._dropped)
        repeated = conn.execute(
            f"SELECT count(*) FROM (SELECT trace_id FROM {spill} WHERE {kept} GROUP BY trace_id HAVING count(*) > 1)"
        ).fetchall()
        if not repeated[0][0]:
            return
        self._duplicates = True
        keys = ", ".join(_KEY)
        conn.execute(
            f"CREATE TABLE ranked AS SELECT _seq, trace_id, row_number() OVER (ORDER BY {keys}) AS _rank "
            f"FROM {spill} WHERE {kept}"
        )
        conn.execute(
            "CREATE TABLE duplicates AS "
            "WITH firsts AS (SELECT trace_id, min(_rank) AS first FROM ranked GROUP BY trace_id HAVING count(*) > 1) "
            "SELECT r._seq, r._rank, f.first FROM ranked r JOIN firsts f USING (trace_id) WHERE r._rank > f.first"
        )
        cursor = conn.execute(
            "SELECT d._rank, t.trace_id, t.source_file, t.source_line, t._unit, t._raw, t._items, "
            "o.source_file, o.source_line, o._unit "
            f"FROM duplicates d JOIN {spill} t ON t._seq = d._seq JOIN ranked r ON r._rank = d.first "
            f"JOIN {spill} o ON o._seq = r._seq ORDER BY d._rank"
        )
        while batch := cursor.fetchmany(BATCH_ROWS):
            places = {_place(code) for row in batch for code in row[6] or []}
            again = otel.items_at(places) if places else {}
            for rank, trace_id, file, line, unit, raw, items, first_file, first_line, first_unit in batch:
                where = f"{first_file} {first_unit} {first_line}" if first_line is not None else first_file
                message = f"trace_id {trace_id!r} already appeared in {where}; the first occurrence is kept"
                error = RowError("duplicate_trace_id", message)
                if items is None:
                    reject(file, line, unit, error, raw, (DUPLICATE, rank, 0, 0))
                    self._accepted[file] -= 1
                for k, code in enumerate(items or []):
                    item = again[_place(code)]
                    reject(item.file, item.line, item.unit, error, dumps(item.raw), (DUPLICATE, rank, k, 0))
                    self._accepted[item.file] -= 1

    # the rows, in order
    def _frames(self, sql: str, schema: dict[str, pl.DataType]) -> Iterator[pl.DataFrame]:
        reader = self._connect().cursor().sql(sql).to_arrow_reader(BATCH_ROWS)  # one cursor per stream of rows
        for batch in reader:
            yield conform(pl.from_arrow(batch), schema)  # type: ignore[arg-type]

    def _as_written(self, spill: _SpillFile, schema: dict[str, pl.DataType]) -> Iterator[pl.DataFrame]:
        if not spill.written:
            return
        # Without pre-buffering: with it, pyarrow keeps every row group read so far until the file is closed (the
        # whole spill by the last batch: 0.3 GB of trace rows at a million spans).
        source = pq.ParquetFile(spill.path, pre_buffer=False)
        for batch in source.iter_batches(batch_size=BATCH_ROWS, columns=list(schema)):
            yield conform(pl.from_arrow(batch), schema)  # type: ignore[arg-type]

    def _traces_as_written(self) -> bool:
        return self._traces_in_order and not self._dropped and not self._duplicates

    def traces(self) -> Iterator[pl.DataFrame]:
        """The day's trace rows (TRACE_SCHEMA), in order, a batch at a time."""
        if self._traces_as_written():
            yield from self._as_written(self._traces, TRACE_SCHEMA)
            return
        yield from self._frames(self._select(self._traces, TRACE_SCHEMA, ", ".join(_KEY)), TRACE_SCHEMA)

    def _select(self, spill: _SpillFile, schema: dict[str, pl.DataType], order: str) -> str:
        columns = ", ".join(f's."{name}"' for name in schema)
        duplicates = " ANTI JOIN duplicates d ON s._seq = d._seq" if self._duplicates else ""
        kept = self._kept("s._seq", self._dropped)
        return f"SELECT {columns} FROM {spill.sql()} s{duplicates} WHERE {kept} ORDER BY {order}"

    def quarantine(self) -> Iterator[pl.DataFrame]:
        """The day's quarantine rows (QUARANTINE_SCHEMA), in order, a batch at a time."""
        if self._quarantine_in_order and not self._dropped_rejects:
            yield from self._as_written(self._quarantine, QUARANTINE_SCHEMA)
            return
        if not self._quarantine.written:
            return
        columns = ", ".join(f'"{name}"' for name in QUARANTINE_SCHEMA)
        kept = self._kept("_rseq", self._dropped_rejects)
        order = ", ".join((*_PLACE, "_rseq"))
        sql = f"SELECT {columns} FROM {self._quarantine.sql()} WHERE {kept} ORDER BY {order}"
        yield from self._frames(sql, QUARANTINE_SCHEMA)


def spilling_duckdb(temp: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection for the ingest's out-of-core work: `DUCKDB_MEMORY_LIMIT`, spilling to `temp`."""
    conn = duckdb.connect()
    conn.execute(
        f"SET memory_limit = '{DUCKDB_MEMORY_LIMIT}'; SET temp_directory = '{temp}'; SET threads = 2; "
        "SET TimeZone = 'UTC'"
    )
    return conn


def item_code(item: Span | LogEvent) -> int:
    """An OTLP row (span or log record) as one integer: its request << 24 | its position << 1 | is a log record."""
    return item.at[0] << 24 | item.at[1] << 1 | isinstance(item, LogEvent)


def _place(code: int) -> tuple[int, str, int]:
    """An OTLP row's code (request << 24 | position << 1 | is_event) as (request, "span" | "event", position)."""
    return (code >> 24, "event" if code & 1 else "span", (code >> 1) & ((1 << 23) - 1))
