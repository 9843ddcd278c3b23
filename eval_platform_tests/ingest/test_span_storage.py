"""Spans stored once: in their trace's row (`traces.spans`, what the judge reads); the `spans` view shows the same
spans one row per span, with the columns and types docs/reference/tables.md lists."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import duckdb
import polars as pl

from eval_platform.defs.catalog import refresh
from eval_platform.defs.traces import ingest_day
from eval_platform.judging.targets import spans_of
from eval_platform.schemas import SPAN_SCHEMA
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition, warehouse_dir
from eval_platform_tests.conftest import REPO_DATA

DAY = "2026-11-10"
DUCKDB_TYPES = {pl.String(): "VARCHAR", pl.Int64(): "BIGINT", pl.Float64(): "DOUBLE"}


def test_spans_are_stored_once_in_their_trace_and_the_view_shows_them(tmp_path):
    root = tmp_path / "data"
    (root / "traces" / DAY).mkdir(parents=True)
    for path in sorted((REPO_DATA / "traces" / DAY).glob("agent_*")):  # the day's OTLP exports, six conventions
        shutil.copy(path, root / "traces" / DAY / path.name)
    ingested = ingest_day(DataRoot.from_env(root), DAY, logging.getLogger(__name__))
    refresh(DataRoot.from_env(root))

    # nothing but the traces (and quarantine) partitions is written: no second copy of the spans
    stored = {p.relative_to(warehouse_dir(root)).parts[0] for p in Path(warehouse_dir(root)).rglob("*.parquet")}
    assert "spans" not in stored and "traces" in stored

    traces = read_partition(DataRoot.from_env(root), "traces", {"date": DAY})
    judged = {  # what the judge reads of each span (judging.targets)
        (trace["trace_id"], span["span_id"]): span for trace in traces.to_dicts() for span in spans_of(trace)
    }
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        columns = conn.execute("DESCRIBE spans").fetchall()
        rows = conn.sql("SELECT * FROM spans").pl()
    assert ingested.spans == rows.height == len(judged) == traces["span_count"].sum() > 0
    types = {pl.Datetime("us", "UTC"): "TIMESTAMP WITH TIME ZONE", **DUCKDB_TYPES}
    assert [(name, kind) for name, kind, *_ in columns] == [(name, types[dtype]) for name, dtype in SPAN_SCHEMA.items()]
    assert rows["date"].unique().to_list() == [DAY]
    assert set(rows["convention"]) >= {"genai", "openllmetry", "openinference", "langfuse"}

    for row in rows.to_dicts():
        span = judged[(row["trace_id"], row["span_id"])]
        for key in ("name", "operation", "status", "model", "input", "output", "tool_name", "latency_ms"):
            assert row[key] == span[key], key
        assert json.loads(row["attributes"]) == span["attributes"]
        assert row["start_time"].isoformat() == span["start_time"]
        assert row["end_time"] >= row["start_time"]
        assert row["source_file"].startswith(f"traces/{DAY}/agent_") and row["source_line"] >= 1
