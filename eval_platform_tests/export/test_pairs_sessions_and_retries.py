"""Pairwise and session verdicts as OpenTelemetry evaluation events and Phoenix span annotations, and an export that
tries again: within the run after a transient receiver error, and on the retry sensor's next tick after a failed
run. Against a real collector (Rotel) and a real Phoenix on 127.0.0.1, the app traced with the OpenTelemetry SDK,
the judge the local judge (the session judge's provider echoes the caller's key in its reasoning: no piece of it may
reach the receivers)."""

from __future__ import annotations

import threading
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.defs.test_no_key_leaks import KEY, KEY_ENV, leak
from eval_platform_tests.export.app import run_app
from eval_platform_tests.export.servers import Collector, missing, rotel_agent
from eval_platform_tests.export.test_otlp_events import (
    DAY,
    configure,
    export_metadata,
    materialize,
    scores_digest,
)
from eval_platform_tests.postgres_server import free_port

# two answers to one question (a pair), and two sessions
QUESTIONS = [
    ("What is the capital of France?", "Paris."),
    ("What is the capital of France?", "Lyon."),
    ("Who wrote Hamlet?", "Shakespeare."),
]
SESSIONS = ["s-1", "s-1", "s-2"]
EVALUATORS = ("preference", "session_quality", "helpfulness")


def write_project(root: Path, judge_url: str, phoenix_url: str | None = None) -> list[dict]:
    runs = run_app(root, DAY, QUESTIONS, sessions=SESSIONS, phoenix_url=phoenix_url)
    common = {"api_base": judge_url, "max_retries": 0, "timeout_s": 30}
    write_evaluator(
        root,
        "preference",
        mode="pairwise",
        pairwise={"pair_by": "input"},
        model="openai/mock",
        prompt="Which is better?\n{{input}}\nA: {{output_a}}\nB: {{output_b}}",
        **common,
    )
    write_evaluator(
        root,
        "session_quality",
        mode="score",
        score_scale={"min": 1, "max": 5},
        target="session",
        model="openai/fault/echo_key_reply",  # a valid verdict whose reasoning quotes the caller's key
        api_key_env=KEY_ENV,
        prompt="{{conversation}}",
        **common,
    )
    write_evaluator(
        root,
        "helpfulness",
        mode="score",
        score_scale={"min": 0, "max": 1},
        model="openai/mock",
        prompt="{{input}} -> {{output}}",
        **common,
    )
    return runs


@pytest.fixture
def project(data_root, local_judge, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    runs = write_project(data_root, local_judge.base_url)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        materialize(data_root, instance, "traces", DAY)
        for evaluator in EVALUATORS:
            materialize(data_root, instance, "judge_scores", key(evaluator))
        yield data_root, runs, instance


def key(evaluator: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"date": DAY, "evaluator": evaluator})


def final(root: Path, evaluator: str) -> pl.DataFrame:
    rows = read_partition(DataRoot.from_env(root), "judge_scores", {"evaluator": evaluator, "date": DAY})
    return rows.filter(pl.col("is_final") & (pl.col("status") == "COMPLETED"))


def value(record, name: str) -> str | None:
    text = record.attributes.get(name)
    return None if text is None else text.split("(", 1)[1].removesuffix(")")


def ledger(root: Path, evaluator: str = "helpfulness") -> pl.DataFrame:
    return read_partition(
        DataRoot.from_env(root), "verdict_exports", {"destination": "collector", "evaluator": evaluator, "date": DAY}
    )


def test_pairwise_and_session_verdicts_are_events_on_each_traces_root_span(project, collector):
    root, runs, instance = project
    configure(root, collector.endpoint)
    meta = {e: export_metadata(materialize(root, instance, "verdict_exports", key(e))) for e in EVALUATORS[:2]}
    assert "pair" not in meta["preference"]["not_exported"]
    assert "session" not in meta["session_quality"]["not_exported"]
    by_trace = {run["trace_id"]: run for run in runs}

    pairs, sessions = final(root, "preference"), final(root, "session_quality")
    assert pairs.height == 1 and sessions.height == 2
    records = collector.wait_for(2 * pairs.height + sessions.height)
    assert len(records) == 2 * pairs.height + sessions.height

    # a pairwise verdict: one event per side, each on its own trace's root span, from that side's point of view
    (pair,) = pairs.iter_rows(named=True)
    sides = {
        value(r, "eval_platform.pair.side"): r for r in records if value(r, "gen_ai.evaluation.name") == "preference"
    }
    assert set(sides) == {"A", "B"}
    labels = {"A": ("win", "loss"), "B": ("loss", "win"), "tie": ("tie", "tie")}[pair["winner"]]
    for side, mine, other, score, label in (
        ("A", pair["trace_id"], pair["trace_id_b"], pair["score"], labels[0]),
        ("B", pair["trace_id_b"], pair["trace_id"], 1 - pair["score"], labels[1]),
    ):
        record = sides[side]
        otel = by_trace[record.trace_id]
        assert record.span_id == otel["root_span_id"]
        assert value(record, "eval_platform.trace_id") == mine
        assert value(record, "eval_platform.pair.opponent_trace_id") == other
        assert float(value(record, "gen_ai.evaluation.score.value")) == pytest.approx(score)
        assert value(record, "gen_ai.evaluation.score.label") == label
    assert {sides["A"].trace_id, sides["B"].trace_id} == {runs[0]["trace_id"], runs[1]["trace_id"]}

    # a session verdict: on the root span of the trace it stands on, with the session as the conversation id
    on_sessions = [r for r in records if value(r, "gen_ai.evaluation.name") == "session_quality"]
    expected = {(row["session_id"], row["trace_id"]) for row in sessions.iter_rows(named=True)}
    assert {(value(r, "gen_ai.conversation.id"), r.trace_id) for r in on_sessions} == expected
    assert all(r.span_id == by_trace[r.trace_id]["root_span_id"] for r in on_sessions)

    # sent once: a re-run sends nothing
    for evaluator in EVALUATORS[:2]:
        again = export_metadata(materialize(root, instance, "verdict_exports", key(evaluator)))
        assert again["destinations"][0]["sent"] == 0
    assert len(collector.wait_for(len(records) + 1, timeout_s=3)) == len(records)
    # the session judge echoed the key into its reasoning: no piece of it reached the collector
    assert "request authorised by" in collector.log_text()
    assert leak(collector.log_text()) is None


@pytest.fixture
def later_collector():
    """A Rotel collector not started yet: a receiver that is down, then comes up."""
    binary = rotel_agent()
    if binary is None:
        missing("the `rotel` package is not installed: pip install -r requirements-dev.lock")
    server = Collector(binary)
    yield server
    server.stop()


def test_a_receiver_that_comes_back_within_the_run_gets_everything_once(project, later_collector):
    root, runs, instance = project
    before = scores_digest(root, EVALUATORS)
    configure(root, later_collector.endpoint, timeout_s=1, retries=8, retry_backoff_s=0.5)
    # the receiver is down when the run starts and comes up while the run waits to try again
    starting = threading.Timer(1.0, later_collector.start)
    starting.start()
    try:
        meta = export_metadata(materialize(root, instance, "verdict_exports", key("helpfulness")))
    finally:
        starting.join()
    assert meta["destinations"][0]["sent"] == len(QUESTIONS)
    assert len(later_collector.wait_for(len(QUESTIONS))) == len(QUESTIONS)
    rows = ledger(root)
    assert rows["status"].to_list() == ["sent"] * len(QUESTIONS)
    assert rows["attempts"].to_list() == [1] * len(QUESTIONS)  # one run's attempt
    assert scores_digest(root, EVALUATORS) == before


def test_the_retry_sensor_sends_what_a_failed_run_left_on_its_next_tick_and_nothing_twice(project, collector):
    root, runs, instance = project
    configure(root, f"http://127.0.0.1:{free_port()}", timeout_s=1, retries=0)  # nothing listens there
    materialize(root, instance, "verdict_exports", key("helpfulness"), ok=False)
    assert ledger(root)["status"].to_list() == ["failed"] * len(QUESTIONS)

    configure(root, collector.endpoint)
    defs = build_definitions(root)
    (sensor,) = [s for s in defs.sensors or [] if s.name == "verdict_export_retries"]
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING  # the export is on: so is its retry sensor
    resources = {"warehouse": defs.resources["warehouse"]}
    requests = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert [r.partition_key for r in requests] == [key("helpfulness")]
    # the tick's run sends what was missing
    meta = export_metadata(materialize(root, instance, "verdict_exports", requests[0].partition_key))
    assert meta["destinations"][0]["sent"] == len(QUESTIONS)
    assert ledger(root)["status"].to_list() == ["sent"] * len(QUESTIONS)
    # the next tick has nothing to do, and nothing was sent twice
    assert isinstance(sensor(dg.build_sensor_context(instance=instance, resources=resources)), dg.SkipReason)
    assert len(collector.wait_for(len(QUESTIONS) + 1, timeout_s=3)) == len(QUESTIONS)


def test_pairwise_and_session_verdicts_are_phoenix_annotations_on_each_traces_root_span(
    data_root, local_judge, phoenix_server, tmp_path, monkeypatch
):
    import json

    from eval_platform_tests.export.app import PROJECT
    from eval_platform_tests.export.test_phoenix_annotations import configure as configure_phoenix
    from eval_platform_tests.export.test_phoenix_annotations import wait_for_spans

    monkeypatch.setenv(KEY_ENV, KEY)
    runs = write_project(data_root, local_judge.base_url, phoenix_url=phoenix_server.url)
    wait_for_spans(phoenix_server, {run["trace_id"] for run in runs})
    configure_phoenix(data_root, phoenix_server.url)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        materialize(data_root, instance, "traces", DAY)
        for evaluator in EVALUATORS[:2]:
            materialize(data_root, instance, "judge_scores", key(evaluator))
            materialize(data_root, instance, "verdict_exports", key(evaluator))
    roots = {run["root_span_id"]: run["trace_id"] for run in runs}
    annotations = phoenix_server.annotations(PROJECT, list(roots))

    (pair,) = final(data_root, "preference").iter_rows(named=True)
    sides = {a["metadata"]["pair.side"]: a for a in annotations if a["name"] == "preference"}
    assert set(sides) == {"A", "B"}
    for side, mine, other, score in (
        ("A", pair["trace_id"], pair["trace_id_b"], pair["score"]),
        ("B", pair["trace_id_b"], pair["trace_id"], 1 - pair["score"]),
    ):
        annotation = sides[side]
        assert roots[annotation["span_id"]] == mine  # on its own trace's root span
        assert annotation["metadata"]["pair.opponent_trace_id"] == other
        assert annotation["result"]["score"] == pytest.approx(score)

    sessions = final(data_root, "session_quality")
    on_sessions = [a for a in annotations if a["name"] == "session_quality"]
    expected = {(row["session_id"], row["trace_id"]) for row in sessions.iter_rows(named=True)}
    assert {(a["metadata"]["session_id"], roots[a["span_id"]]) for a in on_sessions} == expected
    # the session judge echoed the key into its reasoning: no piece of it reached Phoenix
    assert all("request authorised by" in a["result"]["explanation"] for a in on_sessions)
    assert leak(json.dumps(annotations)) is None
