"""The threshold alerts of every evaluator's `alerts:` rules, read from the warehouse and the budget ledger."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import polars as pl

from eval_platform.alerting.rules import BUDGET_METRICS, budget_alerts, score_alerts, threshold_alerts
from eval_platform.costs import ledger_spend
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.llm.budget import BudgetLedger
from eval_platform.schemas import COMPLETED, FAILED, JUDGE_SCORE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_files, scan_parquet

_COLUMNS = ["evaluator", "date", "is_final", "status", "score"]


def read_judged_rows(root: DataRoot, evaluators: list[str]) -> pl.DataFrame:
    """evaluator, date, status, score of the final COMPLETED and FAILED `judge_scores` rows of these evaluators,
    read from their own partitions only."""
    schema = {name: JUDGE_SCORE_SCHEMA[name] for name in _COLUMNS}
    files = partition_files(root, "judge_scores", "evaluator")
    wanted = sorted(set(evaluators) & set(files))
    if not wanted:
        return conform(pl.DataFrame(), schema).drop("is_final")
    judged = pl.col("is_final") & pl.col("status").is_in([COMPLETED, FAILED])
    frame = scan_parquet(
        root,
        [files[name] for name in wanted],
        hive_partitioning=False,
        schema=schema,
        missing_columns="insert",
        extra_columns="ignore",
    )
    return frame.filter(judged).drop("is_final").collect()


def threshold_alerts_for(
    root: DataRoot, evaluators: Mapping[str, EvaluatorConfig], ledger: BudgetLedger, detected_at: datetime | None = None
) -> pl.DataFrame:
    """`alerts` rows (kind `threshold`) of every rule of every evaluator, on every day the rule is broken."""
    rules = {name: list(cfg.alerts) for name, cfg in evaluators.items() if cfg.alerts}
    rows = score_alerts(read_judged_rows(root, sorted(rules)), rules)
    if any(rule.parsed.metric in BUDGET_METRICS for evaluator_rules in rules.values() for rule in evaluator_rules):
        budgets = {name: (cfg.max_daily_cost_usd, cfg.max_monthly_cost_usd) for name, cfg in evaluators.items()}
        rows += budget_alerts(ledger_spend(ledger), rules, budgets)
    return threshold_alerts(rows, detected_at)
