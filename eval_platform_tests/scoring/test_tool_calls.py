"""Tool-call accuracy and tool error rate on a trace's `tool_calls`, checked on hand-computed cases."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from eval_platform.scoring import registry
from eval_platform.scoring.base import MissingField, NotApplicable


def trace(*calls: tuple[str, str]) -> dict:
    """A trace whose tool_calls are (name, status) pairs, as the traces table holds them (JSON text)."""
    rows = [
        {"span_id": f"s{i}", "name": name, "arguments": "{}", "result": None, "status": status, "error": None}
        for i, (name, status) in enumerate(calls)
    ]
    for row in rows:
        if row["status"] == "error":
            row["error"] = "timeout"
    return {"tool_calls": json.dumps(rows)}


def accuracy(case: dict, **options) -> float:
    scorer = registry.get("tool_call_accuracy")
    return scorer.score("", case, scorer.options(expected_tools=["search", "fetch", "answer"], **options))


# expected [search, fetch, answer]; called [search, answer, fetch, fetch]
CALLED = trace(("search", "ok"), ("answer", "ok"), ("fetch", "ok"), ("fetch", "error"))


def test_unordered_accuracy_compares_multisets():
    # multiset intersection {search, fetch, answer} = 3 of 3 expected, of 4 called
    assert accuracy(CALLED) == 1.0
    assert accuracy(CALLED, metric="precision") == pytest.approx(3 / 4)
    assert accuracy(CALLED, metric="f1") == pytest.approx(2 * 3 / (3 + 4))
    assert accuracy(CALLED, metric="exact") == 0.0  # fetch was called twice
    same_set = trace(("answer", "ok"), ("fetch", "ok"), ("search", "ok"))
    assert accuracy(same_set, metric="exact") == 1.0
    assert accuracy(same_set, order="in_order", metric="exact") == 0.0


def test_in_order_accuracy_is_the_longest_common_subsequence():
    # LCS of [search, fetch, answer] and [search, answer, fetch, fetch] is 2 ([search, fetch] or [search, answer])
    assert accuracy(CALLED, order="in_order") == pytest.approx(2 / 3)
    assert accuracy(CALLED, order="in_order", metric="precision") == pytest.approx(2 / 4)
    assert accuracy(CALLED, order="in_order", metric="f1") == pytest.approx(2 * 2 / (3 + 4))
    with_extra = trace(("search", "ok"), ("lookup", "ok"), ("fetch", "ok"), ("answer", "ok"))
    assert accuracy(with_extra, order="in_order") == 1.0  # other calls between are allowed
    assert accuracy(with_extra, order="in_order", metric="exact") == 0.0


def test_no_calls_scores_recall_zero_but_has_no_precision():
    nothing = trace()
    assert accuracy(nothing) == 0.0
    assert accuracy(nothing, metric="f1") == 0.0
    with pytest.raises(NotApplicable, match="no tool was called"):
        accuracy(nothing, metric="precision")


def test_a_trace_without_tool_calls_lacks_the_field_it_is_not_a_zero():
    with pytest.raises(MissingField, match="tool_calls"):
        accuracy({"tool_calls": None, "output": "hi"})
    with pytest.raises(ValueError, match="not a JSON list"):
        accuracy({"tool_calls": '{"name": "search"}'})


def test_options_are_validated():
    options = registry.get("tool_call_accuracy").options
    with pytest.raises(ValidationError, match="expected_tools"):
        options(expected_tools=[])
    with pytest.raises(ValidationError, match="order"):
        options(expected_tools=["a"], order="sorted")


def test_tool_error_rate_passes_at_or_under_max_rate_and_describes_the_failures():
    scorer = registry.get("tool_error_rate")
    strict, lenient = scorer.options(), scorer.options(max_rate=0.25)
    assert scorer.score("", CALLED, strict) == 0.0  # 1 of 4 failed, max 0
    assert scorer.score("", CALLED, lenient) == 1.0  # 0.25 <= 0.25
    rate, finding = scorer.describe("", CALLED, strict)
    assert rate == 0.25
    assert "1 of 4 tool calls failed" in finding and "fetch: timeout" in finding
    with pytest.raises(NotApplicable, match="0/0"):
        scorer.score("", trace(), strict)
