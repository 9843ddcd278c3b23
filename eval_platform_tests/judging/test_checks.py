"""Check evaluators: a registry scorer on each trace instead of a judge. Rows like a judge's, no call, no cost; a
trace the check cannot read is SKIPPED or FAILED with its reason, never a score of 0."""

from __future__ import annotations

import json

import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import unit_hash
from eval_platform.judging.loading import EvaluatorConfigError, load_evaluators
from eval_platform.judging.runner import judge_day
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform_tests.conftest import judge_requests, write_evaluator

DAY = "2026-11-12"


def calls(*names: str, failed: tuple[int, ...] = ()) -> str:
    """tool_calls as the traces table holds them; `failed`: the positions of the calls that errored."""
    return json.dumps(
        [
            {
                "span_id": f"s{i}",
                "name": n,
                "arguments": "{}",
                "result": "r",
                "status": "error" if i in failed else "ok",
            }
            for i, n in enumerate(names)
        ]
    )


# expected tools: [search, fetch]
AGENT_TRACES = [
    {"trace_id": "both", "tool_calls": calls("search", "fetch"), "output": "done"},
    {"trace_id": "one", "tool_calls": calls("search", "search", failed=(1,)), "output": "partly"},
    {"trace_id": "reversed", "tool_calls": calls("fetch", "search"), "output": None},
    {"trace_id": "none_called", "tool_calls": "[]", "output": "I could not"},
    {"trace_id": "not_an_agent", "tool_calls": None, "output": "plain chat"},
    {"trace_id": "broken", "tool_calls": '{"name": "search"}', "output": "x"},
    {"trace_id": "partial", "tool_calls": calls("search"), "partial_reason": "missing_parent:ab12", "output": "y"},
]


def traces(rows: list[dict]) -> pl.DataFrame:
    return conform(pl.DataFrame([{"date": DAY, **row} for row in rows], infer_schema_length=None), TRACE_SCHEMA)


def check(name: str = "tools", **fields) -> EvaluatorConfig:
    return EvaluatorConfig.model_validate({"name": name, **fields})


def by_trace(rows: pl.DataFrame) -> dict[str, dict]:
    return {row["trace_id"]: row for row in rows.iter_rows(named=True)}


def test_tool_call_recall_rows_are_judge_rows_with_no_call(local_judge, runtime):
    config = check(check={"scorer": "tool_call_accuracy", "expected_tools": ["search", "fetch"]})
    before = judge_requests(local_judge)
    result = judge_day(config, DAY, traces(AGENT_TRACES), runtime)
    assert judge_requests(local_judge) == before  # nothing was sent, though a judge is listening
    assert runtime.ledger.totals() == []  # nothing reserved or spent against a budget
    rows = by_trace(result.rows)
    assert len(rows) == len(AGENT_TRACES)  # every trace has exactly one row
    # recall = matched / expected, hand-counted: both 2/2; one 1/2 (search twice, fetch never); reversed 2/2 (any
    # order); none_called 0/2, a real zero: the trajectory is known and empty.
    completed = {t: (r["score"], r["passed"]) for t, r in rows.items() if r["status"] == "COMPLETED"}
    assert completed == {"both": (1.0, True), "one": (0.5, False), "reversed": (1.0, True), "none_called": (0.0, False)}
    assert "expected ['search', 'fetch'], called ['search', 'search']" in rows["one"]["reasoning"]
    assert (rows["not_an_agent"]["status"], rows["not_an_agent"]["reason"]) == ("SKIPPED", "missing_field")
    assert "tool_calls" in rows["not_an_agent"]["reason_detail"]
    assert (rows["broken"]["status"], rows["broken"]["reason"]) == ("FAILED", "scorer_error")
    assert "not a JSON list" in rows["broken"]["reason_detail"]
    assert (rows["partial"]["status"], rows["partial"]["reason"]) == ("SKIPPED", "partial_trace")
    for row in rows.values():
        assert row["score"] is None or row["status"] == "COMPLETED"  # a skip or failure is never a score
        assert (row["model"], row["role"], row["is_final"], row["sample"]) == (
            "check:tool_call_accuracy",
            "verdict",
            True,
            0,
        )
        assert (row["cost_usd"], row["calls"], row["cache_hit"], row["prompt_tokens"]) == (0.0, 0, False, 0)
        assert row["provider_model"] is None and row["config_hash"] == config.config_hash
    summary = result.summary
    assert (summary["completed"], summary["skipped"], summary["failed"], summary["calls"]) == (4, 2, 1, 0)
    assert summary["mean_score"] == pytest.approx((1 + 0.5 + 1 + 0) / 4)
    assert summary["cost_usd"] == 0.0


def test_in_order_f1_and_a_pass_threshold(runtime):
    config = check(
        check={
            "scorer": "tool_call_accuracy",
            "expected_tools": ["search", "fetch"],
            "order": "in_order",
            "metric": "f1",
            "pass_threshold": 0.5,
        }
    )
    rows = by_trace(judge_day(config, DAY, traces(AGENT_TRACES[:4]), runtime).rows)
    # f1 = 2 * LCS / (expected + called): both 4/4; one 2/4 (LCS [search]); reversed 2/4; none_called 0/2
    assert {t: (r["score"], r["passed"]) for t, r in rows.items()} == {
        "both": (1.0, True),
        "one": (0.5, True),
        "reversed": (0.5, True),
        "none_called": (0.0, False),
    }


def test_error_rate_and_step_counts_keep_what_they_measured(runtime):
    rate = judge_day(
        check(check={"scorer": "tool_error_rate", "max_rate": 0.5}), DAY, traces(AGENT_TRACES[:4]), runtime
    )
    rows = by_trace(rate.rows)
    # one: 1 of 2 calls failed -> rate 0.5 <= 0.5 passes; none_called: a rate over no calls does not exist
    assert (rows["one"]["raw_score"], rows["one"]["passed"], rows["one"]["score"]) == (0.5, True, 1.0)
    assert (rows["both"]["raw_score"], rows["both"]["passed"]) == (0.0, True)
    assert (rows["none_called"]["status"], rows["none_called"]["reason"]) == ("SKIPPED", "not_applicable")
    steps = judge_day(
        check(check={"scorer": "step_count", "steps": "tool_calls", "max": 1}), DAY, traces(AGENT_TRACES[:4]), runtime
    )
    counted = {r["trace_id"]: (r["raw_score"], r["passed"]) for r in steps.rows.iter_rows(named=True)}
    assert counted == {"both": (2, False), "one": (2, False), "reversed": (2, False), "none_called": (0, True)}


def test_answer_checks_reuse_the_text_scorers_and_skip_a_trace_without_an_answer(runtime):
    day = traces(
        [
            {"trace_id": "json", "output": '{"city": "Paris"}', "latency_ms": 900.0},
            {"trace_id": "prose", "output": "Paris", "latency_ms": 1200.0},
            {"trace_id": "no_answer", "output": None, "latency_ms": 50.0},
        ]
    )
    rows = by_trace(judge_day(check(check={"scorer": "valid_json"}), DAY, day, runtime).rows)
    assert {t: r["passed"] for t, r in rows.items()} == {"json": True, "prose": False, "no_answer": None}
    assert (rows["no_answer"]["status"], rows["no_answer"]["reason"]) == ("SKIPPED", "missing_field")
    assert "final answer" in rows["no_answer"]["reason_detail"]
    regex = by_trace(judge_day(check(check={"scorer": "regex", "pattern": "Paris"}), DAY, day, runtime).rows)
    assert [regex[t]["passed"] for t in ("json", "prose")] == [True, True]
    # latency does not read the answer: the trace without one is still checked
    fast = by_trace(judge_day(check(check={"scorer": "latency", "max_ms": 1000}), DAY, day, runtime).rows)
    assert {t: (r["raw_score"], r["passed"]) for t, r in fast.items()} == {
        "json": (900.0, True),
        "prose": (1200.0, False),
        "no_answer": (50.0, True),
    }


def test_selection_is_the_judges(runtime):
    day = traces([{"trace_id": f"t{i}", "latency_ms": 1.0} for i in range(20)])
    sampled = check("fast", check={"scorer": "latency", "max_ms": 5}, trigger="sampled", sample_rate=0.5)
    rows = by_trace(judge_day(sampled, DAY, day, runtime).rows)
    picked = {t for t, r in rows.items() if r["status"] == "COMPLETED"}
    assert picked == {f"t{i}" for i in range(20) if unit_hash("fast", f"t{i}") < 0.5}
    assert {r["reason"] for t, r in rows.items() if t not in picked} == {"not_sampled"}
    manual = check("fast", check={"scorer": "latency", "max_ms": 5}, trigger="manual")
    rows = by_trace(judge_day(manual, DAY, day, runtime, {"t3"}).rows)
    assert [t for t, r in rows.items() if r["status"] == "COMPLETED"] == ["t3"]


def test_a_check_evaluator_file_loads_and_judge_fields_are_refused_naming_the_file(data_root):
    write_evaluator(
        data_root, "tools", description="tool use", check={"scorer": "tool_call_accuracy", "expected_tools": ["a"]}
    )
    [(name, config)] = load_evaluators(data_root / "evaluators").items()
    assert (name, config.mode, config.model_label, config.judge_models()) == (
        "tools",
        "binary",
        "check:tool_call_accuracy",
        [],
    )
    changed = check("tools", check={"scorer": "tool_call_accuracy", "expected_tools": ["b"]})
    assert changed.config_hash != config.config_hash  # the scorer's options can change a verdict
    same = check("tools", description="other words", check={"scorer": "tool_call_accuracy", "expected_tools": ["a"]})
    assert same.config_hash == config.config_hash  # the description cannot

    cases = {
        "with_model": (
            {"check": {"scorer": "valid_json"}, "model": "openai/gpt-4o-mini", "max_daily_cost_usd": 1},
            r"max_daily_cost_usd, model configure a judge",
        ),
        "unknown": (
            {"check": {"scorer": "bleu"}},
            r"a scorer without a value per trace 'bleu'; a check runs one of: .*tool_call_accuracy",
        ),
        "option": (
            {"check": {"scorer": "tool_call_accuracy", "expected_tool": ["a"]}},
            r"option 'expected_tools': Field required; option 'expected_tool': Extra inputs",
        ),
        "threshold": ({"check": {"scorer": "valid_json", "pass_threshold": 2}}, r"check.pass_threshold"),
    }
    for stem, (fields, message) in cases.items():
        folder = data_root / stem
        (folder / "evaluators").mkdir(parents=True)
        write_evaluator(folder, stem, **fields)
        with pytest.raises(EvaluatorConfigError, match=rf"{stem}\.yaml: .*{message}"):
            load_evaluators(folder / "evaluators")


def test_checks_on_traces_recorded_from_the_real_genai_instrumentation(data_root, local_judge, runtime):
    """The recorded openai-v2 (OTel GenAI) export, ingested and written as the traces asset does, then checked
    partition by partition as judge_scores does (the recording's day is today: not yet a Dagster partition)."""
    from eval_platform.ingest.traces import read_trace_day
    from eval_platform.judging.evaluator_day import judge_partition
    from eval_platform.storage.warehouse import write_partition
    from eval_platform_tests.ingest.test_otel_recorded import FIXTURES, export_files, recording_day, scenarios

    day = recording_day("genai")
    (data_root / "traces" / day).mkdir(parents=True)
    for name in export_files("genai"):
        (data_root / "traces" / day / name).write_bytes((FIXTURES / "genai" / name).read_bytes())
    write_partition(DataRoot.from_env(data_root), "traces", {"date": day}, read_trace_day(data_root, day).traces)
    evaluators = {
        "weather_tool": check(
            "weather_tool", check={"scorer": "tool_call_accuracy", "expected_tools": ["get_weather"]}
        ),
        "tool_errors": check("tool_errors", check={"scorer": "tool_error_rate"}),
        "agent_steps": check("agent_steps", check={"scorer": "step_count", "max": 1}),
    }
    before = judge_requests(local_judge)
    rows = {}
    for name, config in evaluators.items():
        judged = judge_partition(DataRoot.from_env(data_root), config, day, runtime, set())
        assert judged.every_trace_has_one_status and judged.result.rows.height == 12
        rows |= {
            (name, r["trace_id"]): (r["status"], r["reason"], r["raw_score"], r["passed"])
            for r in judged.result.rows.iter_rows(named=True)
        }
    assert judge_requests(local_judge) == before
    names = scenarios("genai")
    agent, tool_error, single = names["agent"][0], names["agent_tool_error"][0], names["single_turn"][0]
    # the agent run: chat -> get_weather -> chat: the expected tool called, no tool failed, 2 model calls (> max 1)
    assert rows[("weather_tool", agent)] == ("COMPLETED", None, 1.0, True)
    assert rows[("tool_errors", agent)] == ("COMPLETED", None, 0.0, True)
    assert rows[("agent_steps", agent)] == ("COMPLETED", None, 2.0, False)
    # the lookup_order tool span failed: 1 of 1
    assert rows[("tool_errors", tool_error)] == ("COMPLETED", None, 1.0, False)
    # a single chat completion, its content captured, called no tool: expected get_weather, called nothing -> 0 (not
    # skipped); a tool error rate over no calls does not exist; the step count counts its one call
    assert rows[("weather_tool", single)] == ("COMPLETED", None, 0.0, False)
    assert rows[("tool_errors", single)] == ("SKIPPED", "not_applicable", None, None)
    assert rows[("agent_steps", single)] == ("COMPLETED", None, 1.0, True)
    # the HTTP 500: no model call answered, nothing is known of its tools: skipped, never a 0
    assert rows[("weather_tool", names["http_500"][0])] == ("SKIPPED", "missing_field", None, None)


def test_a_saved_check_evaluator_loads_again_and_a_judge_with_no_check_is_a_judge():
    from eval_platform.judging.config import EvaluatorConfig

    check = EvaluatorConfig.model_validate(
        {"name": "tools", "check": {"scorer": "tool_call_accuracy", "expected_tools": ["search"]}}
    )
    assert EvaluatorConfig.model_validate(check.model_dump()).config_hash == check.config_hash
    judge = EvaluatorConfig.model_validate(
        {"name": "judge", "mode": "binary", "model": "openai/gpt-4o-mini", "prompt": "Is {{output}} ok?"}
    )
    assert EvaluatorConfig.model_validate(judge.model_dump()).check is None
