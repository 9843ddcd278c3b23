"""Partitions survive kill -9 mid-write, leftovers are never read as data, and the catalog stays correct
with concurrent runs and an analyst's open connection."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest

from eval_platform.defs.catalog import refresh
from eval_platform.schemas import QUARANTINE_SCHEMA, TABLES, TRACE_SCHEMA
from eval_platform.settings import duckdb_path
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import (
    STALE_TEMP_S,
    CatalogLocked,
    partition_dir,
    refresh_catalog,
    write_partition,
)


def frame(day: str, n: int) -> pl.DataFrame:
    return pl.DataFrame({"trace_id": [f"{day}-{i}" for i in range(n)], "date": [day] * n, "input": ["q"] * n})


def count(root: Path, sql: str) -> int:
    with duckdb.connect(str(duckdb_path(root)), read_only=True) as conn:
        return conn.execute(sql).fetchone()[0]


def test_leftover_temp_files_are_never_read_and_are_cleaned(tmp_path):
    root = tmp_path
    where = DataRoot.from_env(root)
    path = write_partition(where, "traces", {"date": "2026-11-10"}, frame("2026-11-10", 5))
    refresh(where)
    folder = path.parent
    (folder / ".part-deadbeef.tmp").write_bytes(b"")  # killed before writing anything
    shutil.copy(path, folder / ".part-cafebabe.tmp")  # killed after writing, before the rename
    (folder / ".tmp-0123.parquet").write_bytes(b"")  # the earlier naming, which the views used to read
    shutil.copy(path, folder / ".tmp-4567.parquet")
    assert count(root, "SELECT count(*) FROM traces") == 5  # no error, no duplicated rows
    assert count(root, "SELECT count(DISTINCT trace_id) FROM traces") == 5
    old = time.time() - STALE_TEMP_S - 60
    for leftover in folder.glob(".*"):
        os.utime(leftover, (old, old))
    write_partition(where, "traces", {"date": "2026-11-10"}, frame("2026-11-10", 7))  # the partition re-runs
    assert sorted(p.name for p in folder.iterdir()) == ["part.parquet"]
    assert count(root, "SELECT count(*) FROM traces") == 7


def _write_forever(root: str, started) -> None:
    big = pl.DataFrame({"trace_id": [str(i) for i in range(300_000)], "input": ["x" * 50] * 300_000})
    write_partition(DataRoot.from_env(Path(root)), "traces", {"date": "2026-11-11"}, big)
    started.set()
    while True:
        write_partition(DataRoot.from_env(Path(root)), "traces", {"date": "2026-11-11"}, big)


def test_kill_9_in_the_middle_of_writes_leaves_every_view_queryable(tmp_path):
    where = DataRoot.from_env(tmp_path)
    write_partition(where, "traces", {"date": "2026-11-10"}, frame("2026-11-10", 3))
    refresh(where)
    ctx = multiprocessing.get_context("spawn")
    for attempt in range(3):
        started = ctx.Event()
        child = ctx.Process(target=_write_forever, args=(str(tmp_path), started))
        child.start()
        assert started.wait(60)
        time.sleep(0.05 + 0.11 * attempt)  # somewhere inside one of the writes
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        for table in TABLES:
            count(tmp_path, f'SELECT count(*) FROM "{table}"')  # raises if any view is broken
        assert count(tmp_path, "SELECT count(*) FROM traces") == 300_003  # never a half or a double
    folder = partition_dir(where, "traces", {"date": "2026-11-11"})
    assert {p.name for p in folder.iterdir()} <= {"part.parquet"} | {p.name for p in folder.glob(".part-*.tmp")}


def _run(args: tuple[str, int]) -> int:
    root, worker = args
    root = Path(root)
    for i in range(10):
        day = f"2026-11-{10 + worker}"
        write_partition(
            DataRoot.from_env(root),
            "judge_scores",
            {"evaluator": f"e{worker}", "date": day},
            frame(f"{day}-{i}", 4).head(4),
        )
        write_partition(DataRoot.from_env(root), "traces", {"date": f"{day}-{i}"}, frame(f"{day}-{i}", 4))
        refresh(DataRoot.from_env(root))
    return worker


def test_concurrent_runs_and_an_open_analyst_session_leave_every_view_correct(tmp_path):
    refresh(DataRoot.from_env(tmp_path))
    analyst = duckdb.connect(str(duckdb_path(tmp_path)), read_only=True)  # held open the whole time
    try:
        with multiprocessing.get_context("spawn").Pool(4) as pool:
            assert sorted(pool.map(_run, [(str(tmp_path), w) for w in range(4)])) == [0, 1, 2, 3]
        assert analyst.execute("SELECT count(*) FROM traces").fetchone()[0] == 4 * 10 * 4
        assert analyst.execute("SELECT count(*) FROM judge_scores").fetchone()[0] == 4 * 4  # replaced, not appended
    finally:
        analyst.close()


def test_a_view_change_blocked_by_an_open_session_fails_loudly(tmp_path):
    where = DataRoot.from_env(tmp_path)
    refresh_catalog(where, {"traces": TRACE_SCHEMA})
    analyst = duckdb.connect(str(duckdb_path(tmp_path)), read_only=True)
    try:
        with pytest.raises(CatalogLocked, match="eval_platform.duckdb"):
            refresh_catalog(where, {"traces": TRACE_SCHEMA, "quarantine": QUARANTINE_SCHEMA}, wait_s=0.5)
    finally:
        analyst.close()
    assert refresh_catalog(where, {"traces": TRACE_SCHEMA, "quarantine": QUARANTINE_SCHEMA}) is True
    assert count(tmp_path, "SELECT count(*) FROM quarantine") == 0  # typed and empty before any partition
