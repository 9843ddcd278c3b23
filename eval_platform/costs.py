"""Judge spend rollups (`judge_cost_daily`, `judge_cost_monthly`) and, apart, what the traced app spent
(`app_cost_daily`): plain functions over the warehouse's Parquet files and the budget ledger.

Judge spend and the traced application's own spend (`traces.cost_usd`) are never added together: the
app's spend has its own table. `defs/costs.py` wires these into assets.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.shared_state import SharedState
from eval_platform.schemas import (
    APP_COST_DAILY_SCHEMA,
    COMPLETED,
    FAILED,
    JUDGE_COST_DAILY_SCHEMA,
    JUDGE_COST_MEASURES,
    JUDGE_COST_MONTHLY_SCHEMA,
    SKIPPED,
    conform,
)
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import connect, has_files, table_glob


def judge_ledger(root: Path, instance: Any = None) -> BudgetLedger:
    """The judges' spend ledger (what the budgets are enforced on): the data root's, or the Dagster instance's
    database when it runs on PostgreSQL (see `llm.shared_state`)."""
    return SharedState.of(root, instance).judge_ledger()


def cost_rollup(
    root: DataRoot, evaluators: dict[str, EvaluatorConfig], ledger: BudgetLedger | None = None
) -> pl.DataFrame:
    """Judge spend per UTC day of judging. Judge spend only: the traced application's own cost_usd is
    in `traces` and is never added here. `ledger`: default, the data root's.

    An evaluator and day the ledger has spend for but no judged row (every run of it that day was killed before
    it wrote its partition) still gets a row: no model or project, no rows, the ledger's spend."""
    spend = ledger_spend(ledger or judge_ledger(root.path))
    frame = _judged_rows(root) if has_files(root, "judge_scores") else _EMPTY_ROLLUP
    only_in_ledger = spend.select("evaluator", "day").join(
        frame.select("evaluator", "day"), on=["evaluator", "day"], how="anti"
    )
    if only_in_ledger.height:
        zeros = [pl.lit(0, dtype=dtype).alias(name) for name, dtype in JUDGE_COST_MEASURES.items()]
        frame = pl.concat([frame, only_in_ledger.with_columns(*zeros)], how="diagonal_relaxed").sort(
            "day", "evaluator", "model", "project_id", nulls_last=True
        )
    budgets = {name: cfg.max_daily_cost_usd for name, cfg in evaluators.items()}
    frame = with_budget_use(frame, spend, "day", budgets, "budget_daily_usd")
    return conform(frame, JUDGE_COST_DAILY_SCHEMA)


_EMPTY_ROLLUP = pl.DataFrame(
    schema={name: JUDGE_COST_DAILY_SCHEMA[name] for name in ("day", "evaluator", "model", "project_id")}
    | JUDGE_COST_MEASURES
)


def _judged_rows(root: DataRoot) -> pl.DataFrame:
    """`judge_scores` grouped per UTC day of judging, evaluator, model and project."""
    # Rows are grouped by the UTC day number and only the groups' days are formatted: a strftime and a time
    # zone conversion on every row took most of the query's time at 10M rows.
    with connect(root) as conn:
        return conn.sql(
            f"""
            SELECT strftime(DATE '1970-01-01' + CAST(utc_day AS INTEGER), '%Y-%m-%d') AS day, * EXCLUDE (utc_day)
            FROM (
                SELECT floor(epoch_us(judged_at) / 86400000000) AS utc_day, evaluator, model, project_id,
                       count(*) AS rows, sum(calls) AS calls, sum(cache_hit::INT) AS cache_hits,
                       count(*) FILTER (status = '{COMPLETED}') AS completed,
                       count(*) FILTER (status = '{FAILED}') AS failed,
                       count(*) FILTER (status = '{SKIPPED}') AS skipped,
                       sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
                       sum(coalesce(cost_usd, 0)) AS spend_usd, sum(cached_cost_usd) AS avoided_by_cache_usd
                FROM read_parquet('{table_glob(root, "judge_scores")}')
                GROUP BY ALL
            )
            ORDER BY day, evaluator, model, project_id
            """
        ).pl()


def ledger_spend(ledger: BudgetLedger) -> pl.DataFrame:
    """The ledger's spend per evaluator and UTC day of the call, as the budgets count it: settled calls, calls of
    killed runs at their worst case, and reservations still in flight at theirs (all runs, all hosts; cache hits
    cost nothing). A reservation of a run on a host that died is in flight until its time is up; counting it
    keeps the rollup from ever showing less than the provider billed."""
    return pl.DataFrame(
        [(e, d, s) for e, d, s, _ in ledger.totals(in_flight=True)],
        schema={"evaluator": pl.String, "day": pl.String, "ledger_spend_usd": pl.Float64},
        orient="row",
        strict=False,
    )


def with_budget_use(
    frame: pl.DataFrame, spend: pl.DataFrame, period: str, budgets: dict[str, float | None], budget_column: str
) -> pl.DataFrame:
    """Adds the period's ledger spend, the evaluator's budget for that period and the percentage used."""
    return (
        frame.join(spend, on=["evaluator", period], how="left", maintain_order="left")
        .with_columns(
            pl.col("evaluator").replace_strict(budgets, default=None, return_dtype=pl.Float64).alias(budget_column),
            pl.col("ledger_spend_usd").fill_null(0.0),
            pl.lit(datetime.now(UTC)).alias("computed_at"),
        )
        .with_columns((100 * pl.col("ledger_spend_usd") / pl.col(budget_column)).alias("budget_used_pct"))
    )


def monthly_rollup(daily: pl.DataFrame, ledger: BudgetLedger, evaluators: dict[str, EvaluatorConfig]) -> pl.DataFrame:
    """`judge_cost_daily` summed per UTC month, with the month's ledger spend against the monthly budget."""
    frame = (
        daily.with_columns(pl.col("day").str.slice(0, 7).alias("month"))
        .group_by("month", "evaluator", "model", "project_id")
        .agg(pl.col(list(JUDGE_COST_MEASURES)).sum(), pl.col("day").n_unique().alias("days"))
    )
    monthly_spend = (
        ledger_spend(ledger)
        .group_by("evaluator", pl.col("day").str.slice(0, 7).alias("month"))
        .agg(pl.col("ledger_spend_usd").sum())
    )
    budgets = {name: cfg.max_monthly_cost_usd for name, cfg in evaluators.items()}
    frame = with_budget_use(frame, monthly_spend, "month", budgets, "budget_monthly_usd")
    return conform(frame.sort("month", "evaluator", "model", "project_id", nulls_last=True), JUDGE_COST_MONTHLY_SCHEMA)


def app_cost_rollup(root: DataRoot) -> pl.DataFrame:
    """The traced application's own spend and tokens per trace day, project and model."""
    if not has_files(root, "traces"):
        return conform(pl.DataFrame(), APP_COST_DAILY_SCHEMA)
    with connect(root) as conn:
        frame = conn.sql(
            f"""
            SELECT date AS day, project_id, model, count(*) AS traces,
                   count(cost_usd) AS traces_with_cost, sum(prompt_tokens) AS prompt_tokens,
                   sum(completion_tokens) AS completion_tokens, sum(cost_usd) AS app_cost_usd
            FROM read_parquet('{table_glob(root, "traces")}', union_by_name = true)
            GROUP BY ALL ORDER BY ALL
            """
        ).pl()
    return conform(frame.with_columns(pl.lit(datetime.now(UTC)).alias("computed_at")), APP_COST_DAILY_SCHEMA)
