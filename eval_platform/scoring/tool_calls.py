"""An agent's tool calls against the tools it was expected to call, and how many of its tool calls failed.

Both read the trace's `tool_calls` column (TRACE_SCHEMA): the trajectory as a JSON list, in start order, of
`{span_id, name, arguments, result, status: "ok" | "error", error}`; an entry of `kind: "handoff"` (an agent
handing the conversation to another, ingest/otel/frameworks.py) is not a tool call and is not counted. A trace
without that value (not an agent
trace, or an export that did not record tools) lacks the field: it is never scored as "called nothing".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from eval_platform.scoring.base import NotApplicable, Scorer, ScorerOptions

TOOL_CALLS = "tool_calls"


def json_list(case: Mapping[str, Any], field: str) -> list[Any]:
    """The case's `field` read as the JSON list it holds; a ValueError naming the field when it is not one."""
    value = case[field]
    parsed = json.loads(value) if isinstance(value, str) else value
    if not isinstance(parsed, list):
        raise ValueError(f"field '{field}' is not a JSON list: {str(value)[:80]}")
    return parsed


HANDOFF = "handoff"  # the `kind` of a trajectory entry that is a handoff between agents, not a tool call


def called_tools(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trace's tool calls, in order (handoffs left out); a ValueError when one is not an object with a name."""
    calls = json_list(case, TOOL_CALLS)
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f"tool_calls[{i}] has no tool name: {json.dumps(call)[:80]}")
    return [call for call in calls if call.get("kind") != HANDOFF]


class ToolCallAccuracyOptions(ScorerOptions):
    expected_tools: list[str] = Field(min_length=1, description="The tool names the agent should call.")
    order: Literal["any", "in_order"] = Field(
        "any",
        description="any: compare as multisets (a tool expected twice must be called twice); in_order: the longest "
        "common subsequence of the expected and the called names (order matters, other calls may come between).",
    )
    metric: Literal["recall", "precision", "f1", "exact"] = Field(
        "recall",
        description="recall: matched / expected; precision: matched / called; f1: 2 matched / (expected + called); "
        "exact: 1 when the calls are exactly the expected ones (as a multiset, or as a sequence for in_order).",
    )


def _common_subsequence(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of `a` and `b` (dynamic programming, one row at a time)."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _accuracy(case: Mapping[str, Any], options: ToolCallAccuracyOptions) -> tuple[float, str]:
    expected = options.expected_tools
    called = [call["name"] for call in called_tools(case)]
    if options.order == "in_order":
        matched = _common_subsequence(expected, called)
        exact = called == expected
    else:
        matched = sum((Counter(expected) & Counter(called)).values())
        exact = Counter(called) == Counter(expected)
    if options.metric == "precision" and not called:
        raise NotApplicable("no tool was called: precision (matched / called) is 0/0")
    value = {
        "recall": lambda: matched / len(expected),
        "precision": lambda: matched / len(called),
        "f1": lambda: 2 * matched / (len(expected) + len(called)),
        "exact": lambda: float(exact),
    }[options.metric]()
    how = "in order" if options.order == "in_order" else "in any order"
    finding = (
        f"expected {expected}, called {called}: {matched} matched {how}; {options.metric} {value:.4g} "
        f"(expected {len(expected)}, called {len(called)})"
    )
    return value, finding


class ToolErrorRateOptions(ScorerOptions):
    max_rate: float = Field(0.0, ge=0, le=1, description="Passes when failed calls / calls is at most this.")


def _error_rate(case: Mapping[str, Any], options: ToolErrorRateOptions) -> tuple[float, str]:
    calls = called_tools(case)
    if not calls:
        raise NotApplicable("no tool was called: the tool error rate is 0/0")
    failed = [call for call in calls if call.get("status") == "error"]
    rate = len(failed) / len(calls)
    names = "".join(f"; {call['name']}: {call.get('error') or 'error'}" for call in failed)
    finding = f"{len(failed)} of {len(calls)} tool calls failed (max_rate {options.max_rate}){names}"
    return rate, finding


SCORERS = [
    Scorer(
        "tool_call_accuracy",
        ToolCallAccuracyOptions,
        lambda _output, case, options: _accuracy(case, options)[0],
        lambda _options: (TOOL_CALLS,),
        reads_output=False,
        describe=lambda _output, case, options: _accuracy(case, options),
    ),
    Scorer(
        "tool_error_rate",
        ToolErrorRateOptions,
        lambda _output, case, options: float(_error_rate(case, options)[0] <= options.max_rate),
        lambda _options: (TOOL_CALLS,),
        reads_output=False,
        describe=lambda _output, case, options: _error_rate(case, options),
    ),
]
