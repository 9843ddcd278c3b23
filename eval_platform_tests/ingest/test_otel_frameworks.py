"""Agent frameworks as their users run them (eval_platform_tests/fixtures/otel/<framework>: recorded by running the
framework and its instrumentation against the local judge, `sample_data/agent_app/frameworks.py`): what a judge
and the checks are given per turn, whatever the framework."""

from __future__ import annotations

import json

import pytest

from eval_platform_tests.ingest.test_otel_recorded import by_scenario, ingest_recording, scenarios

FRAMEWORKS = ["openai_agents", "langgraph", "pydantic_ai", "smolagents"]
ROLES = {"system", "user", "assistant", "tool"}
PARIS = '{"city": "Paris", "weather": "18 C and sunny"}'


def trajectory(row: dict) -> list[dict]:
    return json.loads(row["tool_calls"])


def arguments(call: dict) -> dict:
    return json.loads(call["arguments"])


@pytest.fixture(scope="module", params=FRAMEWORKS)
def recorded(request, tmp_path_factory) -> tuple[str, dict[str, list[dict]]]:
    folder = request.param
    day = ingest_recording(tmp_path_factory.mktemp(folder), folder)
    assert day.quarantine.height == 0, day.quarantine.select("reason", "detail").to_dicts()
    expected = sorted(trace_id for ids in scenarios(folder).values() for trace_id in ids)
    assert sorted(day.traces["trace_id"]) == expected  # every run one whole trace
    return folder, by_scenario(day, folder)


def test_the_input_is_the_users_question_and_roles_are_normalized(recorded):
    """Not smolagents' `New task:` wrapper nor LangGraph's raw state; roles user/assistant/tool/system."""
    _, traces = recorded
    [single] = traces["single_turn"]
    assert single["input"] == "What's the weather in Paris today?"
    assert [t["input"] for t in traces["multi_turn"]] == [
        "What's the weather in Zürich today?",
        "And what about Rome?",
        "Thanks, that's all.",
    ]
    for rows in traces.values():
        for row in rows:
            assert {m["role"] for m in json.loads(row["conversation"] or "[]")} <= ROLES
    assert single["output"].startswith("Based on what I looked up")


def test_the_trajectory_is_this_runs_tool_calls_with_json_arguments_and_the_tools_own_result(recorded):
    """LangGraph's bare argument and serialized ToolMessage, smolagents' {args, kwargs, sanitize_inputs_outputs}
    call and its final_answer tool: read as the call's JSON arguments, the tool's own text, and no tool call."""
    _, traces = recorded
    [call] = trajectory(traces["single_turn"][0])
    assert (call["name"], arguments(call), call["result"], call["status"]) == (
        "get_weather",
        {"city": "Paris"},
        PARIS,
        "ok",
    )
    first, second, third = traces["multi_turn"]
    assert [arguments(c) for c in trajectory(first)] == [{"city": "Zürich"}]
    assert [arguments(c) for c in trajectory(second)] == [{"city": "Rome"}]
    assert trajectory(third) == []  # it called no tool: the earlier turns' calls are not its own
    assert first["session_id"] == second["session_id"] == third["session_id"]


def test_parallel_calls_each_keep_their_own_result(recorded):
    folder, traces = recorded
    [row] = traces["parallel"]
    calls = trajectory(row)
    assert sorted(arguments(c)["city"] for c in calls) == ["Lisbon", "Oslo"]
    assert all(json.loads(c["result"])["city"] == arguments(c)["city"] for c in calls)
    if folder != "smolagents":  # smolagents answers both calls in one Observation message, without call ids
        results = [m for m in json.loads(row["conversation"]) if m["role"] == "tool"]
        asked = [c for m in json.loads(row["conversation"]) for c in m.get("tool_calls") or []]
        assert sorted(m["tool_call_id"] for m in results) == sorted(c["id"] for c in asked)
        assert len(results) == 2


def test_a_tool_that_raises_is_a_failed_call(recorded):
    _, traces = recorded
    [row] = traces["tool_error"]
    calls = trajectory(row)
    assert [c["name"] for c in calls] == ["lookup_order"]
    assert calls[0]["status"] == "error" and arguments(calls[0]) == {"order_id": "A-1001"}


def test_smolagents_final_answer_is_the_answer_and_its_prompt_is_marked(recorded):
    folder, traces = recorded
    if folder != "smolagents":
        pytest.skip("smolagents only")
    [single] = traces["single_turn"]
    answer = json.loads(single["spans"])
    final = [s for s in answer if s["operation"] == "final_answer"]
    assert len(final) == 1 and single["output"] == final[0]["tool_result"]
    assert "final_answer" not in [c["name"] for c in trajectory(single)]
    [system] = [m for m in json.loads(single["conversation"]) if m["role"] == "system"]
    assert system.get("framework_prompt") is True


def test_an_openai_agents_handoff_is_a_handoff_not_a_tool_call(recorded):
    folder, traces = recorded
    if folder != "openai_agents":
        pytest.skip("OpenAI Agents SDK only")
    [row] = traces["handoff"]
    [entry] = trajectory(row)
    assert (entry["kind"], entry["name"], entry["result"]) == ("handoff", "transfer_to_math_agent", "math_agent")
    assert [s["operation"] for s in json.loads(row["spans"]) if s["name"].startswith("handoff")] == ["handoff"]


def test_a_run_whose_model_failed_keeps_the_users_question(recorded):
    """HTTP 500 on the only model call: the run failed with no answer; its input is still the question (the
    Agents SDK's failed generation span holds it, pydantic-ai's run span its `all_messages`)."""
    folder, traces = recorded
    if folder == "smolagents":
        pytest.skip("not recorded: smolagents' instrumentation never ends the run's span when the run raises")
    [row] = traces["model_error"]
    assert row["error"] is True and row["output"] is None and row["model"] == "app/error"
    assert row["input"] == "What's the weather in Paris today?"
