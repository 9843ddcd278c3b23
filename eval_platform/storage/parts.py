"""A partition made of immutable parts, one per source: `<partition>/src=<name>/part.parquet`.

The warehouse's readers (`read_partition`, `iter_partition`, `partition_schema`, `partition_path`) and the views
(`<table>/**/part.parquet`, no hive columns) read every part of a partition as its rows, so a day can be updated a
source at a time: a new or changed source rewrites its own part, a gone source's part is removed, the others are
not touched. Each part is written whole (the store's `staged`: a rename on local disk, one put on a bucket) with
what it was made from in its Parquet key-value metadata (`write_part`'s `metadata`, read back from the footer
alone by `parts`), which is how the next run knows what it can keep.

A partition is either made of parts or written whole (`warehouse.write_partition`, one `<partition>/part.parquet`),
never both: a writer of parts first removes the whole file (`remove_whole`), `write_partition` first removes the
parts. Removing comes before adding, so a kill at any instant leaves some rows missing (the next run writes them)
but never a row twice. Keeping the rows of one source in one part is the caller's rule (`ingest/increments.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import polars as pl

from eval_platform.storage.location import DataRoot, LocalStore
from eval_platform.storage.warehouse import (
    PART_KEY,
    PARTITION_FILE,
    ROW_GROUP_ROWS,
    PartitionWriter,
    _parts,
    part_files,
    partition_dir,
    remove_stale_temp_files,
)


def part_name(source: str) -> str:
    """A part's folder value for a source (a file's path relative to the data root): a digest, so any path fits."""
    return hashlib.sha256(source.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Part:
    name: str  # the `src=<name>` value
    rows: int
    metadata: dict[str, str]


def _part_path(table: str, keys: dict[str, str], name: str) -> tuple[str, ...]:
    return (*_parts(table, keys), f"{PART_KEY}={name}", PARTITION_FILE)


def parts(root: DataRoot, table: str, keys: dict[str, str]) -> dict[str, Part] | None:
    """The partition's parts by name, from their footers (no row is read); None when the partition is written whole
    (or not at all)."""
    store = root.store
    files = part_files(store, table, keys)
    if not files or files[0] == (*_parts(table, keys), PARTITION_FILE):
        return None
    found = {}
    for path in files:
        footer = store.footer(path)
        if footer is None:  # removed since it was listed
            continue
        name = path[-2].removeprefix(f"{PART_KEY}=")
        found[name] = Part(name, footer[0], footer[1])
    return found


def is_whole(root: DataRoot, table: str, keys: dict[str, str]) -> bool:
    """Whether the partition is written whole (one `part.parquet`, the layout before parts)."""
    store = root.store
    return (*_parts(table, keys), PARTITION_FILE) in part_files(store, table, keys)


@contextmanager
def part_writer(
    root: DataRoot,
    table: str,
    keys: dict[str, str],
    name: str,
    schema: dict[str, pl.DataType],
    metadata: dict[str, str],
    row_group_rows: int = ROW_GROUP_ROWS,
) -> Iterator[PartitionWriter]:
    """`warehouse.partition_writer` for one part: it replaces the part `name` whole when the block ends without an
    exception, with `metadata` in its footer. The partition's whole file, if any, is removed first."""
    store = root.store
    if isinstance(store, LocalStore):
        remove_stale_temp_files(partition_dir(root, table, keys) / f"{PART_KEY}={name}", recursive=False)
    remove_whole(root, table, keys)
    with store.staged(_part_path(table, keys, name)) as tmp:
        writer = PartitionWriter(tmp, schema, row_group_rows, metadata)
        try:
            yield writer
        except BaseException:
            writer._close(complete=False)
            raise
        writer._close()


def write_part(
    root: DataRoot,
    table: str,
    keys: dict[str, str],
    name: str,
    frame: pl.DataFrame,
    schema: dict[str, pl.DataType],
    metadata: dict[str, str],
) -> int:
    """One part replaced whole by `frame`; returns its rows."""
    with part_writer(root, table, keys, name, schema, metadata) as out:
        out.write(frame)
    return out.rows


def read_part(
    root: DataRoot, table: str, keys: dict[str, str], name: str, columns: list[str] | None = None
) -> pl.DataFrame | None:
    """One part's rows (only `columns`, when given), or None when it is not there."""
    return root.store.read(_part_path(table, keys, name), columns)


def remove_part(root: DataRoot, table: str, keys: dict[str, str], name: str) -> None:
    root.store.delete(_part_path(table, keys, name))


def remove_whole(root: DataRoot, table: str, keys: dict[str, str]) -> None:
    """Remove the partition's whole file (written by `write_partition`), before its first part is written."""
    root.store.delete((*_parts(table, keys), PARTITION_FILE))
