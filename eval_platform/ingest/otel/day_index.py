"""Pass 1's index of an OTLP day (`day.py`) on disk, so that it costs the same memory whatever the day's size.

Pass 1 writes one *observation* per span and per log record naming a trace: (its place in reading order, its
request, its file, span or log record, whether the file is of the previous day, its trace id), a chunk of
`chunk_rows` at a time, to a Parquet file, and one hash per request (of the trace ids it holds) to a flat file.
Nothing per trace is held in Python.

Pass 2 then asks, with DuckDB over that file (under a memory limit, spilling to the same folder: its aggregation
and sort run out of core):

- `traces`: the traces rooted in the day (a span in the day's own folder), one row each with the request of its
  first observation, the request of its last (where it ends), its place in reading order (its first span's
  observation) and its id, sorted by its first observation. Pass 2 reads the requests in order and takes each
  trace from this stream when it reaches the trace's first request, dropping it at its last: it holds only the
  traces open at the request it reads (first <= request <= last), and knows exactly which of a request's spans
  and log records belong to a trace of the day (those whose trace is open: a trace not in the stream is not
  rooted in the day). Nothing is approximate: a span is held or not by its trace id's exact presence;
- `carried_needed`: which files of the previous day hold a span or log record of a trace rooted in the day;
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
        ("trace_id", pa.string()),
    ]
)


class DayIndex:
    """The observations of pass 1, in `folder`; see the module docstring."""

    def __init__(self, folder: Path, chunk_rows: int | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.chunk_rows = folder, chunk_rows or CHUNK_ROWS
        self.observations = 0
        self._path = folder / "observations.parquet"
        self._writer: pq.ParquetWriter | None = None
        self._columns: tuple[list[int], list[int], list[bool], list[bool], list[str]] = ([], [], [], [], [])
        self._checks_path = folder / "checks.bin"
        self._checks: BinaryIO | None = self._checks_path.open("wb")
        self._pending = array("q")  # the hashes of the requests added since the last write to `_checks`
        self._requests = 0
        self._conn: duckdb.DuckDBPyConnection | None = None

    # pass 1
    def add(self, number: int, source: int, carried: bool, span_ids: list[str], event_ids: list[str | None]) -> None:
        """Request `number` (the next one: requests are added in order) of file `source`: its spans' and log
        records' trace ids (a log record without one names no trace)."""
        assert number == self._requests and self._checks is not None, "requests are added once each, in order"
        self._requests += 1
        self._pending.append(hash((tuple(span_ids), tuple(event_ids))))
        if len(self._pending) >= STREAM_ROWS:
            self._pending.tofile(self._checks)
            self._pending = array("q")
        named = [t for t in event_ids if t is not None]
        count = len(span_ids) + len(named)
        if not count:
            return
        requests, sources, spans, carrieds, trace_ids = self._columns
        requests += [number] * count
        sources += [source] * count
        spans += [True] * len(span_ids) + [False] * len(named)
        carrieds += [carried] * count
        trace_ids += span_ids
        trace_ids += named
        if len(trace_ids) >= self.chunk_rows:
            self._flush()

    def _flush(self) -> None:
        requests, sources, spans, carrieds, trace_ids = self._columns
        if not trace_ids:
            return
        seq = range(self.observations, self.observations + len(trace_ids))
        columns = (seq, requests, sources, spans, carrieds, trace_ids)
        arrays = [pa.array(column, f.type) for column, f in zip(columns, _SCHEMA, strict=True)]
        table = pa.Table.from_arrays(arrays, schema=_SCHEMA)
        if self._writer is None:
            self._writer = pq.ParquetWriter(str(self._path), _SCHEMA)
        self._writer.write_table(table)
        self.observations += len(trace_ids)
        self._columns = ([], [], [], [], [])

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

    def traces(self, dead: list[tuple[int, int]]) -> Iterator[tuple[int, int, int, str]]:
        """The day's traces as (first request, last request, place in reading order, trace id), sorted by their
        first observation."""
        if not self.observations:
            return
        cursor = self._connect().cursor()
        cursor.execute(
            "SELECT min(request), max(request), min(seq) FILTER (WHERE span), trace_id "
            f"FROM read_parquet('{self._path}') WHERE {self._alive(dead)} "
            "GROUP BY trace_id HAVING bool_or(span AND NOT carried) ORDER BY min(seq)"
        )
        try:
            while batch := cursor.fetchmany(STREAM_ROWS):
                yield from batch
        finally:
            cursor.close()

    def carried_needed(self, dead: list[tuple[int, int]]) -> set[int]:
        """The files (their `source` number) of the previous day holding a span or log record of a trace rooted in
        the day."""
        if not self.observations:
            return set()
        alive, observations = self._alive(dead), f"read_parquet('{self._path}')"
        found = self._connect().execute(
            f"SELECT DISTINCT source FROM {observations} WHERE carried AND {alive} AND trace_id IN "
            f"(SELECT trace_id FROM {observations} WHERE span AND NOT carried AND {alive})"
        )
        return {source for (source,) in found.fetchall()}

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
