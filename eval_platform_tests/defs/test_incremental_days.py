"""A day of files as they arrive costs what the new file adds (issue 34, "Incremental by construction"): the real
`traces` and `judge_scores` assets on a real Dagster instance, real files and Parquet parts, the local judge over
HTTP (its request count is what the provider was asked)."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.storage import warehouse
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import quarantine_keys, read_partition
from eval_platform_tests.conftest import judge_requests, write_evaluator

DAY = (datetime.now(UTC) - timedelta(days=2)).date().isoformat()  # a partition, whatever the date


def _write(root: Path, name: str, ids: list[str], output: str = "fine") -> Path:
    folder = root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    lines = [
        json.dumps({"trace_id": i, "timestamp": f"{DAY}T10:00:00Z", "input": f"say {i}", "output": f"{output} {i}"})
        for i in ids
    ]
    path.write_text("\n".join(lines) + "\n")
    then = time.time() - 120  # settled: written two minutes ago
    os.utime(path, (then, then))
    return path


def write_helpful(root: Path, judge) -> None:
    """The score evaluator these tests (and test_otlp_increments.py) judge with, on the local judge."""
    write_evaluator(
        root,
        "helpful",
        mode="score",
        model="openai/mock",
        api_base=judge.base_url,
        temperature=0.0,
        score_scale={"min": 0, "max": 1},
        prompt="helpful: {{output}}",
    )


@pytest.fixture
def project(data_root, tmp_path, local_judge):
    write_helpful(data_root, local_judge)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, instance, local_judge


def _run(root: Path, instance, asset: str, partition) -> dg.ExecuteInProcessResult:
    defs = build_definitions(root)
    result = dg.materialize(
        assets=list(defs.assets),
        selection=[asset],
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )
    return result


def _ingest(root: Path, instance) -> list[str]:
    """Ingest the day; the files that run read."""
    result = _run(root, instance, "traces", DAY)
    assert result.success
    (event,) = result.get_asset_materialization_events()
    return sorted(event.materialization.metadata["files_read"].value)


def _judge(root: Path, instance) -> dg.ExecuteInProcessResult:
    result = _run(root, instance, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": "helpful"}))
    assert result.success
    return result


def _view(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def _scores(root: Path) -> pl.DataFrame:
    rows = read_partition(DataRoot.from_env(root), "judge_scores", {"evaluator": "helpful", "date": DAY})
    assert rows is not None
    return rows.sort("trace_id")


def test_a_second_file_is_read_and_judged_alone_and_the_first_keeps_its_rows(project):
    root, instance, judge = project
    _write(root, "a.jsonl", ["a1", "a2", "a3"])
    assert _ingest(root, instance) == [f"traces/{DAY}/a.jsonl"]
    _judge(root, instance)
    first = _scores(root)
    assert first["trace_id"].to_list() == ["a1", "a2", "a3"]

    _write(root, "b.jsonl", ["b1", "b2"])
    assert _ingest(root, instance) == [f"traces/{DAY}/b.jsonl"]  # a.jsonl is not read again
    before = judge_requests(judge)
    _judge(root, instance)
    assert judge_requests(judge) - before == 2  # b1 and b2: nothing of a.jsonl is planned nor asked again
    after = _scores(root)
    assert after["trace_id"].to_list() == ["a1", "a2", "a3", "b1", "b2"]
    # a.jsonl's rows are the same rows, judged when they were
    assert after.filter(pl.col("trace_id").str.starts_with("a")).equals(first)
    assert _view(root, "SELECT count(*), count(DISTINCT trace_id) FROM traces") == [(5, 5)]
    assert _view(root, "SELECT count(*), count(DISTINCT trace_id) FROM judge_scores") == [(5, 5)]


def test_a_changed_file_rejudges_its_changed_traces_and_a_removed_file_leaves(project):
    root, instance, judge = project
    _write(root, "a.jsonl", ["a1", "a2", "a3"])
    _write(root, "b.jsonl", ["b1", "b2"])
    _ingest(root, instance)
    _judge(root, instance)
    first = _scores(root)

    _write(root, "a.jsonl", ["a1", "a2", "a3", "a4"])  # a4 appended: a1..a3 unchanged
    os.utime(root / "traces" / DAY / "a.jsonl", (time.time() - 60, time.time() - 60))
    assert _ingest(root, instance) == [f"traces/{DAY}/a.jsonl"]
    before = judge_requests(judge)
    _judge(root, instance)
    assert judge_requests(judge) - before == 1  # a4 alone
    after = _scores(root)
    kept = ["a1", "a2", "a3", "b1", "b2"]
    assert after.filter(pl.col("trace_id").is_in(kept)).equals(first)  # judged_at and all kept

    (root / "traces" / DAY / "b.jsonl").unlink()
    assert _ingest(root, instance) == []
    _judge(root, instance)
    assert _scores(root)["trace_id"].to_list() == ["a1", "a2", "a3", "a4"]
    assert _view(root, "SELECT count(*) FROM traces") == [(4,)]
    assert _view(root, "SELECT count(*) FROM judge_scores") == [(4,)]


def test_a_changed_evaluator_rejudges_every_trace(project):
    root, instance, judge = project
    _write(root, "a.jsonl", ["a1", "a2"])
    _write(root, "b.jsonl", ["b1"])
    _ingest(root, instance)
    _judge(root, instance)
    write_evaluator(
        root,
        "helpful",
        mode="score",
        model="openai/mock",
        api_base=judge.base_url,
        temperature=0.0,
        score_scale={"min": 0, "max": 1},
        prompt="helpful, strictly: {{output}}",
    )
    before = judge_requests(judge)
    result = _judge(root, instance)
    assert judge_requests(judge) - before == 3
    (event,) = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert metadata["parts_judged"].value == 2 and metadata["rows_kept"].value == 0  # every part, nothing kept
    assert _scores(root)["config_hash"].n_unique() == 1


def test_arrivals_give_the_rows_of_one_run_over_the_same_files(project, tmp_path, monkeypatch):
    root, instance, _judge_server = project
    _write(root, "a.jsonl", ["a1", "a2", "dup"])
    _ingest(root, instance)
    _judge(root, instance)
    _write(root, "c.jsonl", ["c1"])
    assert _ingest(root, instance) == [f"traces/{DAY}/c.jsonl"]
    _judge(root, instance)
    _write(root, "b.jsonl", ["b1", "dup"])  # a trace id of a.jsonl: quarantined here, as in one run
    assert len(_ingest(root, instance)) == 3  # which file keeps it is the day's rule: the day is read whole
    _judge(root, instance)

    other = tmp_path / "one_run"
    (other / "evaluators").mkdir(parents=True)
    (other / "evaluators" / "helpful.yaml").write_text((root / "evaluators" / "helpful.yaml").read_text())
    for path in (root / "traces" / DAY).iterdir():
        target = other / "traces" / DAY / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    monkeypatch.setenv("EVAL_PLATFORM_DATA_DIR", str(other))
    (tmp_path / "home2").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home2")) as fresh:
        _ingest(other, fresh)
        _judge(other, fresh)

    def traces(at: Path) -> pl.DataFrame:
        found = read_partition(DataRoot.from_env(at), "traces", {"date": DAY})
        assert found is not None
        return found.drop("source_file").sort("trace_id")

    def quarantined(at: Path) -> list[tuple]:
        found = read_partition(DataRoot.from_env(at), "quarantine", quarantine_keys("traces", DAY))
        assert found is not None
        return sorted(zip(found["line"], found["reason"], found["detail"].str.replace(str(at), ""), strict=True))

    assert traces(root).equals(traces(other))
    assert quarantined(root) == quarantined(other) == [(2, "duplicate_trace_id", quarantined(other)[0][2])]
    columns = ["trace_id", "status", "score", "reasoning", "config_hash", "calls", "cache_hit"]
    mine = _scores(root).select(columns[:5])
    assert mine.equals(_scores(other).select(columns[:5]))


def test_a_run_killed_between_two_parts_leaves_views_whole_and_the_next_run_completes(project, monkeypatch):
    root, instance, _judge_server = project
    _write(root, "a.jsonl", ["a1", "a2"])
    _ingest(root, instance)
    _write(root, "a.jsonl", ["a1", "a2", "a3"])
    os.utime(root / "traces" / DAY / "a.jsonl", (time.time() - 60, time.time() - 60))
    _write(root, "b.jsonl", ["b1"])
    _write(root, "c.jsonl", ["c1", "a1"])  # a1 is a.jsonl's: quarantined here

    original = warehouse.PartitionWriter.write
    calls = {"n": 0}

    def killed(self, frame):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("no space left on device, while writing the second part")
        return original(self, frame)

    monkeypatch.setattr(warehouse.PartitionWriter, "write", killed)
    assert not _run(root, instance, "traces", DAY).success
    assert calls["n"] >= 2
    monkeypatch.setattr(warehouse.PartitionWriter, "write", original)
    # queryable, and no trace twice
    (total, distinct) = _view(root, "SELECT count(*), count(DISTINCT trace_id) FROM traces")[0]
    assert total == distinct
    (total, distinct) = _view(root, "SELECT count(*), count(DISTINCT file || line) FROM quarantine")[0]
    assert total == distinct

    _ingest(root, instance)
    assert _view(root, "SELECT trace_id FROM traces ORDER BY trace_id") == [
        (t,) for t in ["a1", "a2", "a3", "b1", "c1"]
    ]
    assert _view(root, "SELECT file, reason FROM quarantine WHERE partition = ?".replace("?", f"'{DAY}'")) == [
        (f"traces/{DAY}/c.jsonl", "duplicate_trace_id")
    ]
