"""The warehouse on an S3-compatible store (moto's server on 127.0.0.1, see s3_server.py): partitions are written
as whole objects, read back by the storage functions every asset uses, queryable from the DuckDB catalog; a writer
killed mid-upload leaves the previous partition and no half object; concurrent writers of different partitions
both land; nothing is written to the local warehouse."""

from __future__ import annotations

import multiprocessing
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from eval_platform.defs.resources import WarehouseResource
from eval_platform.schemas import TABLES, TRACE_SCHEMA, conform, derived_views, table_schemas
from eval_platform.settings import warehouse_dir
from eval_platform.storage import location
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import (
    has_files,
    iter_partition,
    open_catalog,
    partition_files,
    partition_values,
    read_partition,
    refresh_catalog,
    scan_parquet,
    table_glob,
    write_partition,
)
from eval_platform_tests.s3_server import SECRET_ACCESS_KEY, StallingProxy

DAY = "2026-11-10"


def frame(day: str, n: int, text: int = 1) -> pl.DataFrame:
    """`n` traces of `day`; `text` random hex characters of input each (incompressible: a large object)."""
    rng = np.random.default_rng(n)
    inputs = [rng.bytes(text // 2 + 1).hex()[:text] for _ in range(n)] if text > 1 else ["q"] * n
    return pl.DataFrame({"trace_id": [f"{day}-{i}" for i in range(n)], "date": [day] * n, "input": inputs})


@pytest.fixture
def bucket_root(tmp_path, s3_server, monkeypatch):
    """A data root whose warehouse is a fresh prefix of a fresh bucket (set in the environment, as a script's)."""
    bucket = s3_server.create_bucket(f"warehouse-{uuid.uuid4().hex[:12]}")
    for name, value in s3_server.env(f"s3://{bucket}/eval").items():
        monkeypatch.setenv(name, value)
    return tmp_path / "data", bucket


def test_partitions_round_trip_through_the_bucket_and_the_catalog(bucket_root, s3_server):
    root, bucket = bucket_root
    where = DataRoot.from_env(root)
    store = where.store
    assert isinstance(store, location.S3Store) and store.url == f"s3://{bucket}/eval"
    assert SECRET_ACCESS_KEY not in repr(store)

    assert read_partition(where, "traces", {"date": DAY}) is None and not has_files(where, "traces")
    written = write_partition(where, "traces", {"date": DAY}, frame(DAY, 5))
    assert written == f"s3://{bucket}/eval/traces/date={DAY}/part.parquet"
    write_partition(where, "traces", {"date": DAY}, frame(DAY, 3))  # replaces the partition whole
    write_partition(where, "traces", {"date": "2026-11-11"}, frame("2026-11-11", 4))
    write_partition(where, "test_cases", {"dataset": "qa", "version": "2"}, pl.DataFrame({"case_id": ["c"]}))
    write_partition(where, "test_cases", {"dataset": "qa", "version": "10"}, pl.DataFrame({"case_id": ["c"]}))

    assert read_partition(where, "traces", {"date": DAY}).equals(frame(DAY, 3))
    assert has_files(where, "traces") and not has_files(where, "judge_scores")
    assert sorted(partition_values(where, "test_cases", {"dataset": "qa"}, "version"), key=int) == [
        "2",
        "10",
    ]
    files = partition_files(where, "traces", "date")
    assert list(files) == [DAY, "2026-11-11"]
    scanned = scan_parquet(where, list(files.values()), hive_partitioning=False).collect()
    assert scanned.height == 7
    assert scan_parquet(where, table_glob(where, "traces"), hive_partitioning=False).collect().height == 7

    assert refresh_catalog(where, table_schemas(), derived_views())
    assert not refresh_catalog(where, table_schemas(), derived_views())  # the schema objects are read back
    with open_catalog(where) as conn:  # the analyst's session: views over s3:// read through pyarrow
        assert conn.execute("SELECT count(*), count(DISTINCT date) FROM traces").fetchone() == (7, 2)
        for table in TABLES:
            conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()  # every view valid before its first rows
    # Everything went to the bucket: the local warehouse does not exist; the catalog file is local.
    assert not warehouse_dir(root).exists()
    objects = s3_server.objects(f"{bucket}/eval/traces")
    assert sorted(objects) == [
        f"{bucket}/eval/traces/_schema/part.parquet",
        f"{bucket}/eval/traces/date=2026-11-10/part.parquet",
        f"{bucket}/eval/traces/date=2026-11-11/part.parquet",
    ]


def test_two_warehouses_of_one_data_root_in_one_process_each_get_their_own_rows(tmp_path, s3_server, monkeypatch):
    """Two warehouse resources of one data root set up in one process at once, one on local disk and one on a
    bucket (as when a warehouse is copied to a bucket): each one's reads and writes go to its own store."""
    bucket = s3_server.create_bucket(f"two-{uuid.uuid4().hex[:12]}")
    settings = s3_server.env(f"s3://{bucket}/eval")
    for name in settings:
        monkeypatch.delenv(name, raising=False)
    local = WarehouseResource(data_dir=str(tmp_path))
    remote = WarehouseResource(
        data_dir=str(tmp_path),
        warehouse_url=settings["EVAL_PLATFORM_WAREHOUSE_URL"],
        s3_endpoint_url=settings["AWS_ENDPOINT_URL"],
        s3_region=settings["AWS_REGION"],
        s3_access_key_id=settings["AWS_ACCESS_KEY_ID"],
        s3_secret_access_key=settings["AWS_SECRET_ACCESS_KEY"],
    )
    with dg.build_resources({"local": local, "remote": remote}) as resources:
        write_partition(resources.local.root, "traces", {"date": DAY}, frame(DAY, 2))
        write_partition(resources.remote.root, "traces", {"date": DAY}, frame(DAY, 3))
        assert read_partition(resources.local.root, "traces", {"date": DAY}).equals(frame(DAY, 2))
        assert read_partition(resources.remote.root, "traces", {"date": DAY}).equals(frame(DAY, 3))
    assert pl.read_parquet(warehouse_dir(tmp_path) / "traces" / f"date={DAY}" / "part.parquet").equals(frame(DAY, 2))
    assert list(s3_server.objects(f"{bucket}/eval")) == [f"{bucket}/eval/traces/date={DAY}/part.parquet"]


def test_a_bad_warehouse_url_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_WAREHOUSE_URL", "s3:/missing-bucket")
    with pytest.raises(location.WarehouseConfigError, match="expected s3://bucket/prefix"):
        location.DataRoot.from_env(tmp_path)
    monkeypatch.delenv("EVAL_PLATFORM_WAREHOUSE_URL")
    assert location.DataRoot.from_env(tmp_path).store == location.LocalStore(warehouse_dir(tmp_path))  # the default


def _write_big(root: str, rows: int, text: int) -> None:
    write_partition(DataRoot.from_env(Path(root)), "traces", {"date": DAY}, frame(DAY, rows, text))
    print("the upload completed", flush=True)


def _write_small(root: str) -> None:
    write_partition(DataRoot.from_env(Path(root)), "traces", {"date": DAY}, frame(DAY, 4))


def test_kill_9_mid_upload_leaves_the_previous_partition_and_no_half_object(
    bucket_root, s3_server, monkeypatch, tmp_path
):
    root, bucket = bucket_root
    write_partition(DataRoot.from_env(root), "traces", {"date": DAY}, frame(DAY, 3))
    before = s3_server.objects(f"{bucket}/eval")
    temp = tmp_path / "tmp"  # the writers' system temporary folder, where an upload's local copy is staged
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))

    # The writer sends through a link that stalls after 12 MB of a ~40 MB partition: it is mid-upload, for sure.
    proxy = StallingProxy((s3_server.host, s3_server.port), limit=12 * 2**20)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint_url)  # the writer's environment only
        writer = multiprocessing.get_context("spawn").Process(target=_write_big, args=(str(root), 20_000, 2_000))
        writer.start()
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
        assert proxy.stalled.wait(300), "the writer never reached the stall"
        assert writer.is_alive()
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(60)
        assert writer.exitcode == -signal.SIGKILL
    finally:
        proxy.close()

    assert f"eval/traces/date={DAY}/part.parquet" in s3_server.incomplete_uploads(bucket)  # it was uploading
    assert s3_server.objects(f"{bucket}/eval") == before  # no new object, not even a half one
    assert read_partition(DataRoot.from_env(root), "traces", {"date": DAY}).equals(frame(DAY, 3))
    refresh_catalog(DataRoot.from_env(root), {"traces": TRACE_SCHEMA})
    with open_catalog(DataRoot.from_env(root)) as conn:
        assert conn.execute("SELECT count(*) FROM traces").fetchone() == (3,)
    (left,) = temp.glob("eval_platform-put-*")  # the killed writer's staged copy
    assert (left / "part.parquet").exists()
    # Beside it, folders the next run must keep: a live process's on this host, and one of another host.
    live = temp / "eval_platform-put-live"
    live.mkdir()
    (live / "owner").write_text(f"{socket.gethostname()} {os.getpid()}\n")
    other = temp / "eval_platform-put-other"
    other.mkdir()
    (other / "owner").write_text(f"another-host {writer.pid}\n")

    # The next run (a process of its own, as every run is) replaces the partition as usual and removes the copy.
    next_run = multiprocessing.get_context("spawn").Process(target=_write_small, args=(str(root),))
    next_run.start()
    next_run.join(120)
    assert next_run.exitcode == 0
    assert read_partition(DataRoot.from_env(root), "traces", {"date": DAY}).height == 4
    assert sorted(p.name for p in temp.iterdir()) == ["eval_platform-put-live", "eval_platform-put-other"]


def _write_after(root: str, day: str, barrier) -> None:
    barrier.wait(120)
    write_partition(DataRoot.from_env(Path(root)), "traces", {"date": day}, frame(day, 5_000, 1_000))


def test_concurrent_writers_of_different_partitions_both_land(bucket_root, s3_server):
    root, bucket = bucket_root
    where = DataRoot.from_env(root)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    days = ["2026-11-12", "2026-11-13"]
    writers = [ctx.Process(target=_write_after, args=(str(root), day, barrier)) for day in days]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(300)
    assert [w.exitcode for w in writers] == [0, 0]
    for day in days:
        assert read_partition(where, "traces", {"date": day}).equals(frame(day, 5_000, 1_000))
    refresh_catalog(where, {"traces": TRACE_SCHEMA})
    with open_catalog(where) as conn:
        assert conn.execute("SELECT date, count(*) FROM traces GROUP BY 1 ORDER BY 1").fetchall() == [
            (days[0], 5_000),
            (days[1], 5_000),
        ]
    assert s3_server.incomplete_uploads(bucket) == []


def test_a_partition_streams_from_the_bucket_batch_by_batch_never_downloaded_whole(bucket_root, s3_server, monkeypatch):
    """A day written in row groups (as a streaming writer writes it) is read a batch at a time: the first batch
    costs one row group's download, not the object's; a column read downloads that column; the batches together
    are the partition."""
    root, bucket = bucket_root
    day = frame(DAY, 20_000, 1_000)  # ~20 MB of incompressible input text, in 20 row groups
    key = f"{bucket}/eval/traces/date={DAY}/part.parquet"
    with s3_server.filesystem().open_output_stream(key) as out:
        pq.write_table(day.to_arrow(), out, row_group_size=1_000)
    size = s3_server.objects(f"{bucket}/eval")[key]
    proxy = StallingProxy((s3_server.host, s3_server.port), limit=2**40)  # counts what the reader downloads
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint_url)
        batches = iter_partition(DataRoot.from_env(root), "traces", {"date": DAY}, batch_rows=500)
        first = next(batches)
        assert first.equals(day.head(500))
        assert proxy.received < size / 8  # one row group of twenty, and the footer
        rest = list(batches)
        assert max(b.height for b in rest) <= 500 and pl.concat([first, *rest]).equals(day)

        proxy.received = 0
        ids = read_partition(DataRoot.from_env(root), "traces", {"date": DAY}, columns=["trace_id"])
        assert ids.equals(day.select("trace_id")) and proxy.received < size / 8  # not the input column
        assert iter_partition(DataRoot.from_env(root), "traces", {"date": "2026-11-30"}) is None  # never written
    finally:
        proxy.close()


def test_every_table_reads_back_from_the_bucket_with_its_types(bucket_root):
    """Reading through pyarrow's batches gives the frame polars wrote, dtype for dtype, for every table (an
    empty partition included: its schema)."""
    root, _ = bucket_root
    where = DataRoot.from_env(root)
    for table, schema in table_schemas().items():
        empty = conform(pl.DataFrame(), schema)
        write_partition(where, table, {"date": DAY}, empty)
        back = read_partition(where, table, {"date": DAY})
        assert back.schema == empty.schema and back.height == 0, table
        assert pl.concat(list(iter_partition(where, table, {"date": DAY}))).schema == empty.schema, table
    traces = conform(frame(DAY, 3), TRACE_SCHEMA)
    write_partition(where, "traces", {"date": DAY}, traces)
    assert read_partition(where, "traces", {"date": DAY}).equals(traces)


@pytest.mark.parametrize("named_root", [True, False])
def test_the_demos_sql_hint_run_as_printed_answers_from_the_bucket(bucket_root, tmp_path, monkeypatch, named_root):
    """The demo's closing hint, run in a shell as printed (the environment holding the bucket's settings, as the
    demo's did), prints the rows of `judge_scores` in the bucket; the data root is named unless it is ./data."""
    from eval_platform.demo import sql_hint
    from eval_platform.schemas import JUDGE_SCORE_SCHEMA

    root, _ = bucket_root
    rows = pl.DataFrame({"evaluator": ["helpfulness"] * 3, "status": ["COMPLETED", "COMPLETED", "FAILED"]})
    write_partition(
        DataRoot.from_env(root),
        "judge_scores",
        {"evaluator": "helpfulness", "date": DAY},
        conform(rows, JUDGE_SCORE_SCHEMA),
    )
    refresh_catalog(DataRoot.from_env(root), table_schemas())
    cwd = tmp_path if not named_root else tmp_path / "elsewhere"
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("EVAL_PLATFORM_DATA_DIR", raising=False)
    hint = sql_hint(root)
    assert "\n" not in hint and len(hint) < 200 + len(str(root))  # one short line
    assert (str(root) in hint) == named_root
    assert hint.startswith(".venv/bin/python -c ")
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    command = f"{shlex.quote(sys.executable)}{hint.removeprefix('.venv/bin/python')}"  # this suite's .venv python
    done = subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.search(r"helpfulness\s*│\s*COMPLETED\s*│\s*2", done.stdout), done.stdout
    assert re.search(r"helpfulness\s*│\s*FAILED\s*│\s*1", done.stdout), done.stdout
