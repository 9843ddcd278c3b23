"""Agent frameworks as their users run them (eval_platform_tests/fixtures/otel/<framework>: recorded by running the
framework and its instrumentation against the local judge, `sample_data/agent_app/frameworks.py`): what a judge
and the checks are given per turn."""

from __future__ import annotations

import json

import pytest

from eval_platform_tests.ingest.test_otel_recorded import by_scenario, ingest_recording, scenarios

FRAMEWORKS = ["openai_agents"]


def trajectory(row: dict) -> list[dict]:
    return json.loads(row["tool_calls"])


@pytest.mark.parametrize("folder", FRAMEWORKS)
def test_every_framework_trace_is_one_whole_trace(tmp_path, folder):
    day = ingest_recording(tmp_path, folder)
    assert day.quarantine.height == 0, day.quarantine.select("reason", "detail").to_dicts()
    expected = sorted(trace_id for ids in scenarios(folder).values() for trace_id in ids)
    assert sorted(day.traces["trace_id"]) == expected


@pytest.mark.parametrize("folder", FRAMEWORKS)
def test_a_later_turn_never_inherits_the_earlier_turns_tool_calls(tmp_path, folder):
    """The third turn ("Thanks, that's all.") calls no tool: its trajectory is empty, though its conversation
    holds the two earlier turns' weather calls."""
    first, second, third = by_scenario(ingest_recording(tmp_path, folder), folder)["multi_turn"]
    assert [call["name"] for call in trajectory(first)] == ["get_weather"]
    assert [json.loads(call["arguments"]) for call in trajectory(second)] == [{"city": "Rome"}]
    assert third["input"] == "Thanks, that's all."
    assert trajectory(third) == []
    assert first["session_id"] == second["session_id"] == third["session_id"] == f"session-{folder}-1"
