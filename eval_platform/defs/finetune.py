"""The `finetune_exports` asset: per day, the traces passing each export's thresholds as fine-tuning JSONL
(logic in `eval_platform.finetune`)."""

import dagster as dg

from eval_platform.defs.judging import broken_files_text
from eval_platform.defs.resources import WarehouseResource
from eval_platform.finetune.config import FinetuneExport
from eval_platform.finetune.day import run_day

FINETUNE_EXPORTS_DOC = (
    "Fine-tuning data, per UTC day and export file (`finetune_exports/*.yaml`): the day's traces whose final "
    "verdicts pass every declared evaluator threshold, as chat-format JSONL in OpenAI's fine-tuning format "
    '(`{"messages": [...]}` per line; agent traces with `tool_calls` and `tool` messages). A FAILED or SKIPPED '
    "verdict, or none, never passes. Files under `warehouse/finetune_exports/export=<name>/date=<day>/`: "
    "`train.jsonl` and `manifest.json` (filter, counts, trace of each line); the metadata shows the filter, the "
    "traces considered, passed, and excluded by reason."
)


def build_finetune_exports(
    exports: dict[str, FinetuneExport],
    traces: dg.AssetsDefinition,
    judge_scores: dg.AssetsDefinition,
    broken: dict[str, str] | None = None,
) -> dg.AssetsDefinition:
    @dg.asset(
        name="finetune_exports",
        partitions_def=traces.partitions_def,
        deps=[
            traces,
            # the day's verdicts of every evaluator: Dagster maps a day onto the date dimension of evaluator × date
            judge_scores,
        ],
        kinds={"python"},
        group_name="exports",
        description=FINETUNE_EXPORTS_DOC + broken_files_text("fine-tuning export", broken or {}),
        metadata={"broken_config_files": dg.MetadataValue.json(broken or {}), "exports": sorted(exports)},
    )
    def finetune_exports(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        """The day's fine-tuning JSONL of every export file (see the asset description)."""
        day = context.partition_key
        if broken:
            context.log.warning(f"fine-tuning export files not loaded: {sorted(broken)}")
        try:
            done = run_day(warehouse.root, day, exports)
        except FileNotFoundError as exc:
            raise dg.Failure(str(exc)) from exc
        for name, summary in done.items():
            if summary["evaluators_not_scored_that_day"]:
                context.log.warning(
                    f"export {name}: no judge_scores of {summary['evaluators_not_scored_that_day']} on {day}: "
                    "every trace counts as not_scored for them"
                )
        return dg.MaterializeResult(
            metadata={
                "exports": dg.MetadataValue.json(done),
                "traces_considered": max((s["traces_considered"] for s in done.values()), default=0),
                "traces_passed": sum(s["traces_passed"] for s in done.values()),
                "dagster/row_count": sum(s["traces_passed"] for s in done.values()),
            }
        )

    return finetune_exports
