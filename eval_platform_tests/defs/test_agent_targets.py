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
RECORDED_DAY = "2026-11-16"


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
        [
            turn(2, DAYS[1], 10),
            turn(3, DAYS[1], 20),
            {"trace_id": "lone", "timestamp": f"{DAYS[1]}T11:00:00Z", "input": "hi", "output": "hello"},
        ],
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
        assets=list(defs.assets),
        selection=[asset],
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
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
    assert [r[5] for r in rows(root) if r[1] == "s1"] == [
        "user: question 2\nassistant: answer 2\nuser: question 3\nassistant: answer 3"
    ]

    assert materialize(defs, "traces", DAYS[0], instance).success
    assert judge(defs, DAYS[0], instance).success
    before = judge_requests(local_judge)
    again = judge(defs, DAYS[1], instance)
    assert again.success and judge_requests(local_judge) - before == 1  # the session has a new turn: judged anew
    checks = {check.check_name: check.passed for check in again.get_asset_check_evaluations()}
    assert checks["every_trace_has_one_status"]  # s1-t2 has no row of its own: the session's row stands for it
    assert (
        "2026-11-09"
        not in again.asset_materializations_for_node("judge_scores")[0].metadata["session_days_missing"].value
    )
    assert [r[:5] for r in rows(root)] == [
        ("2026-11-09", "s1", "s1-t1", "FAILED", "unparseable"),  # the echo judge's reply is the transcript
        ("2026-11-10", None, "lone", "SKIPPED", "no_session"),
        ("2026-11-10", "s1", "s1-t3", "FAILED", "unparseable"),
    ]
    transcript = [r[5] for r in rows(root) if r[0] == DAYS[1] and r[1] == "s1"][0]
    assert transcript.splitlines() == [
        "user: question 1",
        "assistant: answer 1",
        "user: question 2",
        "assistant: answer 2",
        "user: question 3",
        "assistant: answer 3",
    ]


# ------------------------------------------------------------------------------------------- recorded instrumentation


def recorded_project(data_root: Path, local_judge, tmp_path: Path, folder: str):
    """A day of real OpenTelemetry GenAI output (the openai-v2 instrumentation, recorded), as files in traces/DAY/
    (a past day: a trace belongs to the day folder holding its root span, and today is not a partition yet)."""
    from eval_platform_tests.ingest.test_otel_recorded import FIXTURES, export_files

    day = RECORDED_DAY
    (data_root / "traces" / day).mkdir(parents=True)
    for name in export_files(folder):
        (data_root / "traces" / day / name).write_bytes((FIXTURES / folder / name).read_bytes())
    common = {"mode": "score", "api_base": local_judge.base_url}
    write_evaluator(data_root, "final_answer", model="openai/echo/output", prompt="{{input}} {{output}}", **common)
    write_evaluator(
        data_root,
        "last_chat",
        model="openai/mock",
        span={"operation": "chat", "pick": "last"},
        prompt="{{input}} {{output}}",
        **common,
    )
    write_evaluator(
        data_root, "turns", model="openai/echo/conversation", target="session", prompt="{{conversation}}", **common
    )
    (tmp_path / "dagster_home").mkdir()
    return day, build_definitions(data_root), dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home"))


def judge_all(defs, day: str, instance) -> None:
    assert materialize(defs, "traces", day, instance).success
    for evaluator in ("final_answer", "last_chat", "turns"):
        key = dg.MultiPartitionKey({"date": day, "evaluator": evaluator})
        assert materialize(defs, "judge_scores", key, instance).success


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_recorded_agent_traces_are_judged_at_trace_span_and_session_level(data_root, local_judge, tmp_path):
    from eval_platform_tests.ingest.test_otel_recorded import scenarios

    day, defs, instance_context = recorded_project(data_root, local_judge, tmp_path, "genai")
    runs = scenarios("genai")
    with instance_context as instance:
        judge_all(defs, day, instance)

    answers = dict(query(data_root, "SELECT trace_id, raw_response FROM judge_scores WHERE evaluator = 'final_answer'"))
    outputs = dict(query(data_root, "SELECT trace_id, output FROM traces"))
    for trace_id in runs["agent"]:  # the agent's answer reached the judge, not its first call's tool_call
        assert answers[trace_id] == outputs[trace_id] and answers[trace_id].startswith("Based on what I looked up")
    [failed] = runs["http_500"]
    assert query(
        data_root, f"SELECT evaluator, status, reason FROM judge_scores WHERE trace_id = '{failed}' ORDER BY 1"
    ) == [
        ("final_answer", "SKIPPED", "app_error"),  # the HTTP 500: never sent
        ("last_chat", "SKIPPED", "app_error"),  # its chat span has status error
        ("turns", "SKIPPED", "no_session"),
    ]

    last_chat = query(
        data_root,
        """SELECT j.trace_id, j.span_id, s.name FROM judge_scores j JOIN spans s USING (trace_id, span_id)
           WHERE j.evaluator = 'last_chat' AND j.status = 'COMPLETED'""",
    )
    last_started = dict(
        query(data_root, "SELECT trace_id, arg_max(span_id, start_time) FROM spans WHERE operation = 'chat' GROUP BY 1")
    )
    assert {trace_id: span_id for trace_id, span_id, _ in last_chat} == {
        t: s for t, s in last_started.items() if t != failed
    }

    [(session_trace, transcript)] = query(
        data_root,
        "SELECT trace_id, raw_response FROM judge_scores "
        "WHERE evaluator = 'turns' AND session_id = 'session-multi-turn-1'",
    )
    assert session_trace == runs["multi_turn"][-1]  # judged once, on its last trace
    questions = ["How long do I boil an egg?", "And for a soft yolk?", "Thanks! Any tip for peeling it?"]
    assert [line for line in transcript.splitlines() if line.startswith("user: ")] == [f"user: {q}" for q in questions]


def test_traces_recorded_without_message_content_are_never_sent(data_root, local_judge, tmp_path):
    day, defs, instance_context = recorded_project(data_root, local_judge, tmp_path, "genai_no_content")
    before = judge_requests(local_judge)
    with instance_context as instance:
        judge_all(defs, day, instance)
    assert judge_requests(local_judge) == before  # 12 traces, 3 evaluators: not one call
    reasons = dict(query(data_root, "SELECT reason, count(*) FROM judge_scores GROUP BY 1"))
    assert set(reasons) <= {"empty_text", "app_error", "no_session"} and reasons["empty_text"] >= 12
    assert query(data_root, "SELECT sum(cost_usd), sum(calls) FROM judge_scores") == [(0.0, 0)]
