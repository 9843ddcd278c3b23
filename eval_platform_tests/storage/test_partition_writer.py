"""A partition written a frame at a time (`partition_writer`, what the `traces` step streams a day into) is as
atomic as `write_partition`: a kill -9 mid-write, or an error in the middle, leaves the previous partition whole,
on local disk and on a bucket; the trace ingest killed mid-day leaves the previous day's partitions or the new ones."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import time
from pathlib import Path

import polars as pl
import pytest

from eval_platform.defs.traces import ingest_day
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_dir, partition_writer, read_partition, write_partition
from eval_platform_tests.storage.test_s3_warehouse import bucket_root  # noqa: F401 (a fixture)

DAY = "2026-11-10"


def traces(start: int, n: int) -> pl.DataFrame:
    return conform(
        pl.DataFrame({"trace_id": [f"t-{i}" for i in range(start, start + n)], "input": ["q"] * n}), TRACE_SCHEMA
    )


def _write_then_hang(root: str, started) -> None:
    with partition_writer(
        DataRoot.from_env(Path(root)), "traces", {"date": DAY}, TRACE_SCHEMA, row_group_rows=10
    ) as out:
        for start in range(0, 1_000, 10):
            out.write(traces(start, 10))  # row groups on disk already
        started.set()
        time.sleep(600)  # killed here, mid-write


def test_kill_9_mid_write_leaves_the_previous_partition(tmp_path):
    where = DataRoot.from_env(tmp_path)
    write_partition(where, "traces", {"date": DAY}, traces(0, 3))
    ctx = multiprocessing.get_context("spawn")
    started = ctx.Event()
    child = ctx.Process(target=_write_then_hang, args=(str(tmp_path), started))
    child.start()
    assert started.wait(60)
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    assert read_partition(where, "traces", {"date": DAY})["trace_id"].to_list() == [
        "t-0",
        "t-1",
        "t-2",
    ]
    leftovers = [p.name for p in partition_dir(where, "traces", {"date": DAY}).iterdir() if p.name != "part.parquet"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".part-")  # never read as data, cleaned when stale


def test_a_failure_mid_write_leaves_the_previous_partition_and_a_full_write_replaces_it(tmp_path):
    where = DataRoot.from_env(tmp_path)
    write_partition(where, "traces", {"date": DAY}, traces(0, 3))
    with pytest.raises(RuntimeError, match="reader broke"):
        with partition_writer(where, "traces", {"date": DAY}, TRACE_SCHEMA, row_group_rows=10) as out:
            out.write(traces(100, 25))
            raise RuntimeError("reader broke")
    assert read_partition(where, "traces", {"date": DAY}).height == 3
    assert sorted(p.name for p in partition_dir(where, "traces", {"date": DAY}).iterdir()) == ["part.parquet"]
    with partition_writer(where, "traces", {"date": DAY}, TRACE_SCHEMA, row_group_rows=10) as out:
        for start in range(100, 125, 5):
            out.write(traces(start, 5))
    assert out.rows == 25
    assert read_partition(where, "traces", {"date": DAY}).equals(traces(100, 25))  # same rows, same types


def test_a_streamed_partition_on_a_bucket_is_put_whole(bucket_root):  # noqa: F811
    root, _ = bucket_root
    where = DataRoot.from_env(root)
    write_partition(where, "traces", {"date": DAY}, traces(0, 3))
    with pytest.raises(RuntimeError):
        with partition_writer(where, "traces", {"date": DAY}, TRACE_SCHEMA, row_group_rows=10) as out:
            out.write(traces(100, 25))
            raise RuntimeError("reader broke")
    assert read_partition(where, "traces", {"date": DAY}).height == 3
    with partition_writer(where, "traces", {"date": DAY}, TRACE_SCHEMA, row_group_rows=10) as out:
        out.write(traces(100, 25))
    assert read_partition(where, "traces", {"date": DAY}).equals(traces(100, 25))


def _day(root: Path, n: int) -> None:
    folder = root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {"trace_id": f"t-{i}", "timestamp": f"{DAY}T01:00:00Z", "input": "q" * 200, "output": "a"} for i in range(n)
    ]
    (folder / "export.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def _ingest_forever(root: str, started) -> None:
    ingest_day(DataRoot.from_env(Path(root)), DAY, logging.getLogger("test"))
    started.set()
    while True:
        ingest_day(DataRoot.from_env(Path(root)), DAY, logging.getLogger("test"))


def test_the_trace_ingest_killed_mid_day_leaves_whole_partitions(tmp_path):
    _day(tmp_path, 1_000)
    assert ingest_day(DataRoot.from_env(tmp_path), DAY, logging.getLogger("test")).traces == 1_000
    _day(tmp_path, 60_000)  # the day grows: each re-ingest now takes a while
    ctx = multiprocessing.get_context("spawn")
    for attempt in range(3):
        started = ctx.Event()
        child = ctx.Process(target=_ingest_forever, args=(str(tmp_path), started))
        child.start()
        assert started.wait(120)
        time.sleep(0.1 + 0.4 * attempt)  # somewhere inside a later ingest of the day
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        day = read_partition(DataRoot.from_env(tmp_path), "traces", {"date": DAY})
        assert day.height == 60_000 and day["trace_id"].n_unique() == 60_000  # never half, never doubled
