"""The DuckDB catalog: one view per warehouse table, named as DESIGN.md lists them."""


from pathlib import Path

import polars as pl

from eval_platform.agreement import AGREEMENT_SCHEMA, GROUND_TRUTH_SCHEMA
from eval_platform.benchmarks.leaderboard import LEADERBOARD_SCHEMA
from eval_platform.benchmarks.runner import BENCHMARK_CASE_SCHEMA, BENCHMARK_RESULT_SCHEMA
from eval_platform.experiments.analysis import EXPERIMENT_RESULT_SCHEMA
from eval_platform.experiments.regressions import ALERT_SCHEMA
from eval_platform.ingest.annotations import HUMAN_ANNOTATION_SCHEMA
from eval_platform.ingest.judgments import IMPORTED_JUDGMENT_SCHEMA
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, QUARANTINE_SCHEMA, TEST_CASE_SCHEMA, TRACE_SCHEMA, UTC_TS
from eval_platform.storage.warehouse import refresh_catalog

# What judging cost, summed over rows of judge_scores; the daily and monthly rollups share these.
JUDGE_COST_MEASURES: dict[str, pl.DataType] = {
    "rows": pl.Int64(),
    "calls": pl.Int64(),
    "cache_hits": pl.Int64(),
    "completed": pl.Int64(),
    "failed": pl.Int64(),
    "skipped": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "spend_usd": pl.Float64(),
    "avoided_by_cache_usd": pl.Float64(),
}
_JUDGE_COST_KEYS: dict[str, pl.DataType] = {"evaluator": pl.String(), "model": pl.String(), "project_id": pl.String()}

JUDGE_COST_DAILY_SCHEMA: dict[str, pl.DataType] = {
    "day": pl.String(),
    **_JUDGE_COST_KEYS,
    **JUDGE_COST_MEASURES,
    "budget_daily_usd": pl.Float64(),
    "ledger_spend_usd": pl.Float64(),
    "budget_used_pct": pl.Float64(),
    "computed_at": UTC_TS,
}

JUDGE_COST_MONTHLY_SCHEMA: dict[str, pl.DataType] = {
    "month": pl.String(),  # YYYY-MM (UTC)
    **_JUDGE_COST_KEYS,
    "days": pl.Int64(),
    **JUDGE_COST_MEASURES,
    "budget_monthly_usd": pl.Float64(),
    "ledger_spend_usd": pl.Float64(),
    "budget_used_pct": pl.Float64(),
    "computed_at": UTC_TS,
}

APP_COST_DAILY_SCHEMA: dict[str, pl.DataType] = {
    "day": pl.String(),
    "project_id": pl.String(),
    "model": pl.String(),
    "traces": pl.Int64(),
    "traces_with_cost": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "app_cost_usd": pl.Float64(),  # the traced application's own spend; never judge spend
    "computed_at": UTC_TS,
}

TABLES: dict[str, dict[str, pl.DataType]] = {
    "traces": TRACE_SCHEMA,
    "quarantine": QUARANTINE_SCHEMA,
    "judge_scores": JUDGE_SCORE_SCHEMA,
    "test_cases": TEST_CASE_SCHEMA,
    "judge_cost_daily": JUDGE_COST_DAILY_SCHEMA,
    "judge_cost_monthly": JUDGE_COST_MONTHLY_SCHEMA,
    "app_cost_daily": APP_COST_DAILY_SCHEMA,
    "human_annotations": HUMAN_ANNOTATION_SCHEMA,
    "agreement": AGREEMENT_SCHEMA,
    "ground_truth": GROUND_TRUTH_SCHEMA,
    "imported_judgments": IMPORTED_JUDGMENT_SCHEMA,
    "experiment_results": EXPERIMENT_RESULT_SCHEMA,
    "alerts": ALERT_SCHEMA,
    "benchmark_cases": BENCHMARK_CASE_SCHEMA,
    "benchmark_results": BENCHMARK_RESULT_SCHEMA,
    "leaderboard": LEADERBOARD_SCHEMA,
}


def refresh(root: Path) -> bool:
    return refresh_catalog(root, TABLES)
