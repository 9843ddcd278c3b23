"""Latency and app-cost limits: within the limit (inclusive) passes; an absent value is never fast or free."""

from __future__ import annotations

import pytest

from eval_platform.scoring import registry
from eval_platform.scoring.base import MissingField


def test_latency_and_cost_limits_are_inclusive_and_keep_the_measured_value():
    latency, cost = registry.get("latency"), registry.get("cost")
    case = {"latency_ms": 1500.0, "cost_usd": 0.002}
    assert latency.score("", case, latency.options(max_ms=1500)) == 1.0
    assert latency.score("", case, latency.options(max_ms=1499)) == 0.0
    assert latency.describe("", case, latency.options(max_ms=1000)) == (1500.0, "latency 1500 ms (max 1000 ms)")
    assert cost.score("", case, cost.options(max_usd=0.001)) == 0.0
    assert cost.describe("", case, cost.options(max_usd=0.01))[0] == 0.002


def test_a_trace_without_latency_or_cost_lacks_the_field():
    with pytest.raises(MissingField, match="latency_ms"):
        registry.get("latency").score("", {"latency_ms": None}, registry.get("latency").options(max_ms=1))
    with pytest.raises(MissingField, match="cost_usd"):
        registry.get("cost").score("", {}, registry.get("cost").options(max_usd=1))
