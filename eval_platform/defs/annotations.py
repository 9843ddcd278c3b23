"""Labels from outside the platform: `human_annotations` (a labelling tool's exports) and `imported_judgments`
(verdicts of judges run elsewhere). Both are unpartitioned: each materialization re-reads its whole folder and
replaces the table, so a fixed or removed file is reflected at once."""

import dagster as dg
import polars as pl

from eval_platform.annotation.config import AnnotationTaskError, load_annotation_tasks
from eval_platform.defs.catalog import refresh
from eval_platform.defs.resources import WarehouseResource
from eval_platform.ingest.annotations import annotation_overview, read_annotations
from eval_platform.ingest.export_files import ALL_PARTITION
from eval_platform.ingest.judgments import read_judgments
from eval_platform.markdown_table import markdown_table
from eval_platform.storage.warehouse import write_partition, write_quarantine


def _reasons(quarantine: pl.DataFrame) -> dict[str, int]:
    return dict(quarantine.group_by("reason").len().sort("reason").rows()) if quarantine.height else {}


# after `annotation_task_pulls` (annotation tasks): it writes the labels pulled from Label Studio where this reads
@dg.asset(kinds={"python", "parquet"}, group_name="ingest", deps=["annotation_task_pulls"])
def human_annotations(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Human labels from `annotations/*` (JSONL, JSON, CSV, Parquet), one row per (task, item, annotator,
    criterion): the label as text and its value (rating, mapped class, or rank). The annotation tasks
    (`annotation_tasks/*.yaml`, and `annotations/tasks.yaml` when present) declare each task's criteria and allowed
    labels, and rows that break them are quarantined with file, line and reason. Exposed as the
    `human_annotations` view."""
    root = warehouse.root
    try:
        # A broken task file declares nothing (its error shows where the code location loads); a broken
        # tasks.yaml fails the asset, naming the file and the field.
        declared = load_annotation_tasks(root.path, broken={}).declared()
    except AnnotationTaskError as error:
        raise dg.Failure(description=str(error)) from error
    result = read_annotations(root.path, tasks=declared)
    write_partition(root, "human_annotations", {}, result.annotations)
    write_quarantine(root, "human_annotations", ALL_PARTITION, result.quarantine)
    refresh(root)
    reasons = _reasons(result.quarantine)
    if reasons:
        context.log.warning(f"{result.quarantine.height} annotation rows quarantined: {reasons}")
    overview = annotation_overview(result.annotations)
    annotators = sorted(result.annotations["annotator"].unique().to_list())
    return dg.MaterializeResult(
        metadata={
            "rows": result.annotations.height,
            "quarantined": result.quarantine.height,
            "quarantine_reasons": dg.MetadataValue.json(reasons),
            "files": dg.MetadataValue.json(result.files),
            "tasks_file": result.tasks_file or "none (labels not validated; schemas inferred)",
            "tasks": dg.MetadataValue.md(markdown_table(overview)),
            "annotators": dg.MetadataValue.json(annotators),
            "dagster/row_count": result.annotations.height,
        }
    )


@dg.asset(kinds={"python", "parquet"}, group_name="ingest")
def imported_judgments(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Judge verdicts produced outside the platform (`judgments/*`: another tool, a published study), one row
    per (source, item): the verdict as recorded, a numeric value when there is one, the reasoning and the
    traces it refers to. Bad rows are quarantined with file, line and reason. Exposed as the
    `imported_judgments` view."""
    root = warehouse.root
    result = read_judgments(root.path)
    write_partition(root, "imported_judgments", {}, result.judgments)
    write_quarantine(root, "imported_judgments", ALL_PARTITION, result.quarantine)
    refresh(root)
    reasons = _reasons(result.quarantine)
    if reasons:
        context.log.warning(f"{result.quarantine.height} judgment rows quarantined: {reasons}")
    by_source = (
        result.judgments.group_by("source", "verdict").len().sort("source", "verdict")
        if result.judgments.height
        else pl.DataFrame(schema={"source": pl.String, "verdict": pl.String, "len": pl.UInt32})
    )
    return dg.MaterializeResult(
        metadata={
            "rows": result.judgments.height,
            "quarantined": result.quarantine.height,
            "quarantine_reasons": dg.MetadataValue.json(reasons),
            "files": dg.MetadataValue.json(result.files),
            "sources": dg.MetadataValue.json(sorted(result.judgments["source"].unique().to_list())),
            "verdicts_by_source": dg.MetadataValue.md(markdown_table(by_source.rename({"len": "rows"}))),
            "dagster/row_count": result.judgments.height,
        }
    )
