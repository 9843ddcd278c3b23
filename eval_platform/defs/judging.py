"""`judge_scores`: LLM-as-judge verdicts, one partition per evaluator × day."""


import dagster as dg
from pydantic import Field

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import judge_partitions
from eval_platform.defs.resources import JudgeResource, WarehouseResource
from eval_platform.defs.traces import traces
from eval_platform.judging.config import EvaluatorConfig, ReferenceOptions
from eval_platform.judging.references import attach_dataset_references
from eval_platform.judging.runner import judge_day
from eval_platform.settings import warehouse_dir
from eval_platform.storage.warehouse import read_partition, write_partition

# Score a day as soon as its traces are (re)ingested, never while they are still being written.
SCORE_WHEN_TRACES_UPDATE = (
    dg.AutomationCondition.any_deps_updated()
    & ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)


class JudgeScoresConfig(dg.Config):
    trace_ids: list[str] = Field(
        default_factory=list, description="For evaluators with trigger 'manual': the traces to judge."
    )


def broken_files_text(kind: str, broken: dict[str, str]) -> str:
    """What the UI shows for config files that did not load: each file with its field and message."""
    if not broken:
        return ""
    lines = [f"\n\nBROKEN {kind} files (not loaded; every other one works). Fix them and reload:"]
    lines += [f"- {name}: {message}" for name, message in sorted(broken.items())]
    return "\n".join(lines)


def build_judge_scores(evaluators: dict[str, EvaluatorConfig], broken: dict[str, str] | None = None) -> dg.AssetsDefinition:
    partitions = judge_partitions(sorted(evaluators))
    description = (
        "One row per (evaluator, trace or pair, sample): COMPLETED with score/label/reasoning, FAILED with reason "
        "and raw reply (never a score), or SKIPPED with reason. Re-materializing replaces the partition; identical "
        "judge requests are served from the cache, so an unchanged partition costs nothing."
    ) + broken_files_text("evaluator", broken or {})

    @dg.asset(
        description=description,
        metadata={"broken_config_files": dg.MetadataValue.json(broken or {})},
        partitions_def=partitions,
        deps=[traces],
        kinds={"python", "parquet"},
        group_name="judging",
        pool="llm_judge",
        automation_condition=SCORE_WHEN_TRACES_UPDATE,
        check_specs=[dg.AssetCheckSpec("every_trace_has_one_status", asset="judge_scores")],
    )
    def judge_scores(
        context: dg.AssetExecutionContext,
        config: JudgeScoresConfig,
        warehouse: WarehouseResource,
        judge: JudgeResource,
    ):
        keys = context.partition_key.keys_by_dimension
        day, name = keys["date"], keys["evaluator"]
        evaluator = evaluators[name]
        root = warehouse.root
        day_traces = read_partition(root, "traces", {"date": day})
        if day_traces is None:
            raise dg.Failure(f"traces for {day} are not materialized yet: materialize traces[{day}] first")
        if evaluator.reference is not None and evaluator.reference.source == "dataset":
            cases = reference_cases(root, evaluator.reference)
            day_traces = attach_dataset_references(day_traces, cases, evaluator.reference.match_on)
        result = judge_day(evaluator, day, day_traces, judge.runtime(root), set(config.trace_ids))
        write_partition(root, "judge_scores", {"evaluator": name, "date": day}, result.rows)
        refresh(root)
        summary = result.summary
        judged_traces = set(result.rows["trace_id"].to_list()) | set(result.rows["trace_id_b"].drop_nulls().to_list())
        missing = set(day_traces["trace_id"].to_list()) - judged_traces
        context.log.info(f"{name} {day}: {summary}")
        yield dg.MaterializeResult(
            metadata={
                "evaluator": name,
                "model": evaluator.model_label,
                "config_hash": evaluator.config_hash,
                "traces_in_partition": summary["traces_in_partition"],
                "rows": summary["rows"],
                "completed": summary["completed"],
                "failed": summary["failed"],
                "skipped": summary["skipped"],
                "reasons": dg.MetadataValue.json(summary["reasons"]),
                "mean_score": dg.MetadataValue.float(summary["mean_score"]) if summary["mean_score"] is not None else None,
                "cost_usd": dg.MetadataValue.float(summary["cost_usd"]),
                "calls": summary["calls"],
                "cache_hits": summary["cache_hits"],
                "dagster/row_count": summary["rows"],
            }
        )
        yield dg.AssetCheckResult(
            check_name="every_trace_has_one_status",
            passed=not missing and summary["rows"] == summary["completed"] + summary["failed"] + summary["skipped"],
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"traces_without_a_row": len(missing)},
        )

    return judge_scores


def reference_cases(root, options: ReferenceOptions):
    """The test cases of the reference dataset: the version named, else the newest materialized one."""
    folder = warehouse_dir(root) / "test_cases" / f"dataset={options.dataset}"
    versions = sorted(int(p.name.removeprefix("version=")) for p in folder.glob("version=*"))
    version = options.version if options.version is not None else (versions[-1] if versions else None)
    cases = read_partition(root, "test_cases", {"dataset": options.dataset, "version": str(version)}) if version else None
    if cases is None:
        raise dg.Failure(
            f"reference dataset {options.dataset}@v{version or '?'} is not materialized: "
            f"materialize dataset_versions for it first"
        )
    return cases
