"""What a judge is given for agent frameworks' real traces (eval_platform_tests/fixtures/otel/<framework>, recorded
against the local judge), judged over real HTTP: `echo/<block>` judges answer with the fenced block they received,
so `raw_response` is exactly what the judge was sent."""

from __future__ import annotations

import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.fencing import unfence_all
from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.prompts import build_messages
from eval_platform.judging.runner import judge_day
from eval_platform.judging.targets import span_values, spans_of
from eval_platform_tests.conftest import REPO_DATA, judge_requests
from eval_platform_tests.ingest.test_otel_recorded import ingest_recording, recording_day, scenarios
from eval_platform_tests.judging.test_targets import DAY, evaluator, frame, trace


def recorded(tmp_path, folder: str, scenario: str) -> tuple[str, pl.DataFrame]:
    """The recording's traces of one scenario, as the judge reads them (with their day)."""
    day = recording_day(folder)
    traces = ingest_recording(tmp_path / folder, folder).traces
    ids = scenarios(folder)[scenario]
    chosen = traces.filter(pl.col("trace_id").is_in(ids)).with_columns(pl.lit(day).alias("date"))
    return day, chosen


def test_text_reaches_the_judge_unescaped_in_any_script(local_judge, runtime, tmp_path):
    """The model's arguments arrive as JSON with `\\u00fc` escapes; the judge reads Zürich."""
    day, traces = recorded(tmp_path, "openai_agents", "multi_turn")
    first = traces.filter(pl.col("input").str.contains("Zürich"))
    prompt = "{{input}}\n{{tool_calls}}\n{{output}}"
    rows = judge_day(evaluator(local_judge, "echo/tool_calls", prompt=prompt), day, first, runtime).rows
    [shown] = rows["raw_response"].to_list()
    assert shown.startswith('1. get_weather({"city": "Zürich"}) -> {"city": "Zürich"')
    assert "\\u00fc" not in shown


def test_a_span_prompt_names_the_tool_it_judges(local_judge, runtime, tmp_path):
    day, traces = recorded(tmp_path, "openai_agents", "parallel")
    prompt = "{{tool_name}} {{span_name}} {{span_operation}} {{input}} {{output}}"
    config = evaluator(local_judge, "echo/tool_name", prompt=prompt, target="span", span={"operation": "execute_tool"})
    assert judge_day(config, day, traces, runtime).rows["raw_response"].to_list() == ["get_weather", "get_weather"]
    # the shipped tool template says which tool was called
    shipped = load_evaluator(REPO_DATA / "evaluators" / "tool_call_quality.yaml")
    row = traces.row(0, named=True)
    tool = next(s for s in spans_of(row) if s["operation"] == "execute_tool")
    prompt_text = build_messages(shipped, span_values(row, tool))[1]["content"]
    assert "The tool called:" in prompt_text and unfence_all(prompt_text)["tool_name"] == ["get_weather"]
    with pytest.raises(ValueError, match="only target 'span' has one"):
        evaluator(local_judge, prompt="{{tool_name}} {{output}}")


def test_hidden_content_is_never_sent_to_a_judge(local_judge, runtime, tmp_path):
    """OPENINFERENCE_HIDE_INPUTS / _OUTPUTS: the instrumentation writes `__REDACTED__`, which is no content."""
    day, traces = recorded(tmp_path, "openai_agents_hidden", "single_turn")
    before = judge_requests(local_judge)
    span_config = evaluator(local_judge, target="span", span={"operation": "execute_tool"})
    spans = judge_day(span_config, day, traces, runtime).rows
    assert spans.select("status", "reason").rows() == [("SKIPPED", "empty_text")]
    trace_rows = judge_day(evaluator(local_judge), day, traces, runtime).rows
    assert trace_rows.select("status", "reason").rows() == [("SKIPPED", "empty_text")]
    assert judge_requests(local_judge) == before
    row = traces.row(0, named=True)
    assert "__REDACTED__" not in (row["tool_calls"] or "") and row["input"] is None


def test_a_prompt_showing_an_empty_field_is_skipped_naming_it_unless_opted_in(local_judge, runtime, tmp_path):
    """pydantic-ai's run whose tool raised has no final answer; a trace whose input was not recorded has none."""
    day, failed = recorded(tmp_path, "pydantic_ai", "tool_error")
    before = judge_requests(local_judge)
    config = evaluator(local_judge, judge_errors=True)  # failed runs judged, but not on an empty answer
    rows = judge_day(config, day, failed, runtime).rows
    assert rows.select("status", "reason").rows() == [("SKIPPED", "no_final_answer")]
    assert "{{output}}" in rows["reason_detail"][0]
    no_input = frame(trace("no_input", input=None, output="It is sunny in Paris."))
    rows = judge_day(evaluator(local_judge), DAY, no_input, runtime).rows
    assert rows.select("status", "reason").rows() == [("SKIPPED", "missing_field:input")]
    assert judge_requests(local_judge) == before
    guarded = evaluator(local_judge, prompt="{{#if input}}Q: {{input}}{{/if}} A: {{output}}")
    assert judge_day(guarded, DAY, no_input, runtime).rows["status"].to_list() == ["COMPLETED"]
    opted_in = evaluator(local_judge, judge_missing_fields=True)
    assert judge_day(opted_in, DAY, no_input, runtime).rows["status"].to_list() == ["COMPLETED"]


def check(**options) -> EvaluatorConfig:
    return EvaluatorConfig.model_validate({"name": "agent_check", "check": options})


@pytest.mark.parametrize("folder", ["openai_agents", "langgraph", "pydantic_ai", "smolagents"])
def test_the_checks_are_right_on_every_framework(runtime, tmp_path, folder):
    """tool_call_accuracy, tool_error_rate and step counts read each run's own calls: the third turn (no tool)
    scores 0 and has no error rate; a final-answer tool and a handoff are not tool calls."""
    day = recording_day(folder)
    traces = ingest_recording(tmp_path, folder).traces.with_columns(pl.lit(day).alias("date"))
    turn = {t: f"{name}:{i}" for name, ids in scenarios(folder).items() for i, t in enumerate(ids)}

    def judged(**options) -> dict[str, tuple]:
        rows = judge_day(check(**options), day, traces, runtime).rows.iter_rows(named=True)
        return {turn[r["trace_id"]]: (r["status"], r["reason"], r["raw_score"]) for r in rows}

    accuracy = judged(scorer="tool_call_accuracy", expected_tools=["get_weather"])
    assert accuracy["single_turn:0"] == ("COMPLETED", None, 1.0)
    assert accuracy["multi_turn:2"] == ("COMPLETED", None, 0.0)  # not 1.0 from the earlier turns' calls
    errors = judged(scorer="tool_error_rate", max_rate=0)
    assert errors["tool_error:0"][2] == 1.0
    assert errors["multi_turn:2"][:2] == ("SKIPPED", "not_applicable")
    steps = judged(scorer="step_count", steps="tool_calls")
    assert steps["single_turn:0"][2] == 1 and steps["parallel:0"][2] == 2  # smolagents' final_answer not counted
    if folder == "openai_agents":
        assert steps["handoff:0"][2] == 0  # a handoff is no tool call
        assert accuracy["handoff:0"] == ("COMPLETED", None, 0.0)


def test_a_handoff_is_never_judged_by_a_tool_span_selector(local_judge, runtime, tmp_path):
    day, traces = recorded(tmp_path, "openai_agents", "handoff")
    before = judge_requests(local_judge)
    tools = evaluator(local_judge, target="span", span={"operation": "execute_tool"})
    assert judge_day(tools, day, traces, runtime).rows.select("status", "reason").rows() == [
        ("SKIPPED", "span_not_found")
    ]
    assert judge_requests(local_judge) == before
    asked = evaluator(local_judge, target="span", span={"operation": "handoff"})  # unless asked
    assert judge_day(asked, day, traces, runtime).rows["status"].to_list() == ["COMPLETED"]


def test_the_frameworks_own_system_prompt_stays_out_of_the_conversation_unless_asked(local_judge, runtime, tmp_path):
    day, traces = recorded(tmp_path, "smolagents", "single_turn")
    prompt = "{{conversation}} {{output}}"
    shown = judge_day(evaluator(local_judge, "echo/conversation", prompt=prompt), day, traces, runtime).rows
    lines = shown["raw_response"][0].splitlines()
    assert lines[0] == "user: What's the weather in Paris today?"
    assert not any("You are an expert assistant" in line for line in lines)
    assert 'assistant calls tool get_weather({"city": "Paris"})' in lines[1]
    asked = evaluator(local_judge, "echo/conversation", prompt=prompt, framework_prompt=True)
    with_prompt = judge_day(asked, day, traces, runtime).rows["raw_response"][0]
    assert with_prompt.startswith("system: You are an expert assistant who can solve any task using tool calls.")
