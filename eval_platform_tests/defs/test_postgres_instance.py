"""The shipped dagster.postgres.yaml against a real PostgreSQL server the suite starts itself: a Dagster instance
built from it records our assets' runs and materializations in PostgreSQL, and a backfill whose runs execute at
once in separate processes (as on separate machines) loses and duplicates nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform.instance_config import shipped_instance_yaml
from eval_platform.schemas import APP_ERROR, EMPTY_TEXT, NO_FINAL_ANSWER
from eval_platform_tests.conftest import copy_sample_days, write_evaluator
from eval_platform_tests.dagster_daemon import finished_ticks, running_daemon

REPO = Path(__file__).resolve().parents[2]
DAYS = ["2026-11-09", "2026-11-10"]
EVALUATORS = ["helpfulness", "conciseness"]


@pytest.fixture
def project(data_root, local_judge):
    copy_sample_days(data_root, DAYS)
    for name in EVALUATORS:
        write_evaluator(
            data_root,
            name,
            mode="score",
            model="openai/mock",
            api_base=local_judge.base_url,
            temperature=0.0,
            score_scale={"min": 0, "max": 1},
            prompt=f"{name}: {{{{output}}}}",
        )
    return data_root


def judge_key(day: str, evaluator: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"date": day, "evaluator": evaluator})


def materialize(defs, asset: str, partition, instance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        list(defs.assets), selection=[asset], partition_key=partition, instance=instance, resources=defs.resources
    )


def sql(root: Path, query: str):
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(query).fetchall()


def test_postgres_config_has_the_same_queue_and_limits_as_the_shipped_dagster_yaml():
    postgres, sqlite = (yaml.safe_load(shipped_instance_yaml(postgres)) for postgres in (True, False))
    assert postgres["concurrency"] == sqlite["concurrency"]
    connection = dict(postgres["storage"]["postgres"]["postgres_db"])
    assert connection.pop("scheme") == "postgresql+psycopg2"  # the driver dagster-postgres installs
    # no secret in the file: every connection field comes from the environment
    assert connection == {
        field: {"env": f"DAGSTER_POSTGRES_{name}"}
        for field, name in [
            ("hostname", "HOST"),
            ("port", "PORT"),
            ("username", "USER"),
            ("password", "PASSWORD"),
            ("db_name", "DB"),
        ]
    }


def test_an_instance_from_the_postgres_config_records_our_runs_and_materializations(
    project, postgres_home, postgres_db
):
    defs = build_definitions(project)
    day = DAYS[0]
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
        config = instance.get_concurrency_config()
        assert config.run_queue_config.max_concurrent_runs == 4
        assert [t for t in config.run_queue_config.tag_concurrency_limits if t["key"] == "dagster/backfill"]
        assert config.pool_config.default_pool_limit == 2

        assert materialize(defs, "traces", day, instance).success
        assert materialize(defs, "judge_scores", judge_key(day, "helpfulness"), instance).success

        runs = instance.get_runs()
        assert len(runs) == 2 and {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
        latest = instance.get_latest_materialization_event(dg.AssetKey("judge_scores"))
        assert latest.dagster_event.partition == judge_key(day, "helpfulness")
        assert instance.get_materialized_partitions(dg.AssetKey("traces")) == {day}

    # The records are in PostgreSQL, not in a SQLite file beside the config.
    with postgres_db.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs")
        assert cursor.fetchone() == (2,)
        cursor.execute(
            "SELECT asset_key FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' ORDER BY id"
        )
        assert [row[0] for row in cursor.fetchall()] == ['["traces"]', '["judge_scores"]']
    conn.close()
    assert not [path for path in postgres_home.rglob("*") if path.suffix == ".db"]
    judged = sql(project, "SELECT count(*), count(DISTINCT trace_id) FROM judge_scores")
    assert judged == sql(project, f"SELECT count(*), count(DISTINCT trace_id) FROM traces WHERE date = '{day}'")


def set_pool_limit_once() -> None:
    """The README's one-time step for a new PostgreSQL database (Dagster issue #33552), through the real CLI."""
    subprocess.run(
        [sys.executable, "-m", "dagster", "instance", "concurrency", "set", "llm_judge", "2"],
        check=True,
        capture_output=True,
    )


def judge_once_then_change_default_limit(defs, home: Path, one_time_step: bool) -> dg.ExecuteInProcessResult:
    """Judge a partition, raise `default_limit` in the instance config, judge it again: the second result."""
    day, key = DAYS[0], judge_key(DAYS[0], "helpfulness")
    with dg.DagsterInstance.get() as instance:
        assert materialize(defs, "traces", day, instance).success
        if one_time_step:
            set_pool_limit_once()
        assert materialize(defs, "judge_scores", key, instance).success
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    config["concurrency"]["pools"]["default_limit"] = 3
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    with dg.DagsterInstance.get() as instance:
        return dg.materialize(
            list(defs.assets),
            selection=["judge_scores"],
            partition_key=key,
            instance=instance,
            resources=defs.resources,
            raise_on_error=False,
        )


def test_after_the_one_time_pool_step_runs_survive_a_changed_default_limit(project, postgres_home):
    result = judge_once_then_change_default_limit(build_definitions(project), postgres_home, one_time_step=True)
    assert result.success
    with dg.DagsterInstance.get() as instance:  # the pool keeps the limit set by hand; the file's default is unused
        assert instance.event_log_storage.get_concurrency_info("llm_judge").slot_count == 2


def test_without_the_one_time_step_a_changed_default_limit_breaks_runs(project, postgres_home):
    """Why the README's step exists (Dagster issue #33552). When this fails, Dagster has fixed the bug: drop the
    step from the README and set_pool_limit_once from these tests."""
    result = judge_once_then_change_default_limit(build_definitions(project), postgres_home, one_time_step=False)
    assert not result.success
    failure = result.get_run_failure_event().event_specific_data.error
    assert "InFailedSqlTransaction" in failure.to_string() and "concurrency_limits" in failure.to_string()


# One run of a backfill, as a separate process would execute it on another machine: it loads the instance from
# $DAGSTER_HOME (the PostgreSQL config), waits until every process is ready, then materializes its partition.
RUN_ONE_PARTITION = """
import sys, time
from pathlib import Path
import dagster as dg
from eval_platform.definitions import build_definitions
from eval_platform.instance_config import shipped_instance_yaml
from eval_platform.settings import data_root

day, evaluator, ready, go = sys.argv[1:]
defs = build_definitions(data_root())
with dg.DagsterInstance.get() as instance:
    Path(ready).touch()
    while not Path(go).exists():
        time.sleep(0.02)
    result = dg.materialize(list(defs.assets), selection=["judge_scores"], instance=instance,
                            partition_key=dg.MultiPartitionKey({"date": day, "evaluator": evaluator}),
                            resources=defs.resources, tags={"test/process": ready})
sys.exit(0 if result.success else 1)
"""


def test_a_concurrent_backfill_through_postgres_loses_and_duplicates_nothing(project, postgres_home, tmp_path):
    defs = build_definitions(project)
    with dg.DagsterInstance.get() as instance:
        for day in DAYS:
            assert materialize(defs, "traces", day, instance).success
    # The one-time setup step the README gives for a new database: without it, runs that start outside the
    # queue at the same moment and are the first to use the pool can crash (Dagster issue #33552).
    set_pool_limit_once()

    # Every partition of the backfill, plus one launched twice (a retried run racing the first): 5 processes.
    partitions = [(day, evaluator) for day in DAYS for evaluator in EVALUATORS]
    launches = [*partitions, partitions[0]]
    signals = tmp_path / "signals"
    signals.mkdir()
    go = signals / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", RUN_ONE_PARTITION, day, evaluator, str(signals / f"ready-{i}"), str(go)],
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, (day, evaluator) in enumerate(launches)
    ]
    try:
        while len(list(signals.glob("ready-*"))) < len(launches):
            assert all(p.poll() is None for p in processes), "a run process exited before it was ready"
            time.sleep(0.05)
        go.touch()  # all five materialize at once
        outputs = [p.communicate(timeout=600)[0] for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0, output

    with dg.DagsterInstance.get() as instance:
        judge_runs = [run for run in instance.get_runs() if run.tags.get("test/process")]
        assert len(judge_runs) == len(launches)
        assert {run.status for run in judge_runs} == {dg.DagsterRunStatus.SUCCESS}
        # each run recorded exactly one materialization, of the partition it was launched for
        for run in judge_runs:
            events = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            assert [(e.dagster_event.asset_key, e.dagster_event.partition) for e in events] == [
                (dg.AssetKey("judge_scores"), run.tags["dagster/partition"])
            ]
        # ... and each partition has one materialization per run that targeted it: none lost, none extra
        records = instance.fetch_materializations(dg.AssetKey("judge_scores"), limit=100).records
        per_partition = Counter(record.partition_key for record in records)
        expected = Counter(str(judge_key(day, evaluator)) for day, evaluator in launches)
        assert per_partition == expected
        assert instance.get_materialized_partitions(dg.AssetKey("judge_scores")) == {
            str(judge_key(day, evaluator)) for day, evaluator in partitions
        }

    # The warehouse holds every (evaluator, day, trace) exactly once, all judged, the retried partition included.
    judged = sql(project, "SELECT evaluator, CAST(date AS VARCHAR), trace_id, status, reason FROM judge_scores")
    traced = sql(project, "SELECT CAST(date AS VARCHAR), trace_id FROM traces")
    assert traced and len(traced) == len(set(traced))
    assert sorted((e, d, t) for e, d, t, *_ in judged) == sorted((e, d, t) for e in EVALUATORS for d, t in traced)
    # every PandaLM trace with an answer is judged; the agent app's traces recorded without content, or whose model
    # call failed, and the empty answers are SKIPPED (never paid for), never FAILED
    assert {(status, reason) for *_, status, reason in judged} == {
        ("COMPLETED", None),
        ("SKIPPED", EMPTY_TEXT),
        ("SKIPPED", APP_ERROR),
        ("SKIPPED", NO_FINAL_ANSWER),  # PandaLM items whose model answered nothing: the prompt shows {{output}}
    }


def test_a_backfill_the_daemon_launches_from_the_postgres_queue_loses_and_duplicates_nothing(project, postgres_home):
    """The production path: ingesting two days makes the automation sensor request every judge_scores partition
    of them as a backfill; the daemon queues its runs in PostgreSQL and launches them in their own processes
    under the queue's limits."""
    expected = {str(judge_key(day, evaluator)) for day in DAYS for evaluator in EVALUATORS}
    defs = build_definitions(project)
    with dg.DagsterInstance.get() as instance, running_daemon(postgres_home) as daemon:
        # The sensor's first tick only records where it starts from; an update counts once it has ticked.
        daemon.wait_for(lambda: finished_ticks(instance))
        for day in DAYS:
            assert materialize(defs, "traces", day, instance).success

        def judge_runs():
            return [run for run in instance.get_runs() if dg.AssetKey("judge_scores") in (run.asset_selection or ())]

        def backfill_done():
            runs = judge_runs()
            done = instance.get_materialized_partitions(dg.AssetKey("judge_scores"))
            return done == expected and runs and all(run.is_finished for run in runs)

        daemon.wait_for(backfill_done)
        judge_runs = judge_runs()
        assert {run.status for run in judge_runs} == {dg.DagsterRunStatus.SUCCESS}
        backfills = instance.get_backfills()
        assert backfills and all(run.tags.get("dagster/backfill") for run in judge_runs)
        for run in judge_runs:  # every run waited in the PostgreSQL queue before the daemon launched it
            assert instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_ENQUEUED)
        # the queue never ran more backfill runs at once than the `dagster/backfill` tag limit (2)
        records = instance.get_run_records(dg.RunsFilter(run_ids=[run.run_id for run in judge_runs]))
        spans = [(record.start_time, record.end_time) for record in records]
        assert max(sum(start <= moment < end for start, end in spans) for moment, _ in spans) <= 2
        records = instance.fetch_materializations(dg.AssetKey("judge_scores"), limit=100).records
        assert Counter(record.partition_key for record in records) == Counter(expected)

    judged = sql(project, "SELECT evaluator, CAST(date AS VARCHAR), trace_id, status, reason FROM judge_scores")
    traced = sql(project, "SELECT CAST(date AS VARCHAR), trace_id FROM traces")
    assert sorted((e, d, t) for e, d, t, *_ in judged) == sorted((e, d, t) for e in EVALUATORS for d, t in traced)
    # every PandaLM trace with an answer is judged; the agent app's traces recorded without content, or whose model
    # call failed, and the empty answers are SKIPPED (never paid for), never FAILED
    assert {(status, reason) for *_, status, reason in judged} == {
        ("COMPLETED", None),
        ("SKIPPED", EMPTY_TEXT),
        ("SKIPPED", APP_ERROR),
        ("SKIPPED", NO_FINAL_ANSWER),  # PandaLM items whose model answered nothing: the prompt shows {{output}}
    }
