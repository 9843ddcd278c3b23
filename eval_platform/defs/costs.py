"""`judge_cost_daily`: what judging cost, by day, evaluator, model and project."""


from datetime import UTC, datetime

import dagster as dg
import duckdb
import polars as pl

from eval_platform.defs.catalog import JUDGE_COST_DAILY_SCHEMA, refresh
from eval_platform.defs.resources import WarehouseResource
from eval_platform.judging.budget import BudgetLedger
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import conform
from eval_platform.settings import state_dir
from eval_platform.storage.warehouse import has_files, table_glob, write_partition


def cost_rollup(root, evaluators: dict[str, EvaluatorConfig]) -> pl.DataFrame:
    """Judge spend per UTC day of judging. Judge spend only: the traced application's own cost_usd is
    in `traces` and is never added here."""
    if not has_files(root, "judge_scores"):
        return conform(pl.DataFrame(), JUDGE_COST_DAILY_SCHEMA)
    with duckdb.connect() as conn:
        frame = conn.sql(
            f"""
            SELECT strftime(judged_at AT TIME ZONE 'UTC', '%Y-%m-%d') AS day, evaluator, model, project_id,
                   count(*) AS rows, sum(calls) AS calls, sum(cache_hit::INT) AS cache_hits,
                   count(*) FILTER (status = 'COMPLETED') AS completed,
                   count(*) FILTER (status = 'FAILED') AS failed,
                   count(*) FILTER (status = 'SKIPPED') AS skipped,
                   sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
                   sum(coalesce(cost_usd, 0)) AS spend_usd, sum(cached_cost_usd) AS avoided_by_cache_usd
            FROM read_parquet('{table_glob(root, "judge_scores")}')
            GROUP BY ALL ORDER BY day, evaluator, model, project_id
            """
        ).pl()
    ledger = BudgetLedger(state_dir(root) / "budget.sqlite")
    spend = {(e, d): s for e, d, s, _ in ledger.totals()}
    budgets = {name: cfg.max_daily_cost_usd for name, cfg in evaluators.items()}
    frame = frame.with_columns(
        pl.col("evaluator").replace_strict(budgets, default=None, return_dtype=pl.Float64).alias("budget_daily_usd"),
        pl.struct("evaluator", "day")
        .map_elements(lambda r: spend.get((r["evaluator"], r["day"]), 0.0), return_dtype=pl.Float64)
        .alias("ledger_spend_usd"),
        pl.lit(datetime.now(UTC)).alias("computed_at"),
    ).with_columns((100 * pl.col("ledger_spend_usd") / pl.col("budget_daily_usd")).alias("budget_used_pct"))
    return conform(frame, JUDGE_COST_DAILY_SCHEMA)


def build_judge_cost_daily(evaluators: dict[str, EvaluatorConfig], judge_scores: dg.AssetsDefinition):
    @dg.asset(deps=[judge_scores], kinds={"duckdb", "parquet"}, group_name="costs")
    def judge_cost_daily(warehouse: WarehouseResource) -> dg.MaterializeResult:
        """Judge spend and tokens per UTC day, evaluator, model and project: calls, cache hits, failures,
        and the day's budget use from the spend ledger (`ledger_spend_usd`, all runs of the day)."""
        root = warehouse.root
        frame = cost_rollup(root, evaluators)
        write_partition(root, "judge_cost_daily", {}, frame)
        refresh(root)
        return dg.MaterializeResult(
            metadata={
                "rows": frame.height,
                "spend_usd": dg.MetadataValue.float(float(frame["spend_usd"].sum() or 0.0)),
                "calls": int(frame["calls"].sum() or 0),
            }
        )

    return judge_cost_daily
