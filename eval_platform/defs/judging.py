"""`judge_scores`: LLM-as-judge verdicts, one partition per evaluator × day."""


import dagster as dg
import polars as pl
from pydantic import Field

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import judge_partitions
from eval_platform.defs.resources import JudgeResource, WarehouseResource
from eval_platform.defs.traces import traces
from eval_platform.judging.config import EvaluatorConfig, ReferenceOptions
from eval_platform.judging.references import attach_dataset_references
from eval_platform.judging.runner import judge_day
from eval_platform.schemas import JUDGE_SCORE_SCHEMA
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
    # Disabled evaluators are not partitions: neither automated nor offered in the backfill dialog as if live.
    live = sorted(name for name, config in evaluators.items() if config.enabled)
    disabled = sorted(set(evaluators) - set(live))
    partitions = judge_partitions(live)
    description = (
        "One row per (evaluator, trace or pair, sample): COMPLETED with score/label/reasoning, FAILED with reason "
        "and raw reply (never a score), or SKIPPED with reason. Re-materializing replaces the partition; identical "
        "judge requests are served from the cache, so an unchanged partition costs nothing."
    ) + broken_files_text("evaluator", broken or {})
    if disabled:
        description += (
            f"\n\nDisabled evaluators (enabled: false; not partitions until enabled and reloaded): {', '.join(disabled)}"
        )

    @dg.asset(
        description=description,
        metadata={"broken_config_files": dg.MetadataValue.json(broken or {})},
        partitions_def=partitions,
        deps=[traces],
        kinds={"python", "parquet"},
        group_name="judging",
        pool="llm_judge",
        automation_condition=SCORE_WHEN_TRACES_UPDATE,
        check_specs=[
            dg.AssetCheckSpec("every_trace_has_one_status", asset="judge_scores"),
            dg.AssetCheckSpec(
                "failed_rate_below_threshold",
                asset="judge_scores",
                description="WARN when the partition's FAILED rate passes the evaluator's max_failed_rate",
            ),
        ],
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
        path = write_partition(root, "judge_scores", {"evaluator": name, "date": day}, result.rows)
        refresh(root)
        summary = result.summary
        judged_traces = set(result.rows["trace_id"].to_list()) | set(result.rows["trace_id_b"].drop_nulls().to_list())
        missing = set(day_traces["trace_id"].to_list()) - judged_traces
        context.log.info(f"{name} {day}: {summary}")
        answered = result.rows.filter((pl.col("calls") > 0) | pl.col("cache_hit"))
        judged = summary["completed"] + summary["failed"]
        failed_rate = summary["failed"] / judged if judged else 0.0
        yield dg.MaterializeResult(
            metadata={
                "evaluator": name,
                # the model that actually answered (e.g. local/mock when the key is missing), not the configured one
                "model": ", ".join(sorted(set(answered["model"].drop_nulls().to_list()))) or "(no call made)",
                "provider_model": ", ".join(sorted(set(answered["provider_model"].drop_nulls().to_list()))) or None,
                "configured_model": evaluator.model_label,
                "failed_rate": dg.MetadataValue.float(round(failed_rate, 4)),
                "config_hash": evaluator.config_hash,
                "traces_in_partition": summary["traces_in_partition"],
                "rows": summary["rows"],
                "completed": summary["completed"],
                "failed": summary["failed"],
                "skipped": summary["skipped"],
                "reasons": dg.MetadataValue.json(summary["reasons"]),
                "mean_score": (
                    dg.MetadataValue.float(round(summary["mean_score"], 4)) if summary["mean_score"] is not None else None
                ),
                "cost_usd": dg.MetadataValue.float(round(summary["cost_usd"], 6)),
                "calls": summary["calls"],
                "cache_hits": summary["cache_hits"],
                # batch mode: each batch waited for (id, status, resumed or new, requests, spend)
                **({"batches": dg.MetadataValue.json(summary["batches"])} if "batches" in summary else {}),
                "dagster/row_count": summary["rows"],
                "dagster/column_schema": JUDGE_SCORES_TABLE_SCHEMA,
                "parquet": dg.MetadataValue.path(str(path)),
                "preview": dg.MetadataValue.md(preview(result.rows)),
            }
        )
        yield dg.AssetCheckResult(
            check_name="every_trace_has_one_status",
            passed=not missing and summary["rows"] == summary["completed"] + summary["failed"] + summary["skipped"],
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"traces_without_a_row": len(missing)},
        )
        yield dg.AssetCheckResult(
            check_name="failed_rate_below_threshold",
            passed=failed_rate <= evaluator.max_failed_rate,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"failed_rate": round(failed_rate, 4), "max_failed_rate": evaluator.max_failed_rate,
                      "failed": summary["failed"], "judged": judged},
        )

    return judge_scores


JUDGE_SCORES_TABLE_SCHEMA = dg.TableSchema(
    columns=[dg.TableColumn(name, str(dtype)) for name, dtype in JUDGE_SCORE_SCHEMA.items()]
)


def preview(rows: pl.DataFrame, n: int = 5) -> str:
    """A few final rows as a Markdown table, for the UI."""
    columns = ["trace_id", "status", "reason", "score", "label", "model"]
    shown = rows.filter(pl.col("is_final")).head(n).select(columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in shown.iter_rows():
        cells = ["" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)[:40]) for v in row]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


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
