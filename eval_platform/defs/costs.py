"""Assets of what judging cost (`judge_cost_daily`, `judge_cost_monthly`) and, apart, what the traced app spent
(`app_cost_daily`); the rollups themselves are `eval_platform.costs`."""

import dagster as dg

from eval_platform.costs import (
    app_cost_rollup,
    counted_cost_rollup,
    judge_ledger,
    monthly_rollup,
)
from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import REFRESH_AFTER_UPDATES
from eval_platform.defs.resources import WarehouseResource
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.storage.warehouse import read_partition, write_partition


def build_judge_cost_daily(evaluators: dict[str, EvaluatorConfig], judge_scores: dg.AssetsDefinition):
    @dg.asset(
        deps=[judge_scores], kinds={"duckdb", "parquet"}, group_name="costs", automation_condition=REFRESH_AFTER_UPDATES
    )
    def judge_cost_daily(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        """Judge spend and tokens per UTC day, evaluator, model and project: calls, cache hits, failures,
        and the day's budget use from the spend ledger (`ledger_spend_usd`, all runs of the day). Summed from
        `judge_cost_parts`, each judge_scores file's sums, of which only the files written since are read."""
        root = warehouse.root
        frame, counts = counted_cost_rollup(root, evaluators, judge_ledger(root.path, context.instance))
        write_partition(root, "judge_cost_daily", {}, frame)
        refresh(root)
        return dg.MaterializeResult(
            metadata={
                "rows": frame.height,
                "spend_usd": dg.MetadataValue.float(float(frame["spend_usd"].sum() or 0.0)),
                "calls": int(frame["calls"].sum() or 0),
                # judge_scores files summed by this run (new or rewritten since the last) and whose sums were kept
                **counts,
            }
        )

    return judge_cost_daily


def build_judge_cost_monthly(evaluators: dict[str, EvaluatorConfig], judge_cost_daily: dg.AssetsDefinition):
    @dg.asset(
        deps=[judge_cost_daily],
        kinds={"duckdb", "parquet"},
        group_name="costs",
        automation_condition=REFRESH_AFTER_UPDATES,
    )
    def judge_cost_monthly(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        """Judge spend per UTC month, evaluator, model and project, with the month's budget use from the
        spend ledger (`ledger_spend_usd` against `max_monthly_cost_usd`)."""
        root = warehouse.root
        daily = read_partition(root, "judge_cost_daily", {})
        if daily is None:
            raise dg.Failure("judge_cost_daily is not materialized yet: materialize it first")
        frame = monthly_rollup(daily, judge_ledger(root.path, context.instance), evaluators)
        write_partition(root, "judge_cost_monthly", {}, frame)
        refresh(root)
        return dg.MaterializeResult(
            metadata={
                "rows": frame.height,
                "months": frame["month"].n_unique(),
                "spend_usd": dg.MetadataValue.float(float(frame["spend_usd"].sum() or 0.0)),
            }
        )

    return judge_cost_monthly


@dg.asset(deps=["traces"], kinds={"duckdb", "parquet"}, group_name="costs", automation_condition=REFRESH_AFTER_UPDATES)
def app_cost_daily(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The traced application's own spend (`traces.cost_usd`) per day, project and model: reported here,
    apart from judge spend, and never added to it."""
    root = warehouse.root
    frame = app_cost_rollup(root)
    write_partition(root, "app_cost_daily", {}, frame)
    refresh(root)
    return dg.MaterializeResult(
        metadata={
            "rows": frame.height,
            "app_cost_usd": dg.MetadataValue.float(float(frame["app_cost_usd"].sum() or 0.0)),
        }
    )
