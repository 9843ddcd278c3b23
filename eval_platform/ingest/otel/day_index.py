"""Pass 1's index of an OTLP day (`day.py`) on disk, so that it costs the same memory whatever the day's size.

Pass 1 writes one *observation* per span and per log record naming a trace: (its place in reading order, its
request, its file, span or log record, whether the file is of the previous day, or of the day before that
(`early`: its ids only, see `assembly.py`), whether the span has no parent, its trace id), a chunk of
`chunk_rows` at a time, to a Parquet file, and one hash per request (of the trace ids it holds) to a flat file.
Nothing per trace is held in Python.

Pass 2 then asks, with DuckDB over that file (under a memory limit, spilling to the same folder: its aggregation
and sort run out of core):

- `traces`: the traces of the day: those with a span in the day's own folder, and those of the previous day
  whose root never arrived (a span in the previous day's folder, no span without a parent in either folder, no
  observation two days back), one row each with the request of its first observation, the request of its last
  (where it ends), its place in reading order (its first span's observation), its id and whether it has an
  observation two days back (`early`), sorted by its first observation (early observations are never read again
  and count for none of these). Pass 2 reads the requests in order and takes each
  trace from this stream when it reaches the trace's first request, dropping it at its last: it holds only the
  traces open at the request it reads (first <= request <= last), and knows exactly which of a request's spans
  and log records belong to a trace of the day (those whose trace is open: a trace not in the stream is not
  of the day). Nothing is approximate: a span is held or not by its trace id's exact presence;
- `carried_needed`: which files of the previous day hold a span or log record of a trace of the day;
- `checks`: the hashes of a file's requests, in order, read from the flat file.

Requests of a file whose reading failed part-way (pass 1 never committed it: `dead`) are left out.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from eval_platform.ingest.day_spill import spilling_duckdb

CHUNK_ROWS = 100_000  # observations per row group of the index file (what pass 1 holds of it)
STREAM_ROWS = 10_000  # traces fetched at a time from the sorted stream
_CHECK = array("q").itemsize  # bytes per request's hash
_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("request", pa.int64()),
        ("source", pa.int32()),
        ("span", pa.bool_()),
        ("carried", pa.bool_()),
        ("early", pa.bool_()),
        ("root", pa.bool_()),
        ("trace_id", pa.string()),
    ]
)

# request, source, span, carried, early, root, trace id: the columns of the observations not yet written
_Columns = tuple[list[int], list[int], list[bool], list[bool], list[bool], list[bool], list[str]]


class DayIndex:
    """The observations of pass 1, in `folder`; see the module docstring."""

    def __init__(self, folder: Path, chunk_rows: int | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.chunk_rows = folder, chunk_rows or CHUNK_ROWS
        self.observations = 0
        self._path = folder / "observations.parquet"
        self._writer: pq.ParquetWriter | None = None
        self._columns: _Columns = ([], [], [], [], [], [], [])
        self._checks_path = folder / "checks.bin"
        self._checks: BinaryIO | None = self._checks_path.open("wb")
        self._pending = array("q")  # the hashes of the requests added since the last write to `_checks`
        self._requests = 0
        self._conn: duckdb.DuckDBPyConnection | None = None

    # pass 1
    def add(
        self,
        number: int,
        source: int,
        carried: bool,
        span_ids: list[str],
        event_ids: list[str | None],
        roots: list[bool] | None = None,
        early: bool = False,
        check: int | None = None,
    ) -> None:
        """Request `number` (the next one: requests are added in order) of file `source`: its spans' and log
        records' trace ids (a log record without one names no trace), and which spans have no parent (`roots`).
        `check`: the request's hash when the ids given are only some of its own (`OtelDay`'s `traces`)."""
        assert number == self._requests and self._checks is not None, "requests are added once each, in order"
        self._requests += 1
        self._pending.append(hash((tuple(span_ids), tuple(event_ids))) if check is None else check)
        if len(self._pending) >= STREAM_ROWS:
            self._pending.tofile(self._checks)
            self._pending = array("q")
        named = [t for t in event_ids if t is not None]
        count = len(span_ids) + len(named)
        if not count:
            return
        requests, sources, spans, carrieds, earlies, parentless, trace_ids = self._columns
        requests += [number] * count
        sources += [source] * count
        spans += [True] * len(span_ids) + [False] * len(named)
        carrieds += [carried] * count
        earlies += [early] * count
        parentless += (roots if roots is not None else [False] * len(span_ids)) + [False] * len(named)
        trace_ids += span_ids
        trace_ids += named
        if len(trace_ids) >= self.chunk_rows:
            self._flush()

    def _flush(self) -> None:
        requests, sources, spans, carrieds, earlies, parentless, trace_ids = self._columns
        if not trace_ids:
            return
        seq = range(self.observations, self.observations + len(trace_ids))
        columns = (seq, requests, sources, spans, carrieds, earlies, parentless, trace_ids)
        arrays = [pa.array(column, f.type) for column, f in zip(columns, _SCHEMA, strict=True)]
        table = pa.Table.from_arrays(arrays, schema=_SCHEMA)
        if self._writer is None:
            self._writer = pq.ParquetWriter(str(self._path), _SCHEMA)
        self._writer.write_table(table)
        self.observations += len(trace_ids)
        self._columns = ([], [], [], [], [], [], [])

    def seal(self) -> None:
        """Pass 1 is over: write what is held."""
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._checks is not None:
            self._pending.tofile(self._checks)
            self._pending = array("q")
            self._checks.close()
            self._checks = None

    # pass 2
    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self._conn is None:
            self._conn = spilling_duckdb(self.folder / "duckdb")
        return self._conn

    def _alive(self, dead: list[tuple[int, int]]) -> str:
        """A SQL condition: the observation is in a request pass 1 committed."""
        return " AND ".join(f"NOT (request >= {a} AND request < {b})" for a, b in dead) or "TRUE"

    def _of_the_day(self, alive: str) -> str:
        """SQL: the day's traces, grouped by trace id (module docstring)."""
        return (
            f"FROM read_parquet('{self._path}') WHERE {alive} GROUP BY trace_id "
            "HAVING bool_or(span AND NOT carried) OR (bool_or(span AND carried AND NOT early) "
            "AND NOT bool_or(early) AND NOT bool_or(span AND root))"
        )

    def traces(self, dead: list[tuple[int, int]]) -> Iterator[tuple[int, int, int, str, bool]]:
        """The day's traces as (first request, last request, place in reading order, trace id, whether it has an
        observation two days back), sorted by their first observation."""
        if not self.observations:
            return
        cursor = self._connect().cursor()
        cursor.execute(
            "SELECT min(request) FILTER (WHERE NOT early), max(request) FILTER (WHERE NOT early), "
            "min(seq) FILTER (WHERE span AND NOT early), trace_id, bool_or(early) "
            f"{self._of_the_day(self._alive(dead))} ORDER BY min(seq) FILTER (WHERE NOT early)"
        )
        try:
            while batch := cursor.fetchmany(STREAM_ROWS):
                yield from batch
        finally:
            cursor.close()

    def carried_needed(self, dead: list[tuple[int, int]]) -> set[int]:
        """The files (their `source` number) of the previous day holding a span or log record of a trace of the
        day."""
        if not self.observations:
            return set()
        alive, observations = self._alive(dead), f"read_parquet('{self._path}')"
        found = self._connect().execute(
            f"SELECT DISTINCT source FROM {observations} WHERE carried AND NOT early AND {alive} AND trace_id IN "
            f"(SELECT trace_id {self._of_the_day(alive)})"
        )
        return {source for (source,) in found.fetchall()}

    def ids_by_source(self) -> dict[int, list[str]]:
        """The trace ids each file (its `source` number) names in a span or log record, sorted."""
        if not self.observations:
            return {}
        found = self._connect().execute(
            "SELECT source, list(DISTINCT trace_id ORDER BY trace_id) "
            f"FROM read_parquet('{self._path}') GROUP BY source"
        )
        return {source: ids for source, ids in found.fetchall()}

    def checks(self, first: int, end: int) -> Iterator[int]:
        """The hashes of requests `first` ... `end - 1`, in order."""
        with self._checks_path.open("rb") as handle:
            handle.seek(first * _CHECK)
            for start in range(first, end, STREAM_ROWS):
                chunk = array("q")
                chunk.frombytes(handle.read(min(STREAM_ROWS, end - start) * _CHECK))
                yield from chunk

    def close(self) -> None:
        """Release DuckDB (the folder's files are its owner's to remove)."""
        self.seal()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
