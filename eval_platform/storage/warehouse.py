"""Parquet partitions under `<data root>/warehouse/<table>/<key>=<value>/part.parquet` and the DuckDB catalog.

A partition is one file, written to a temporary name in its folder and renamed over the old one: a
re-materialized partition replaces the previous rows whole, a crash leaves the old file or the new one,
never half of either, and parallel partition runs never share a writer. Temporary files are named
`.part-<random>.tmp` so that no reader's pattern (`**/part.parquet`) can match them; a kill -9 mid-write
leaves one behind, which is never read as data and is removed once it is old enough that no write can
still be using it (by the next write of that partition and by every catalog refresh).

The DuckDB file holds one view per table over `<table>/**/part.parquet`. Every table also has a 0-row
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
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from eval_platform.schemas import QUARANTINE_SCHEMA, conform
from eval_platform.settings import duckdb_path, warehouse_dir

PARTITION_FILE = "part.parquet"
SCHEMA_DIR = "_schema"  # the 0-row file giving a table's columns before it has partitions
TEMP_PREFIX, TEMP_SUFFIX = ".part-", ".tmp"
# A temporary file this old belongs to no write still in progress (a write takes seconds).
STALE_TEMP_S = 15 * 60


class CatalogLocked(RuntimeError):
    """The DuckDB catalog could not be updated because another process holds the file."""


def partition_dir(root: Path, table: str, keys: dict[str, str]) -> Path:
    folder = warehouse_dir(root) / table
    for name, value in keys.items():
        folder = folder / f"{name}={value}"
    return folder


def _write_atomically(folder: Path, frame: pl.DataFrame) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"
    try:
        frame.write_parquet(tmp)
        os.replace(tmp, folder / PARTITION_FILE)
    finally:
        if tmp.exists():
            tmp.unlink()
    return folder / PARTITION_FILE


def write_partition(root: Path, table: str, keys: dict[str, str], frame: pl.DataFrame) -> Path:
    """Atomically replace one partition's Parquet file with `frame` (an empty frame still writes a file)."""
    folder = partition_dir(root, table, keys)
    remove_stale_temp_files(folder, recursive=False)
    return _write_atomically(folder, frame)


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


def read_partition(root: Path, table: str, keys: dict[str, str]) -> pl.DataFrame | None:
    path = partition_dir(root, table, keys) / PARTITION_FILE
    return pl.read_parquet(path) if path.exists() else None


def table_glob(root: Path, table: str) -> str:
    """Every partition file of a table (and its 0-row schema file once the catalog exists); never a temp file."""
    return str(warehouse_dir(root) / table / "**" / PARTITION_FILE)


def has_files(root: Path, table: str) -> bool:
    """Whether the table has at least one partition (its schema file does not count)."""
    folder = warehouse_dir(root) / table
    return folder.is_dir() and any(p.parent.name != SCHEMA_DIR for p in folder.rglob(PARTITION_FILE))


def partition_files(root: Path, table: str, key: str) -> dict[str, str]:
    """Per value of a table's first partition key (`key=<value>` folders), the glob of that value's partition
    files, for the values with at least one: reading one evaluator's judge_scores opens only its own files."""
    folder = warehouse_dir(root) / table
    prefix = f"{key}="
    found = {}
    for sub in sorted(folder.iterdir()) if folder.is_dir() else []:
        if sub.is_dir() and sub.name.startswith(prefix) and any(sub.rglob(PARTITION_FILE)):
            found[sub.name.removeprefix(prefix)] = str(sub / "**" / PARTITION_FILE)
    return found


def write_quarantine(root: Path, source: str, partition: str, frame: pl.DataFrame) -> None:
    """The rejected rows of one source partition (replacing that partition's earlier rejects)."""
    write_partition(root, "quarantine", {"source": source, "partition": partition}, conform(frame, QUARANTINE_SCHEMA))


def _view_sql(root: Path, table: str) -> str:
    return f"SELECT * FROM read_parquet('{table_glob(root, table)}', union_by_name = true, hive_partitioning = false)"


def _state_path(root: Path) -> Path:
    return duckdb_path(root).with_name(duckdb_path(root).name + ".views.json")


@contextmanager
def _catalog_lock(root: Path):
    lock_path = duckdb_path(root).with_name(duckdb_path(root).name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _schema_file(root: Path, table: str, schema: dict[str, pl.DataType]) -> None:
    """Write the table's 0-row schema file when it is missing or its columns changed."""
    path = warehouse_dir(root) / table / SCHEMA_DIR / PARTITION_FILE
    if path.exists() and dict(pl.read_parquet_schema(path)) == dict(pl.Schema(schema)):
        return
    _write_atomically(path.parent, pl.DataFrame(schema=schema))


def refresh_catalog(root: Path, tables: dict[str, dict[str, pl.DataType]], wait_s: float = 30.0) -> bool:
    """Make sure every table has its schema file and its view; returns True when the DuckDB file was written.

    Raises `CatalogLocked` (naming the file) when the views must change but the file stays held by another
    process for `wait_s` seconds: the run fails loudly rather than leaving the views behind.
    """
    for table, schema in tables.items():
        _schema_file(root, table, schema)
    remove_stale_temp_files(warehouse_dir(root))
    wanted = {table: _view_sql(root, table) for table in tables}
    path, state = duckdb_path(root), _state_path(root)

    def current() -> bool:
        try:
            return path.exists() and json.loads(state.read_text()) == wanted
        except (FileNotFoundError, json.JSONDecodeError):
            return False

    if current():
        return False
    with _catalog_lock(root):
        if current():  # another process wrote the same views while this one waited for the lock
            return False
        deadline = time.monotonic() + wait_s
        delay = 0.05
        while True:
            try:
                with duckdb.connect(str(path)) as conn:
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
