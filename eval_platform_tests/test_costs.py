"""Judge spend rollups against the budgets, from the spend ledger: monthly use, and the spend of killed runs and
of dead hosts counted as the ledger counts it."""

from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from datetime import UTC, datetime

import polars as pl
import pytest

from eval_platform.costs import cost_rollup, ledger_spend, monthly_rollup
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.llm.budget import BudgetLedger
from eval_platform.schemas import COMPLETED, JUDGE_COST_DAILY_SCHEMA, JUDGE_SCORE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition


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


def test_killed_runs_and_dead_hosts_are_in_the_daily_rollup_at_once(data_root):
    """An evaluator whose only run of the day was killed has a row, and a call in flight on a host that died
    counts at its worst case, as the budgets count them: the rollup never shows less than the provider billed."""
    path = data_root / "state" / "budget.sqlite"
    ledger = BudgetLedger(path)
    today = datetime.now(UTC)
    judged = conform(
        pl.DataFrame({"evaluator": ["alive"], "model": ["openai/x"], "status": [COMPLETED], "calls": [1]}).with_columns(
            pl.lit(today).alias("judged_at"), pl.lit(0.1).alias("cost_usd")
        ),
        JUDGE_SCORE_SCHEMA,
    )
    write_partition(
        DataRoot.from_env(data_root), "judge_scores", {"evaluator": "alive", "date": today.strftime("%Y-%m-%d")}, judged
    )
    ledger.settle(ledger.reserve("alive", 0.5, 10.0, None), 0.1)
    killed = ledger.reserve("killed", 0.4, 10.0, None)  # its run killed with the call in flight, no partition
    remote = ledger.reserve("remote", 0.3, 10.0, None)  # a call in flight on another host, which then died
    gone = subprocess.Popen(["true"])
    gone.wait()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE judge_spend SET pid = ? WHERE id = ?", (gone.pid, killed.id))
        conn.execute("UPDATE judge_spend SET host = 'lost-host' WHERE id = ?", (remote.id,))

    daily = cost_rollup(DataRoot.from_env(data_root), {}, ledger)
    rows = {row["evaluator"]: row for row in daily.iter_rows(named=True)}
    assert set(rows) == {"alive", "killed", "remote"}
    assert rows["alive"]["rows"] == 1 and rows["alive"]["ledger_spend_usd"] == pytest.approx(0.1)
    for evaluator, worst in (("killed", 0.4), ("remote", 0.3)):
        assert rows[evaluator]["rows"] == 0 and rows[evaluator]["calls"] == 0
        assert rows[evaluator]["ledger_spend_usd"] == pytest.approx(worst)
        assert rows[evaluator]["day"] == today.strftime("%Y-%m-%d")
    monthly = monthly_rollup(daily, ledger, {})
    assert monthly["ledger_spend_usd"].sum() == pytest.approx(0.8)
