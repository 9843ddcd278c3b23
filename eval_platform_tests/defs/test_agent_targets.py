"""Session evaluators through the Dagster assets: a real instance in a temp DAGSTER_HOME, JSONL traces ingested to
Parquet, judge_scores reading its lookback window of traces partitions, the local judge over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import judge_requests, write_evaluator

DAYS = ["2026-11-09", "2026-11-10"]


def write_traces(root: Path, day: str, traces: list[dict]) -> None:
    folder = root / "traces" / day
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chat.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))


def turn(i: int, day: str, minute: int) -> dict:
    return {
        "trace_id": f"s1-t{i}",
        "timestamp": f"{day}T10:{minute:02d}:00Z",
        "session_id": "s1",
        "input": f"question {i}",
        "output": f"answer {i}",
    }


@pytest.fixture
def project(data_root, local_judge, tmp_path):
    write_traces(data_root, DAYS[0], [turn(1, DAYS[0], 50)])
    write_traces(
        data_root,
        DAYS[1],
        [turn(2, DAYS[1], 10), turn(3, DAYS[1], 20), {"trace_id": "lone", "timestamp": f"{DAYS[1]}T11:00:00Z",
                                                      "input": "hi", "output": "hello"}],
    )
    write_evaluator(
        data_root,
        "session_transcript",
        mode="score",
        target="session",
        model="openai/echo/conversation",
        api_base=local_judge.base_url,
        prompt="{{conversation}}",
    )
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, build_definitions(data_root), instance


def materialize(defs, asset: str, partition, instance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets=list(defs.assets), selection=[asset], partition_key=partition, instance=instance,
        resources=defs.resources, raise_on_error=False,
    )


def judge(defs, day: str, instance) -> dg.ExecuteInProcessResult:
    key = dg.MultiPartitionKey({"date": day, "evaluator": "session_transcript"})
    return materialize(defs, "judge_scores", key, instance)


def rows(root: Path) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(
            "SELECT date, session_id, trace_id, status, reason, raw_response FROM judge_scores ORDER BY date, trace_id"
        ).fetchall()


def test_a_session_partition_reads_its_earlier_days_and_says_which_are_missing(project, local_judge):
    root, defs, instance = project
    assert materialize(defs, "traces", DAYS[1], instance).success
    first = judge(defs, DAYS[1], instance)
    assert first.success
    metadata = first.asset_materializations_for_node("judge_scores")[0].metadata
    assert "2026-11-09" in metadata["session_days_missing"].value  # the 9th is not materialized: not shown, said
    assert [r[5] for r in rows(root) if r[1] == "s1"] == ["user: question 2\nassistant: answer 2\n"
                                                          "user: question 3\nassistant: answer 3"]

    assert materialize(defs, "traces", DAYS[0], instance).success
    assert judge(defs, DAYS[0], instance).success
    before = judge_requests(local_judge)
    again = judge(defs, DAYS[1], instance)
    assert again.success and judge_requests(local_judge) - before == 1  # the session has a new turn: judged anew
    checks = {check.check_name: check.passed for check in again.get_asset_check_evaluations()}
    assert checks["every_trace_has_one_status"]  # s1-t2 has no row of its own: the session's row stands for it
    assert "2026-11-09" not in again.asset_materializations_for_node("judge_scores")[0].metadata[
        "session_days_missing"
    ].value
    assert [r[:5] for r in rows(root)] == [
        ("2026-11-09", "s1", "s1-t1", "FAILED", "unparseable"),  # the echo judge's reply is the transcript
        ("2026-11-10", None, "lone", "SKIPPED", "no_session"),
        ("2026-11-10", "s1", "s1-t3", "FAILED", "unparseable"),
    ]
    transcript = [r[5] for r in rows(root) if r[0] == DAYS[1] and r[1] == "s1"][0]
    assert transcript.splitlines() == [
        "user: question 1", "assistant: answer 1",
        "user: question 2", "assistant: answer 2",
        "user: question 3", "assistant: answer 3",
    ]
