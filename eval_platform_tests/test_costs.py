"""Monthly judge spend against the monthly budget, from the spend ledger."""

from __future__ import annotations

import polars as pl
import pytest

from eval_platform.costs import ledger_spend, monthly_rollup
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.llm.budget import BudgetLedger
from eval_platform.schemas import JUDGE_COST_DAILY_SCHEMA, conform


def test_monthly_budget_use_comes_from_the_ledger(tmp_path):
    ledger = BudgetLedger(tmp_path / "budget.sqlite")
    for cost in (0.5, 0.25):  # reserved at the worst case, settled to what the call cost
        ledger.settle(ledger.reserve("e", 1.0, None, 10.0), cost)
    day = ledger_spend(ledger)["day"].to_list()
    assert len(day) == 1
    config = EvaluatorConfig(
        name="e",
        mode="binary",
        model="openai/x",
        prompt="{{output}}",
        max_monthly_cost_usd=10.0,
        input_cost_per_million=1,
        output_cost_per_million=1,
    )
    daily = conform(
        pl.DataFrame(
            {
                "day": [day[0], day[0]],
                "evaluator": ["e", "e"],
                "model": ["m", "m"],
                "project_id": ["p1", "p2"],
                "calls": [1, 1],
                "spend_usd": [0.5, 0.25],
            }
        ),
        JUDGE_COST_DAILY_SCHEMA,
    )
    monthly = monthly_rollup(daily, ledger, {"e": config})
    assert monthly["month"].to_list() == [day[0][:7]] * 2 and monthly["calls"].to_list() == [1, 1]
    assert monthly["budget_used_pct"].to_list() == pytest.approx([7.5, 7.5])  # the evaluator's month, 0.75 of 10
