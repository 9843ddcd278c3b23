"""Parquet partitions under `<warehouse>/<table>/<key>=<value>/part.parquet` and the DuckDB catalog.

The warehouse is `<data root>/warehouse` on local disk by default, or `s3://bucket/prefix` on an S3-compatible
store (`storage/location.py` says how each writes a file whole). Every function here takes the data root as a
`DataRoot` (its folder and its store, built where the process starts) and works on either store.

A partition is one file, replaced whole: on local disk written to a temporary name in its folder and renamed over
the old one, on a bucket put as one object (visible only once complete). A re-materialized partition replaces the
previous rows whole, a crash leaves the old file or the new one, never half of either, and parallel partition
runs never share a writer. Local temporary files are named
`.part-<random>.tmp` so that no reader's pattern (`**/part.parquet`) can match them; a kill -9 mid-write
leaves one behind, which is never read as data and is removed once it is old enough that no write can
still be using it (by the next write of that partition and by every catalog refresh).

The DuckDB file (always on local disk, under the data root) holds one view per table over
`<table>/**/part.parquet`; for a bucket the views name `s3://` URLs, which a connection from `connect` or
`open_catalog` reads through pyarrow (nothing is downloaded), and a DuckDB session with the httpfs extension
and an S3 secret reads as they are (README "Query with SQL"). Every table also has a 0-row
file with its columns (`<table>/_schema/part.parquet`), so its view is valid before the first partition
and its definition never changes afterwards: new partitions show up in the views without touching the
DuckDB file. The file is (re)written only when the set of views changes (a first run, a new version), by
one process at a time under a lock; if it stays locked (an analyst's session holding it open) past a bounded
wait, the refresh raises `CatalogLocked`, naming the file, and the run fails instead of leaving stale views.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq

from eval_platform.schemas import QUARANTINE_SCHEMA, conform
from eval_platform.settings import duckdb_path, warehouse_dir
from eval_platform.storage.location import BATCH_ROWS, TEMP_PREFIX, TEMP_SUFFIX, DataRoot, LocalStore, Store

PARTITION_FILE = "part.parquet"
# A partition made of parts (`storage/parts.py`): `<partition>/src=<name>/part.parquet`, one per source, read together
# as the partition; a partition written whole is its one `<partition>/part.parquet`. Never both at once: each
# writer removes the other layout's files before its own file appears.
PART_KEY = "src"
SCHEMA_DIR = "_schema"  # the 0-row file giving a table's columns before it has partitions
# A temporary file this old belongs to no write still in progress (a write takes seconds).
STALE_TEMP_S = 15 * 60


class CatalogLocked(RuntimeError):
    """The DuckDB catalog could not be updated because another process holds the file."""


def _parts(table: str, keys: dict[str, str]) -> tuple[str, ...]:
    return (table, *(f"{name}={value}" for name, value in keys.items()))


def partition_dir(root: DataRoot, table: str, keys: dict[str, str]) -> Path:
    """The partition's folder in the local warehouse (the default store; a bucket has no folders)."""
    return warehouse_dir(root.path).joinpath(*_parts(table, keys))


def write_partition(root: DataRoot, table: str, keys: dict[str, str], frame: pl.DataFrame) -> Path | str:
    """Atomically replace one partition's Parquet file with `frame` (an empty frame still writes a file); returns
    its path (local disk) or URL (a bucket). A partition made of parts loses them (just before the file appears)."""
    store = root.store
    if isinstance(store, LocalStore):
        remove_stale_temp_files(partition_dir(root, table, keys), recursive=False)
    top = (*_parts(table, keys), PARTITION_FILE)
    with store.staged(top) as tmp:
        frame.write_parquet(tmp)
        remove_parts(store, table, keys)
    return _file_location(store, top)


def _file_location(store: Store, parts: tuple[str, ...]) -> Path | str:
    return store.folder.joinpath(*parts) if isinstance(store, LocalStore) else store.location(*parts)


def part_files(store: Store, table: str, keys: dict[str, str]) -> list[tuple[str, ...]]:
    """The files of one partition: its whole file, or its parts (`<partition>/src=<name>/part.parquet`) in name
    order; as parts relative to the warehouse. Files of partitions under it (other keys) are not its."""
    base = _parts(table, keys)
    found = store.files(base, PARTITION_FILE)
    top = (*base, PARTITION_FILE)
    n = len(base)
    return [f for f in found if f == top] + [f for f in found if len(f) == n + 2 and f[n].startswith(f"{PART_KEY}=")]


def remove_parts(store: Store, table: str, keys: dict[str, str], keep_whole: bool = True) -> None:
    """Remove a partition's parts (and its whole file too unless `keep_whole`)."""
    top = (*_parts(table, keys), PARTITION_FILE)
    for found in part_files(store, table, keys):
        if found != top or not keep_whole:
            store.delete(found)


class PartitionWriter:
    """Writes one partition's rows a frame at a time (`write`), as row groups of one Parquet file; see
    `partition_writer`. Holds at most `row_group_rows` rows before writing them."""

    def __init__(
        self,
        path: Path,
        schema: dict[str, pl.DataType],
        row_group_rows: int,
        metadata: dict[str, str] | None = None,
    ) -> None:
        self.schema = schema
        self.rows = 0
        self._row_group_rows = row_group_rows
        self._pending: list[pl.DataFrame] = []
        self._pending_rows = 0
        empty = conform(pl.DataFrame(schema=schema), schema).to_arrow()
        arrow_schema = empty.schema.with_metadata(metadata) if metadata else empty.schema
        self._writer = pq.ParquetWriter(str(path), arrow_schema)

    def write(self, frame: pl.DataFrame) -> None:
        """Append `frame`'s rows (conformed to the schema: the file's columns never vary between row groups)."""
        if frame.height == 0:
            return
        self._pending.append(conform(frame, self.schema))
        self._pending_rows += frame.height
        self.rows += frame.height
        if self._pending_rows >= self._row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pl.concat(self._pending, rechunk=True).to_arrow())
        self._pending, self._pending_rows = [], 0

    def _close(self, complete: bool = True) -> None:
        if complete:
            self._flush()
        self._writer.close()


# Rows per row group of a streamed partition: a few MB of trace rows each (readers scan them one at a time).
ROW_GROUP_ROWS = 20_000


@contextmanager
def partition_writer(
    root: DataRoot,
    table: str,
    keys: dict[str, str],
    schema: dict[str, pl.DataType],
    row_group_rows: int = ROW_GROUP_ROWS,
) -> Iterator[PartitionWriter]:
    """`write_partition` for rows that arrive a frame at a time, so a partition larger than memory can be written:

        with partition_writer(root, "traces", {"date": day}, TRACE_SCHEMA) as out:
            for frame in frames:
                out.write(frame)

    The frames go to a local temporary file (pyarrow's ParquetWriter, one row group per `row_group_rows` rows),
    which replaces the partition when the block ends without an exception, exactly as `write_partition`'s one
    frame does (the store's `staged`: a rename on local disk, one put on a bucket). An exception in the block, or a
    kill, leaves the previous partition (or none) whole; no rows at all still write a 0-row file."""
    store = root.store
    if isinstance(store, LocalStore):
        remove_stale_temp_files(store.folder.joinpath(*_parts(table, keys)), recursive=False)
    with store.staged((*_parts(table, keys), PARTITION_FILE)) as tmp:
        writer = PartitionWriter(tmp, schema, row_group_rows)
        try:
            yield writer
        except BaseException:
            writer._close(complete=False)  # the temporary file is discarded by `staged`
            raise
        writer._close()
        remove_parts(store, table, keys)  # a partition made of parts: never its rows twice, the file comes next


def write_file(root: DataRoot, table: str, keys: dict[str, str], name: str, data: bytes) -> Path | str:
    """Atomically replace one file of a non-Parquet output (a fine-tuning export's JSONL) under the partition's
    folder, as `write_partition` replaces a Parquet file; returns its path or URL. No view reads it."""
    store = root.store
    if isinstance(store, LocalStore):
        remove_stale_temp_files(store.folder.joinpath(*_parts(table, keys)), recursive=False)
    return store.write_bytes((*_parts(table, keys), name), data)


def read_file(root: DataRoot, table: str, keys: dict[str, str], name: str) -> bytes | None:
    """The bytes of a file written by `write_file`, or None when it does not exist."""
    return root.store.read_bytes((*_parts(table, keys), name))


def remove_stale_temp_files(folder: Path, recursive: bool = True, older_than_s: float = STALE_TEMP_S) -> int:
    """Delete temporary files left by killed writes (this naming and the earlier `.tmp-*.parquet`)."""
    if not folder.is_dir():
        return 0
    patterns = [f"{TEMP_PREFIX}*{TEMP_SUFFIX}", ".tmp-*.parquet"]
    found = [p for pattern in patterns for p in (folder.rglob(pattern) if recursive else folder.glob(pattern))]
    cutoff = time.time() - older_than_s
    removed = 0
    for path in found:
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            pass  # another process cleaned it first
    return removed


def read_partition(
    root: DataRoot, table: str, keys: dict[str, str], columns: list[str] | None = None
) -> pl.DataFrame | None:
    """One partition's rows (only `columns`, when given; every part of a partition made of parts), or None when it
    has no file."""
    store = root.store
    files = part_files(store, table, keys)
    if len(files) <= 1:
        return store.read(files[0] if files else (*_parts(table, keys), PARTITION_FILE), columns)
    frames = [frame for frame in (store.read(f, columns) for f in files) if frame is not None]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def partition_schema(root: DataRoot, table: str, keys: dict[str, str]) -> dict[str, pl.DataType] | None:
    """One partition's columns as its file (its first part) has them (the file is not read), or None when it has
    no file."""
    store = root.store
    files = part_files(store, table, keys)
    return store.schema(files[0]) if files else None


def iter_partition(
    root: DataRoot, table: str, keys: dict[str, str], batch_rows: int = BATCH_ROWS, columns: list[str] | None = None
) -> Iterator[pl.DataFrame] | None:
    """A partition in frames of at most `batch_rows` rows (a part after another), read from the store as they are
    consumed (memory: one row group and one frame, on either store); None when the partition was never written."""
    store = root.store
    files = part_files(store, table, keys)
    if len(files) <= 1:
        return store.batches(files[0] if files else (*_parts(table, keys), PARTITION_FILE), batch_rows, columns)

    def every_part() -> Iterator[pl.DataFrame]:
        for found in files:
            batches = store.batches(found, batch_rows, columns)
            if batches is not None:  # a part removed since it was listed (a run replacing it) is not read
                yield from batches

    return every_part()


def partition_path(root: DataRoot, table: str, keys: dict[str, str]) -> Path | str:
    """Where a partition's rows are: its file's path on local disk, its URL on a bucket (what `write_partition`
    returns); for a partition made of parts, the pattern of its parts (`<partition>/**/part.parquet`), which
    polars and DuckDB read as one."""
    store, base = root.store, _parts(table, keys)
    files = part_files(store, table, keys)
    if len(files) > 1 or (files and files[0] != (*base, PARTITION_FILE)):
        return store.location(*base, "**", PARTITION_FILE)
    return _file_location(store, (*base, PARTITION_FILE))


def table_glob(root: DataRoot, table: str) -> str:
    """Every partition file of a table (and its 0-row schema file once the catalog exists); never a temp file.
    On a bucket it is an `s3://` URL: read it with `scan_parquet` (polars) or a `connect` connection (DuckDB)."""
    return root.store.location(table, "**", PARTITION_FILE)


def has_files(root: DataRoot, table: str) -> bool:
    """Whether the table has at least one partition (its schema file does not count)."""
    return any(parts[1] != SCHEMA_DIR for parts in root.store.files((table,), PARTITION_FILE))


def partition_values(root: DataRoot, table: str, keys: dict[str, str], key: str) -> list[str]:
    """The values of `key` (`key=<value>` folders) under the partition `keys` of a table, sorted as text."""
    prefix = f"{key}="
    children = root.store.children(_parts(table, keys))
    return [name.removeprefix(prefix) for name in children if name.startswith(prefix)]


def partition_files(root: DataRoot, table: str, key: str) -> dict[str, str]:
    """Per value of a table's first partition key (`key=<value>` folders), the glob of that value's partition
    files, for the values with at least one: reading one evaluator's judge_scores opens only its own files."""
    store = root.store
    prefix = f"{key}="
    values = sorted({parts[1] for parts in store.files((table,), PARTITION_FILE) if parts[1].startswith(prefix)})
    return {value.removeprefix(prefix): store.location(table, value, "**", PARTITION_FILE) for value in values}


def scan_parquet(root: DataRoot, source: str | list[str], **options) -> pl.LazyFrame:
    """`pl.scan_parquet` over locations from `table_glob` / `partition_files`, on whichever store holds them."""
    return pl.scan_parquet(source, storage_options=root.store.storage_options, **options)


def read_parquet(root: DataRoot, source: str | list[str], **options) -> pl.DataFrame:
    """`pl.read_parquet` over locations from `table_glob` / `partition_files`, on whichever store holds them."""
    return pl.read_parquet(source, storage_options=root.store.storage_options, **options)


@contextmanager
def connect(root: DataRoot, database: str = ":memory:", read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection that reads the warehouse's locations (`table_glob`, the catalog's views) on either
    store: on a bucket, through pyarrow's S3 filesystem, so no DuckDB extension is downloaded."""
    with duckdb.connect(database, read_only=read_only) as conn:
        root.store.register(conn)
        yield conn


def open_catalog(root: DataRoot | Path | str | None = None) -> duckdb.DuckDBPyConnection:
    """The analyst's session: the DuckDB catalog, read-only, with every view readable on either store.

    `root` is a `DataRoot`, or a folder (default: the data root of the environment, `EVAL_PLATFORM_DATA_DIR`)
    whose store is then the environment's (`DataRoot.from_env`: `EVAL_PLATFORM_WAREHOUSE_URL` and the AWS
    variables). Close it when done: while it is open, a run that must change the views waits for it
    (CatalogLocked after a bounded wait)."""
    where = root if isinstance(root, DataRoot) else DataRoot.from_env(root or None)
    conn = duckdb.connect(str(duckdb_path(where.path)), read_only=True)
    where.store.register(conn)
    return conn


def quarantine_keys(source: str, partition: str) -> dict[str, str]:
    """The keys of a source partition's quarantine partition (table `quarantine`)."""
    return {"source": source, "partition": partition}


def write_quarantine(root: DataRoot, source: str, partition: str, frame: pl.DataFrame) -> None:
    """The rejected rows of one source partition (replacing that partition's earlier rejects)."""
    write_partition(root, "quarantine", quarantine_keys(source, partition), conform(frame, QUARANTINE_SCHEMA))


def _view_sql(glob: str) -> str:
    return f"SELECT * FROM read_parquet('{glob}', union_by_name = true, hive_partitioning = false)"


@contextmanager
def _catalog_lock(path: Path):
    """Held while the DuckDB file at `path` is (re)written."""
    lock_path = path.with_name(path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _schema_files(store: Store, tables: dict[str, dict[str, pl.DataType]]) -> None:
    """Write each table's 0-row schema file that is missing or whose columns changed."""
    files = {(table, SCHEMA_DIR, PARTITION_FILE): dict(pl.Schema(schema)) for table, schema in tables.items()}
    found = store.schemas(list(files))
    stale = {parts: schema for (parts, schema), now in zip(files.items(), found, strict=True) if now != schema}
    if stale:
        store.write_all({parts: pl.DataFrame(schema=schema) for parts, schema in stale.items()})


def refresh_catalog(
    root: DataRoot,
    tables: dict[str, dict[str, pl.DataType]],
    views: dict[str, str] | None = None,
    wait_s: float = 30.0,
) -> bool:
    """Make sure every table has its schema file and its view, and every view in `views` (name -> a query over the
    tables' views, nothing stored) is there; returns True when the DuckDB file was written.

    Raises `CatalogLocked` (naming the file) when the views must change but the file stays held by another
    process for `wait_s` seconds: the run fails loudly rather than leaving the views behind.
    """
    store = root.store
    _schema_files(store, tables)
    if isinstance(store, LocalStore):
        remove_stale_temp_files(store.folder)
    globs = store.locations([(table, "**", PARTITION_FILE) for table in tables])
    wanted = {table: _view_sql(glob) for table, glob in zip(tables, globs, strict=True)} | (views or {})
    path = duckdb_path(root.path)
    state = path.with_name(path.name + ".views.json")

    def current() -> bool:
        try:
            return path.exists() and json.loads(state.read_text()) == wanted
        except (FileNotFoundError, json.JSONDecodeError):
            return False

    if current():
        return False
    with _catalog_lock(path):
        if current():  # another process wrote the same views while this one waited for the lock
            return False
        deadline = time.monotonic() + wait_s
        delay = 0.05
        while True:
            try:
                with connect(root, str(path)) as conn:
                    for table, sql in wanted.items():
                        conn.execute(f'CREATE OR REPLACE VIEW "{table}" AS {sql}')
                break
            except (duckdb.IOException, duckdb.ConnectionException) as exc:  # held by another process (or connection)
                if time.monotonic() >= deadline:
                    raise CatalogLocked(
                        f"{path}: could not update the views, the file is held by another process for {wait_s:.0f} s "
                        f"(an open DuckDB session? close it, or query a copy). DuckDB said: {exc}"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        tmp = state.with_name(f"{state.name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")
        tmp.write_text(json.dumps(wanted, sort_keys=True))
        os.replace(tmp, state)
    return True
