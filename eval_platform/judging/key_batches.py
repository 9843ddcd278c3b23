"""A day's traces in batches that never split a group: for the units planned from several traces at once (a
pairwise pair, an n_wise group, a session), in bounded memory whatever the day's size.

The traces come in as frames (read a batch at a time); each row's key (the pair or group key, the session id) is
computed as the planning computes it, and the rows are written with it and their place in the day to a Parquet
file in a temporary folder, never held. DuckDB then reads them back ordered by key (no key first), then place,
under a memory limit (it sorts out of core, spilling to the same folder), and they are handed out in batches of
about `rows` rows, each cut where the key changes: every group is whole in one batch, and a batch holds one
group however large it is. A mode plans each batch on its own; keys ordered globally give the units in the
order the whole day planned at once gives them (its traces without a key first, in day order, then its
groups by key).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import duckdb
import polars as pl
import pyarrow.parquet as pq

from eval_platform.schemas import TRACE_SCHEMA, conform

DUCKDB_MEMORY_LIMIT = "512MB"  # DuckDB's own memory while sorting (it spills beyond it)
_KEY, _PLACE = "_group_key", "_day_place"


def key_ordered_batches(
    frames: Iterable[pl.DataFrame],
    key: Callable[[dict[str, Any]], str | None],
    rows: int,
    folder: Path | None = None,
) -> Iterator[pl.DataFrame]:
    """The rows of `frames` (TRACE_SCHEMA columns), ordered by `key(row)` with rows without a key first, each key
    in the order the rows came; in batches of at least `rows` rows (the last may be smaller) cut between keys."""
    with tempfile.TemporaryDirectory(prefix="eval_platform-groups-", dir=folder) as spill:
        path = Path(spill) / "traces.parquet"
        schema = {**TRACE_SCHEMA, _KEY: pl.String(), _PLACE: pl.Int64()}
        writer: pq.ParquetWriter | None = None
        place = 0
        for frame in frames:
            frame = conform(frame, TRACE_SCHEMA)
            keys = [key(record) for record in frame.iter_rows(named=True)]
            frame = conform(
                frame.with_columns(
                    pl.Series(_KEY, keys, dtype=pl.String()),
                    pl.int_range(place, place + frame.height, dtype=pl.Int64()).alias(_PLACE),
                ),
                schema,
            )
            place += frame.height
            table = frame.to_arrow()
            writer = writer or pq.ParquetWriter(str(path), table.schema)
            writer.write_table(table)
        if writer is None:
            return
        writer.close()
        with duckdb.connect() as conn:
            conn.execute(f"SET memory_limit = '{DUCKDB_MEMORY_LIMIT}'")
            conn.execute(f"SET temp_directory = '{spill}'")
            conn.execute("SET preserve_insertion_order = false")
            conn.execute("SET TimeZone = 'UTC'")
            query = f"SELECT * FROM read_parquet('{path}') ORDER BY {_KEY} ASC NULLS FIRST, {_PLACE}"
            result = conn.sql(query).to_arrow_reader(rows)
            held: list[pl.DataFrame] = []
            count = 0
            for batch in result:
                frame = cast(pl.DataFrame, pl.from_arrow(batch))  # a record batch converts to a frame
                start = 0
                while start < frame.height:
                    if count < rows:
                        take = min(rows - count, frame.height - start)
                        held.append(frame.slice(start, take))
                        count, start = count + take, start + take
                        continue
                    # `rows` held: the batch goes on only while the key of its last row goes on (no key: never)
                    last, batch_keys, cut = held[-1][_KEY][-1], frame[_KEY], start
                    while last is not None and cut < frame.height and batch_keys[cut] == last:
                        cut += 1
                    if cut > start:
                        held.append(frame.slice(start, cut - start))
                        count, start = count + cut - start, cut
                    if start < frame.height:
                        yield _traces(pl.concat(held))
                        held, count = [], 0
            if held:
                yield _traces(pl.concat(held))


def _traces(frame: pl.DataFrame) -> pl.DataFrame:
    return conform(frame, TRACE_SCHEMA)
