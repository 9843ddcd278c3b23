"""Finished before judged (issue 34), through the real assets on a real instance in a temp DAGSTER_HOME: OTLP spans
and JSONL rows written as files, ingested by `traces`, judged by `judge_scores` over HTTP by the local judge; time
is the traces' own timestamps and file times, and the run config's `now` (a run "as of" another time), never a
sleep. A trace whose spans are still coming is not judged (no request reaches the judge) and the metadata says it
waits; `judge_waiting_traces_sensor` asks for the partition again once its quiet period has passed; a span arriving
late re-opens a judged trace, judged again once, its row replaced; a session waits for its own quiet period."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.ingest.otel.values import encode_attributes
from eval_platform.judging.loading import load_evaluators
from eval_platform.llm.shared_state import SharedState
from eval_platform_tests.conftest import judge_requests, write_evaluator

EVALUATOR = "answer_quality"
QUIET_S = 600
TRACE = "5b8aa5a2d2c872e8321cf37308d69df2"


def _ns(at: datetime) -> str:
    return str(int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000)


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _span(span_id: str, name: str, attrs: dict, start: datetime, end: datetime, parent: str = "") -> dict:
    return {
        "traceId": TRACE,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": _ns(start),
        "endTimeUnixNano": _ns(end),
        "attributes": encode_attributes(attrs),
    }


def _chat(span_id: str, answer: str, start: datetime, end: datetime) -> dict:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.input.messages": _messages("user", "What is the capital of France?"),
        "gen_ai.output.messages": _messages("assistant", answer),
    }
    return _span(span_id, "chat gpt-4o-mini", attrs, start, end, parent="a1a1a1a1a1a1a1a1")


def _agent_run(end: datetime) -> list[dict]:
    """An agent run ending at `end`: its root span and one model call."""
    root = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}
    return [
        _span("a1a1a1a1a1a1a1a1", "invoke_agent helper", root, end - timedelta(seconds=5), end),
        _chat("b2b2b2b2b2b2b2b2", "Paris.", end - timedelta(seconds=4), end - timedelta(seconds=1)),
    ]


def _write_spans(root: Path, day: str, name: str, spans: list[dict], arrived: datetime | None = None) -> None:
    """One OTLP/JSON file of `spans`, as the Collector's file exporter writes it; `arrived`: its modification time."""
    request = {"resourceSpans": [{"resource": {"attributes": encode_attributes({"service.name": "shop"})},
                                  "scopeSpans": [{"scope": {"name": "app"}, "spans": spans}]}]}  # fmt: skip
    path = root / "traces" / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(request) + "\n")
    if arrived is not None:
        os.utime(path, (arrived.timestamp(), arrived.timestamp()))


@pytest.fixture
def project(data_root, local_judge, tmp_path):
    common = {"mode": "score", "model": "openai/mock", "api_base": local_judge.base_url}
    write_evaluator(
        data_root,
        EVALUATOR,
        prompt="Question: {{input}}\nAnswer: {{output}}",
        completion={"quiet_period_s": QUIET_S},
        # a budget, so that every call's spend is in the ledger the cost rollups read
        max_daily_cost_usd=100.0,
        input_cost_per_million=1.0,
        output_cost_per_million=1.0,
        **common,
    )
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, build_definitions(data_root), instance


def _ingest(defs, instance, day: str) -> None:
    result = dg.materialize(
        assets=list(defs.assets), selection=["traces"], partition_key=day, instance=instance, resources=defs.resources
    )
    assert result.success


def _judge(defs, instance, day: str, now: datetime | None = None, evaluator: str = EVALUATOR):
    config = {"ops": {"judge_scores": {"config": {"now": now.isoformat()}}}} if now is not None else None
    result = dg.materialize(
        assets=list(defs.assets),
        selection=["judge_scores"],
        partition_key=dg.MultiPartitionKey({"date": day, "evaluator": evaluator}),
        instance=instance,
        resources=defs.resources,
        run_config=config,
    )
    assert result.success
    return result


def _metadata(result) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node("judge_scores")[0].metadata.items()}


def _rows(root: Path) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(
            "SELECT trace_id, session_id, status FROM judge_scores WHERE is_final ORDER BY trace_id"
        ).fetchall()


def _sensor(defs, instance, cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
    sensor = defs.resolve_sensor_def("judge_waiting_traces_sensor")
    result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
    return list(result.run_requests or []), result.cursor


def test_a_trace_within_its_quiet_period_waits_unjudged_and_is_judged_once_after_it(project, local_judge):
    root, defs, instance = project
    now = datetime.now(UTC)
    day = now.date().isoformat()
    _write_spans(root, day, "agent.jsonl", _agent_run(now - timedelta(seconds=5)))  # the agent finished 5 s ago
    flat = {"trace_id": "flat-1", "timestamp": now.isoformat(), "input": "What is 2+2?", "output": "4"}
    (root / "traces" / day / "rows.jsonl").write_text(json.dumps(flat) + "\n")
    _ingest(defs, instance, day)

    before = judge_requests(local_judge)
    result = _judge(defs, instance, day)
    assert judge_requests(local_judge) - before == 1  # the JSONL row, whole when read; not the agent run's trace
    metadata = _metadata(result)
    assert metadata["traces_waiting_for_completion"] == 1
    assert metadata["traces_in_partition"] == 2
    complete_at = datetime.fromisoformat(metadata["complete_at"])
    assert now + timedelta(seconds=QUIET_S - 10) < complete_at <= now + timedelta(seconds=QUIET_S)
    assert _rows(root) == [("flat-1", None, "COMPLETED")]  # the waiting trace has no row, not a fake status
    (check,) = [c for c in result.get_asset_check_evaluations() if c.check_name == "every_trace_has_one_status"]
    assert check.passed and check.metadata["traces_waiting_for_completion"].value == 1
    assert "1 trace(s) wait for completion" in (check.description or "")

    requests, _cursor = _sensor(defs, instance, None)
    assert requests == []  # its quiet period has not passed

    before = judge_requests(local_judge)
    after = _judge(defs, instance, day, now=complete_at)
    assert judge_requests(local_judge) - before == 1  # judged, once
    assert _metadata(after)["traces_waiting_for_completion"] == 0
    assert _rows(root) == [(TRACE, None, "COMPLETED"), ("flat-1", None, "COMPLETED")]

    _judge(defs, instance, day, now=complete_at + timedelta(minutes=5))
    assert judge_requests(local_judge) - before == 1  # and not again
    assert _rows(root) == [(TRACE, None, "COMPLETED"), ("flat-1", None, "COMPLETED")]


def test_the_sensor_asks_for_the_partition_again_once_its_first_waiting_trace_is_complete(project, local_judge):
    root, defs, instance = project
    now = datetime.now(UTC)
    day = now.date().isoformat()
    ended = now - timedelta(seconds=QUIET_S + 100)
    _write_spans(root, day, "agent.jsonl", _agent_run(ended), arrived=ended + timedelta(seconds=1))
    _ingest(defs, instance, day)
    requests, cursor = _sensor(defs, instance, None)
    assert requests == []

    before = judge_requests(local_judge)
    # a run 60 s after the agent finished: the trace waited (its quiet period ended 100 s ago)
    waited = _metadata(_judge(defs, instance, day, now=ended + timedelta(seconds=60)))
    assert judge_requests(local_judge) == before and waited["traces_waiting_for_completion"] == 1

    requests, cursor = _sensor(defs, instance, cursor)
    partition = dg.MultiPartitionKey({"date": day, "evaluator": EVALUATOR})
    assert [r.partition_key for r in requests] == [str(partition)]
    assert _sensor(defs, instance, cursor)[0] == []  # asked once

    result = dg.materialize(
        assets=list(defs.assets),
        selection=["judge_scores"],
        partition_key=requests[0].partition_key,
        instance=instance,
        resources=defs.resources,
    )
    assert result.success and judge_requests(local_judge) - before == 1
    assert _rows(root) == [(TRACE, None, "COMPLETED")]
    requests, cursor = _sensor(defs, instance, cursor)
    assert requests == []  # nothing waits any more


def test_a_late_span_reopens_a_judged_trace_which_is_judged_again_once_and_replaced(project, local_judge):
    root, defs, instance = project
    now = datetime.now(UTC)
    day = now.date().isoformat()
    ended = now - timedelta(seconds=QUIET_S + 100)
    _write_spans(root, day, "1-agent.jsonl", _agent_run(ended), arrived=ended + timedelta(seconds=1))
    _ingest(defs, instance, day)
    before = judge_requests(local_judge)
    _judge(defs, instance, day)
    assert judge_requests(local_judge) - before == 1
    assert _rows(root) == [(TRACE, None, "COMPLETED")]

    # A model call of the same run, asynchronous, ends after its root: its span arrives in a second file now.
    answer = "Paris, the capital of France."
    late = _chat("c3c3c3c3c3c3c3c3", answer, now - timedelta(seconds=10), now - timedelta(seconds=5))
    _write_spans(root, day, "2-late.jsonl", [late])
    _ingest(defs, instance, day)
    reopened = _metadata(_judge(defs, instance, day))
    assert judge_requests(local_judge) - before == 1  # re-opened: it waits again, no call
    assert reopened["traces_waiting_for_completion"] == 1
    assert _rows(root) == []  # the verdict on half the run is withdrawn, not kept beside the next

    again = _metadata(_judge(defs, instance, day, now=datetime.fromisoformat(reopened["complete_at"])))
    assert judge_requests(local_judge) - before == 2  # its new content judged once
    assert again["traces_waiting_for_completion"] == 0 and again["calls"] == 1
    assert _rows(root) == [(TRACE, None, "COMPLETED")]  # replaced, not duplicated
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        (output,) = conn.execute("SELECT output FROM traces").fetchone()
    assert output == answer
    ledger = SharedState.of(root, instance).judge_ledger()
    assert [(name, calls) for name, _day, _usd, calls in ledger.totals()] == [(EVALUATOR, 2)]  # both calls paid


def test_a_session_is_judged_once_no_turn_came_for_its_quiet_period(data_root, local_judge, tmp_path):
    root = data_root
    write_evaluator(
        root,
        "session_quality",
        mode="score",
        model="openai/mock",
        api_base=local_judge.base_url,
        target="session",
        prompt="{{conversation}}",
        completion={"session_quiet_period_s": 900},
    )
    now = datetime.now(UTC)
    day = now.date().isoformat()
    turns = [
        {"trace_id": f"turn-{i}", "session_id": "s1", "timestamp": (now - timedelta(seconds=s)).isoformat(),
         "input": f"question {i}", "output": f"answer {i}"}
        for i, s in ((1, 300), (2, 60))
    ]  # fmt: skip
    (root / "traces" / day).mkdir(parents=True)
    (root / "traces" / day / "chat.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        defs = build_definitions(root)
        _ingest(defs, instance, day)
        before = judge_requests(local_judge)
        waited = _metadata(_judge(defs, instance, day, evaluator="session_quality"))
        assert judge_requests(local_judge) == before  # each turn is whole, but the session may go on
        assert waited["traces_waiting_for_completion"] == 2
        assert _rows(root) == []
        complete_at = datetime.fromisoformat(waited["complete_at"])
        assert now + timedelta(seconds=900 - 70) < complete_at <= now + timedelta(seconds=900 - 60)

        judged = _metadata(_judge(defs, instance, day, now=complete_at, evaluator="session_quality"))
        assert judge_requests(local_judge) - before == 1 and judged["traces_waiting_for_completion"] == 0
        assert _rows(root) == [("turn-2", "s1", "COMPLETED")]


@pytest.mark.parametrize(
    ("completion", "target", "field", "words"),
    [
        ({"quiet_period_s": -5}, None, "completion.quiet_period_s", "greater than or equal to 0"),
        ({"quiet_period": "2m"}, None, "completion.quiet_period", "Extra inputs are not permitted"),
        ({"session_quiet_period_s": 60}, None, "completion.session_quiet_period_s", "only applies to target 'session'"),
    ],
)
def test_a_completion_config_error_names_the_file_and_the_field(data_root, completion, target, field, words):
    write_evaluator(data_root, "ok", mode="score", model="openai/mock", prompt="{{output}}", completion={})
    write_evaluator(data_root, "slow", mode="score", model="openai/mock", prompt="{{output}}", completion=completion)
    broken: dict[str, str] = {}
    loaded = load_evaluators(data_root / "evaluators", broken=broken)
    assert list(loaded) == ["ok"] and loaded["ok"].completion.quiet_period_s == 60
    (message,) = broken.values()
    assert "slow.yaml" in message and field in message and words in message


def test_eval_platform_judge_says_how_many_traces_wait(data_root, local_judge, tmp_path, monkeypatch, capsys):
    from eval_platform.judge_day import main

    write_evaluator(
        data_root,
        EVALUATOR,
        mode="score",
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt="{{output}}",
        completion={"quiet_period_s": QUIET_S},
    )
    now = datetime.now(UTC)
    day = now.date().isoformat()
    _write_spans(data_root, day, "agent.jsonl", _agent_run(now - timedelta(seconds=5)))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))  # restored after the command sets its own
    before = judge_requests(local_judge)
    assert main(["--day", day]) == 0
    out = capsys.readouterr().out
    assert judge_requests(local_judge) == before
    assert "1 trace(s) wait to be finished (quiet period): no row yet; the first completes at" in out
