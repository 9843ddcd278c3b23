"""The demo's agent evaluators (data/evaluators) on a committed sample day, ingested for real and judged through the
local judge over HTTP: each gives rows of its target kind (trace, span, session, check), skips what must not be
paid for (a failed call: app_error; no captured text: empty_text), and leaves the PandaLM traces of the day alone
(they are another project's, though the day's PandaLM OTLP file has chat and tool spans too)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from eval_platform.demo import _targets_summary
from eval_platform.dry_run import estimate
from eval_platform.ingest.traces import read_trace_day
from eval_platform.judging.evaluator_day import judge_partition
from eval_platform.judging.loading import load_evaluators
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import JUDGE_SCORE_SCHEMA
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import refresh_catalog, write_partition
from eval_platform_tests.conftest import REPO_DATA, copy_sample_days, judge_requests

DAY = "2026-11-13"  # also holds the PandaLM OTLP file: spans of another project the selectors would match
AGENT_EVALUATORS = ("task_completion", "tool_call_quality", "conversation_quality", "tool_errors")
PROJECT = "agent-demo-app"


@pytest.fixture(scope="module")
def day(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("demo") / "data"
    copy_sample_days(root, [DAY])
    ingested = read_trace_day(root, DAY)
    write_partition(DataRoot.from_env(root), "traces", {"date": DAY}, ingested.traces)
    manifest = json.loads((REPO_DATA / "agent_recordings.json").read_text())["days"][DAY]
    scenario = {t: name for r in manifest.values() for name, ids in r["scenarios"].items() for t in ids}
    no_content = {t for ids in manifest["genai_no_content"]["scenarios"].values() for t in ids}
    return {"root": root, "ingested": ingested, "scenario": scenario, "no_content": no_content}


@pytest.fixture(scope="module")
def judged(day, local_judge, tmp_path_factory) -> dict:
    scratch = tmp_path_factory.mktemp("runtime")
    runtime = ModelRuntime(
        LiteLLMModelClient(),
        ModelCache(scratch / "cache"),
        BudgetLedger(scratch / "budget.sqlite"),
        local_judge_url=local_judge.base_url,
        local_judge_for_missing_keys=True,  # the demo's mode
        env={},  # no provider key: the local judge answers, as in the demo
    )
    evaluators = load_evaluators(REPO_DATA / "evaluators")
    results = {}
    for name in AGENT_EVALUATORS:
        assert evaluators[name].enabled and evaluators[name].projects == [PROJECT]
        before = judge_requests(local_judge)
        partition = judge_partition(DataRoot.from_env(day["root"]), evaluators[name], DAY, runtime, set())
        results[name] = (partition, judge_requests(local_judge) - before)
    return results


@pytest.fixture(scope="module")
def distinct(day) -> dict[str, int]:
    """The dry run's distinct requests of each evaluator's day: what a run sends (identical ones once)."""
    evaluators = load_evaluators(REPO_DATA / "evaluators")
    return {
        name: estimate(evaluators[name], [DAY], DataRoot.from_env(day["root"])).distinct for name in AGENT_EVALUATORS
    }


def outcomes(rows: pl.DataFrame) -> dict[tuple[str, str | None], int]:
    counted = rows.group_by("status", "reason").len().iter_rows()
    return {(status, reason): n for status, reason, n in counted}


@pytest.mark.parametrize("name", AGENT_EVALUATORS)
def test_each_agent_evaluator_judges_every_agent_trace_and_no_pandalm_trace(day, judged, name):
    partition, _ = judged[name]
    rows = partition.result.rows
    agent_ids = set(day["scenario"])
    assert partition.every_trace_has_one_status
    assert set(rows["project_id"]) == {PROJECT} and set(rows["trace_id"]) <= agent_ids
    assert partition.result.summary["traces_in_partition"] == len(agent_ids) == 60


def test_task_completion_rows_are_trace_rows(day, judged, distinct):
    partition, sent = judged["task_completion"]
    rows = partition.result.rows
    assert rows.height == 60 and rows["span_id"].is_null().all()
    failed = {t for t, s in day["scenario"].items() if s == "http_500"}
    empty = day["no_content"] - failed
    reasons = dict(zip(rows["trace_id"], rows["reason"], strict=True))
    assert {t for t, r in reasons.items() if r == "app_error"} == failed  # the HTTP 500 of each recording
    assert {t for t, r in reasons.items() if r == "empty_text"} == empty  # nothing captured: never paid for
    assert outcomes(rows)[("COMPLETED", None)] == 60 - len(failed) - len(empty) == 44
    assert set(rows.filter(pl.col("status") == "COMPLETED")["model"]) == {"local/mock"}
    # one request per distinct judged prompt (the recordings repeat some traces word for word), none for the skipped
    assert sent == distinct["task_completion"] == int(rows["calls"].sum()) < 44
    assert rows.filter(pl.col("status") == "COMPLETED")["cache_hit"].sum() == 44 - sent


def test_tool_call_quality_rows_are_one_per_tool_span(day, judged):
    partition, sent = judged["tool_call_quality"]
    rows = partition.result.rows
    spans = day["ingested"].spans
    tool_spans = spans.filter((pl.col("operation") == "execute_tool") & pl.col("trace_id").is_in(list(day["scenario"])))
    span_rows = rows.filter(pl.col("span_id").is_not_null())
    assert sorted(span_rows["span_id"]) == sorted(tool_spans["span_id"])
    assert span_rows.height == 15  # per recording: two agent turns and the failing order lookup
    by_scenario = {}
    for row in span_rows.iter_rows(named=True):
        by_scenario.setdefault(day["scenario"][row["trace_id"]], []).append(row["reason"])
    assert by_scenario["agent_tool_error"] == ["app_error"] * 5  # the tool span failed
    # no content captured: a tool span without arguments or result
    assert sorted(by_scenario["agent"], key=str) == [None] * 8 + ["empty_text"] * 2
    # every other trace has no tool span: one row saying so, no call
    assert set(rows.filter(pl.col("span_id").is_null())["reason"]) == {"span_not_found"}
    assert sent == 8


def test_conversation_quality_rows_are_one_per_session(day, judged, distinct):
    partition, sent = judged["conversation_quality"]
    rows = partition.result.rows
    traces = day["ingested"].traces.filter(pl.col("project_id") == PROJECT)
    sessions = traces.filter(pl.col("session_id").is_not_null())
    session_rows = rows.filter(pl.col("session_id").is_not_null())
    assert sorted(session_rows["session_id"]) == sorted(sessions["session_id"].unique()) and session_rows.height == 10
    for row in session_rows.iter_rows(named=True):  # the row stands on the session's last trace
        turns = sessions.filter(pl.col("session_id") == row["session_id"]).sort("timestamp")
        assert row["trace_id"] == turns["trace_id"][-1]
    no_content = session_rows.filter(pl.col("trace_id").is_in(list(day["no_content"])))
    assert set(no_content["reason"]) == {"empty_text"} and no_content.height == 2
    assert outcomes(session_rows)[("COMPLETED", None)] == 8 and sent == distinct["conversation_quality"] <= 8
    assert set(rows.filter(pl.col("session_id").is_null())["reason"]) == {"no_session"}


def test_tool_errors_is_a_check_with_no_call(day, judged):
    partition, sent = judged["tool_errors"]
    rows = partition.result.rows
    assert sent == 0 and rows["calls"].sum() == 0 and rows["cost_usd"].sum() == 0
    assert set(rows["model"]) == {"check:tool_error_rate"}
    checked = rows.filter(pl.col("status") == "COMPLETED")
    verdicts = {}
    for row in checked.iter_rows(named=True):
        verdicts.setdefault(day["scenario"][row["trace_id"]], []).append(row["passed"])
    assert verdicts == {"agent": [True] * 10, "agent_tool_error": [False] * 5}
    # a trace without tool calls is never a pass: SKIPPED with the reason (not_applicable: its content was captured
    # and no tool was called, so there is no error rate; missing_field: nothing is known of its tools)
    skipped = rows.filter(pl.col("status") == "SKIPPED")["reason"].value_counts(sort=True).rows()
    assert skipped == [("not_applicable", 32), ("missing_field", 13)]


def test_the_demo_summary_says_what_each_row_judges_and_why_rows_were_skipped(day, judged):
    assert refresh_catalog(DataRoot.from_env(day["root"]), {"judge_scores": JUDGE_SCORE_SCHEMA})
    text = _targets_summary(day["root"], load_evaluators(REPO_DATA / "evaluators"))
    lines = {line.split()[0]: line.split(None, 4)[1:] for line in text.splitlines()[2:]}
    assert lines == {
        "conversation_quality": ["session", "10", "sessions", "skipped: empty_text 2, no_session 35"],
        "task_completion": ["trace", "60", "traces", "skipped: app_error 5, empty_text 11"],
        "tool_call_quality": ["span", "15", "spans", "skipped: app_error 5, empty_text 2, span_not_found 45"],
        "tool_errors": ["check", "60", "traces", "skipped: missing_field 13, not_applicable 32"],
    }


def test_the_demo_data_is_small(day):
    files = sorted(Path(REPO_DATA / "traces").glob("*/agent_*.jsonl.gz"))
    assert len(files) == 7 * 6 and sum(f.stat().st_size for f in files) < 400_000
