"""Every traces update judged (issue 34): a file ingested while a judge_scores run that already read its day is still
going. Real instance in a temp DAGSTER_HOME, real files, the local judge over HTTP: on the judge's first request, a
wire writes a second file into the day and materializes `traces` for it in the same instance, as the new-files
sensor's run would. The automation takes the judge run's later materialization as current and asks for nothing;
`judge_traces_updated_while_judging_sensor` asks for that partition, once, not while its run goes, and that run
judges the new file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.local_judge.server import LocalJudgeServer, Wire
from eval_platform_tests.conftest import write_evaluator

EVALUATOR = "answer_quality"
DAY = "2026-11-20"
SENSOR = "judge_traces_updated_while_judging_sensor"


def _write(root: Path, name: str, ids: list[str]) -> None:
    rows = [{"trace_id": t, "timestamp": f"{DAY}T10:00:00Z", "input": f"q {t}", "output": f"a {t}"} for t in ids]
    path = root / "traces" / DAY / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


class IngestDuringJudging(Wire):
    """On the first judge request once armed: `ingest` runs (a second file arrives and the day's traces are
    materialized; later, the sensor is evaluated while the run goes), then the server's judge answers."""

    def __init__(self) -> None:
        self.ingest = None
        self.fired = False

    async def chat(self, request, body):
        if self.ingest is not None and not self.fired:
            self.fired = True
            await asyncio.to_thread(self.ingest)
        return None  # the server's own judge answers


@pytest.fixture
def wired_judge():
    wire = IngestDuringJudging()
    server = LocalJudgeServer(wires=[wire])
    server.start()
    yield server, wire
    server.stop()


def _materialize(defs, instance, asset: str, partition: str | dg.MultiPartitionKey) -> None:
    result = dg.materialize(
        assets=list(defs.assets), selection=[asset], partition_key=partition, instance=instance,
        resources=defs.resources,
    )  # fmt: skip
    assert result.success


def _judged(root: Path) -> list[str]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT trace_id FROM judge_scores WHERE status = 'COMPLETED' ORDER BY 1").fetchall()
    return [trace for (trace,) in rows]


def test_a_file_ingested_while_its_day_is_judged_is_judged_once_after_that_run(data_root, wired_judge, tmp_path):
    server, wire = wired_judge
    write_evaluator(
        data_root, EVALUATOR, mode="score", model="openai/mock", api_base=server.base_url, prompt="{{output}}"
    )
    partition = dg.MultiPartitionKey({"date": DAY, "evaluator": EVALUATOR})
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        defs = build_definitions(data_root)
        sensor = defs.resolve_sensor_def(SENSOR)
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        _write(data_root, "1-first.jsonl", ["first-1", "first-2"])
        _materialize(defs, instance, "traces", DAY)
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert set(tick.get_requested_partitions(dg.AssetKey("judge_scores"))) == {str(partition)}

        def second_file_arrives() -> None:
            _write(data_root, "2-second.jsonl", ["second-1", "second-2"])
            _materialize(defs, instance, "traces", DAY)

        wire.ingest = second_file_arrives
        _materialize(defs, instance, "judge_scores", partition)  # the run the automation asked for
        assert wire.fired
        assert _judged(data_root) == ["first-1", "first-2"]  # it read the day before the second file

        # The automation takes that run's materialization as newer than the traces: it asks for nothing.
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert set(tick.get_requested_partitions(dg.AssetKey("judge_scores"))) == set()

        result = sensor(dg.build_sensor_context(instance=instance))
        requests = list(result.run_requests or [])
        assert [r.partition_key for r in requests] == [str(partition)]
        cursor = result.cursor
        again = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
        assert list(again.run_requests or []) == []  # asked once, while its run has not happened

        # Its run; while it goes, the sensor (even one that forgot its request) does not ask for the partition.
        while_running: list[list[dg.RunRequest]] = []
        wire.fired = False
        wire.ingest = lambda: while_running.append(
            list(sensor(dg.build_sensor_context(instance=instance)).run_requests or [])
        )
        _materialize(defs, instance, "judge_scores", requests[0].partition_key)
        assert wire.fired and while_running == [[]]
        assert _judged(data_root) == ["first-1", "first-2", "second-1", "second-2"]
        after = sensor(dg.build_sensor_context(instance=instance, cursor=again.cursor))
        assert list(after.run_requests or []) == []
        # nor does the automation ask again for what that run judged
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert set(tick.get_requested_partitions(dg.AssetKey("judge_scores"))) == set()


def test_a_partition_judged_after_its_traces_is_not_asked_for(data_root, wired_judge, tmp_path):
    server, _wire = wired_judge
    write_evaluator(
        data_root, EVALUATOR, mode="score", model="openai/mock", api_base=server.base_url, prompt="{{output}}"
    )
    partition = dg.MultiPartitionKey({"date": DAY, "evaluator": EVALUATOR})
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        defs = build_definitions(data_root)
        sensor = defs.resolve_sensor_def(SENSOR)
        _write(data_root, "1-first.jsonl", ["first-1"])
        _materialize(defs, instance, "traces", DAY)
        _materialize(defs, instance, "judge_scores", partition)
        assert list(sensor(dg.build_sensor_context(instance=instance)).run_requests or []) == []
        # traces newer than the judge run: the automation's to ask for, not this sensor's (never asked twice)
        _write(data_root, "2-second.jsonl", ["second-1"])
        _materialize(defs, instance, "traces", DAY)
        assert list(sensor(dg.build_sensor_context(instance=instance)).run_requests or []) == []
