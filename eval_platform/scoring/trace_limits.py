"""The traced application's own latency and spend against a limit: 1 when within it, else 0.

They read the trace's `latency_ms` (the whole trace: root start to last end) and `cost_usd` (the app's spend,
never judge spend); a trace without the value lacks the field and is never scored as fast or free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from eval_platform.scoring.base import Scorer, ScorerOptions


class LatencyOptions(ScorerOptions):
    max_ms: float = Field(gt=0, description="Passes when the trace's latency_ms is at most this.")


class CostOptions(ScorerOptions):
    max_usd: float = Field(ge=0, description="Passes when the trace's cost_usd is at most this.")


def _latency(case: Mapping[str, Any], options: LatencyOptions) -> tuple[float, str]:
    latency = float(case["latency_ms"])
    return latency, f"latency {latency:g} ms (max {options.max_ms:g} ms)"


def _cost(case: Mapping[str, Any], options: CostOptions) -> tuple[float, str]:
    cost = float(case["cost_usd"])
    return cost, f"app cost ${cost:g} (max ${options.max_usd:g})"


SCORERS = [
    Scorer(
        "latency",
        LatencyOptions,
        lambda _output, case, options: float(_latency(case, options)[0] <= options.max_ms),
        lambda _options: ("latency_ms",),
        reads_output=False,
        describe=lambda _output, case, options: _latency(case, options),
    ),
    Scorer(
        "cost",
        CostOptions,
        lambda _output, case, options: float(_cost(case, options)[0] <= options.max_usd),
        lambda _options: ("cost_usd",),
        reads_output=False,
        describe=lambda _output, case, options: _cost(case, options),
    ),
]
