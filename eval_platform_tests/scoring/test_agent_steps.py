"""Step and turn counts against bounds, on hand-counted traces."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from eval_platform.scoring import registry
from eval_platform.scoring.base import MissingField

SPANS = json.dumps(
    [
        {"span_id": "a", "operation": "invoke_agent"},
        {"span_id": "b", "operation": "chat"},
        {"span_id": "c", "operation": "execute_tool"},
        {"span_id": "d", "operation": "chat"},
        {"span_id": "e", "operation": "text_completion"},
        {"span_id": "f", "operation": None},  # an HTTP span
    ]
)
TOOL_CALLS = json.dumps([{"name": "search", "status": "ok"}, {"name": "fetch", "status": "ok"}])
CONVERSATION = json.dumps(
    [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "name": "w", "arguments": "{}"}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "1"},
        {"role": "assistant", "content": "sunny"},
    ]
)
TRACE = {"spans": SPANS, "tool_calls": TOOL_CALLS, "conversation": CONVERSATION}


def check(name: str, case: dict, **options) -> tuple[float, float, str]:
    scorer = registry.get(name)
    parsed = scorer.options(**options)
    return (scorer.score("", case, parsed), *scorer.describe("", case, parsed))


def test_model_calls_are_the_inference_spans():
    value, count, finding = check("step_count", TRACE, max=3)
    assert (value, count) == (1.0, 3)  # chat, chat, text_completion
    assert finding == "3 model calls (max 3)"
    assert check("step_count", TRACE, max=2)[:2] == (0.0, 3)
    assert check("step_count", TRACE, min=4)[:2] == (0.0, 3)
    assert check("step_count", TRACE)[:2] == (1.0, 3)  # no bounds: the count is measured, always within


def test_tool_call_steps_and_user_turns():
    assert check("step_count", TRACE, steps="tool_calls", min=1, max=2)[:2] == (1.0, 2)
    assert check("turn_count", TRACE, max=1)[:2] == (0.0, 2)  # two user messages
    assert check("turn_count", TRACE, min=2, max=2)[:2] == (1.0, 2)


def test_a_trace_without_the_counted_field_lacks_it():
    with pytest.raises(MissingField, match="spans"):
        check("step_count", {"spans": None}, max=3)
    with pytest.raises(MissingField, match="conversation"):
        check("turn_count", {"spans": SPANS}, max=3)
    with pytest.raises(ValidationError, match="greater than max"):
        registry.get("turn_count").options(min=3, max=2)
