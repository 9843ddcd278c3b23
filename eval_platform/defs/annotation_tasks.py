"""Annotation tasks in Label Studio: the assets exporting each task's items, pulling its annotations back into
`human_annotations`, and its progress and ground truth (logic in `eval_platform.annotation`).

Unpartitioned, each asset doing every task file (or those a run names) in turn: a task is small (its `size`
items), and `human_annotations` (unpartitioned: it re-reads its whole folder) sits between the pull and the
progress, and Dagster runs assets of different partitionings in separate runs. So `annotation_tasks_job` does
export -> pull -> human_annotations -> progress and ground truth in one run. A task that fails (Label Studio
unreachable, a dataset not ingested) does not stop the others; the asset then fails naming it.
"""

import os
from collections.abc import Callable
from typing import Any

import dagster as dg
import polars as pl
from pydantic import Field

from eval_platform.annotation.config import AnnotationTaskConfig, AnnotationTaskError
from eval_platform.annotation.label_studio import API_KEY_ENV, URL_ENV, LabelStudioClient, LabelStudioError
from eval_platform.annotation.tool_sync import export_task, pull_task, task_ground_truth, task_progress
from eval_platform.defs.catalog import refresh
from eval_platform.defs.judging import broken_files_text
from eval_platform.defs.resources import WarehouseResource
from eval_platform.markdown_table import markdown_table
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition

GROUP = "annotation_tasks"


class LabelStudioResource(dg.ConfigurableResource):
    """Where Label Studio is. Its URL and API key are read from the environment variables named here when a run
    starts: the key is never resource config (the UI shows resource config), nor in a row, log line or metadata.
    The key is a legacy token or a personal access token (Account & Settings in Label Studio)."""

    url_env: str = Field(default=URL_ENV, description="The environment variable holding Label Studio's base URL.")
    api_key_env: str = Field(default=API_KEY_ENV, description="The environment variable holding the API key.")
    timeout_s: float = Field(default=60.0, gt=0, description="One request's time limit.")

    def client(self) -> LabelStudioClient:
        url, key = os.environ.get(self.url_env, ""), os.environ.get(self.api_key_env, "")
        if not url or not key:
            missing = [name for name, value in ((self.url_env, url), (self.api_key_env, key)) if not value]
            raise dg.Failure(
                f"Label Studio is not configured: set {' and '.join(missing)} "
                "(README 'Annotation tasks in Label Studio')"
            )
        return LabelStudioClient(url, key, timeout_s=self.timeout_s)


class AnnotationTasksRunConfig(dg.Config):
    tasks: list[str] = Field(default_factory=list, description="Only these tasks (by name); empty: every task.")


def _selected(tasks: dict[str, AnnotationTaskConfig], config: AnnotationTasksRunConfig) -> list[AnnotationTaskConfig]:
    unknown = sorted(set(config.tasks) - set(tasks))
    if unknown:
        raise dg.Failure(f"unknown annotation tasks {unknown}; loaded: {sorted(tasks)}")
    return [tasks[name] for name in (config.tasks or sorted(tasks))]


def _each_task(
    context: dg.AssetExecutionContext, selected: list[AnnotationTaskConfig], work: Callable[[AnnotationTaskConfig], Any]
) -> dict[str, Any]:
    """`work` for each task; a task's failure is logged and the others go on; raises naming the failed ones."""
    done, failed = {}, {}
    for config in selected:
        try:
            done[config.name] = work(config)
        except (LabelStudioError, AnnotationTaskError, FileNotFoundError, ValueError) as exc:
            failed[config.name] = str(exc)
            context.log.error(f"annotation task {config.name}: {exc}")
    if failed:
        raise dg.Failure(
            description=f"annotation tasks failed: {sorted(failed)} (the others are done)",
            metadata={"failed": dg.MetadataValue.json(failed), "done": sorted(done)},
        )
    return done


def _broken_warning(context: dg.AssetExecutionContext, broken: dict[str, str]) -> None:
    if broken:
        context.log.warning(f"annotation task files not loaded: {sorted(broken)}")


def build_annotation_task_assets(
    tasks: dict[str, AnnotationTaskConfig], broken: dict[str, str] | None = None
) -> tuple[list[dg.AssetsDefinition], Any]:
    broken = broken or {}
    note = broken_files_text("annotation task", broken)
    common: dict[str, Any] = {"kinds": {"python"}, "group_name": GROUP, "metadata": {"tasks": sorted(tasks)}}

    @dg.asset(
        name="annotation_task_exports",
        deps=["traces", "judge_scores", "dataset_versions"],
        description="Each annotation task (`annotation_tasks/*.yaml`) exported to Label Studio: its items chosen "
        "(table `annotation_task_items`; items already chosen under the task's config hash are kept) and its "
        "project (found by the task's name and config hash, else created once) holding one Label Studio task per "
        "item, each asking for N annotations; an item already in the project is never imported again. Metadata: "
        "the project URL, items exported now and already present." + note,
        **common,
    )
    def annotation_task_exports(
        context: dg.AssetExecutionContext,
        config: AnnotationTasksRunConfig,
        warehouse: WarehouseResource,
        label_studio: LabelStudioResource,
    ) -> dg.MaterializeResult:
        _broken_warning(context, broken)
        root = warehouse.root
        with label_studio.client() as client:
            done = _each_task(context, _selected(tasks, config), lambda task: export_task(root, task, client))
        refresh(root)
        overview = pl.DataFrame(
            [
                {
                    "task": name,
                    "project": e.project.url,
                    "items": e.items,
                    "imported_now": e.imported,
                    "already_present": e.already_present,
                    "project_created": e.created,
                    "notes": "; ".join(e.notes),
                }
                for name, e in done.items()
            ],
            schema={
                "task": pl.String,
                "project": pl.String,
                "items": pl.Int64,
                "imported_now": pl.Int64,
                "already_present": pl.Int64,
                "project_created": pl.Boolean,
                "notes": pl.String,
            },
        )
        return dg.MaterializeResult(
            metadata={
                "tasks": dg.MetadataValue.md(markdown_table(overview)),
                "project_urls": dg.MetadataValue.json({name: e.project.url for name, e in done.items()}),
                "items_exported": sum(e.imported for e in done.values()),
                "items_already_present": sum(e.already_present for e in done.values()),
                "dagster/row_count": sum(e.items for e in done.values()),
            }
        )

    @dg.asset(
        name="annotation_task_pulls",
        deps=[annotation_task_exports],
        description="The annotations made in each task's Label Studio project, written to "
        "`annotations/label_studio/<task>-<config hash>.jsonl` (replaced whole) in the format the "
        "`human_annotations` import reads: annotator (the user's email), item, labels per criterion, created_at "
        "and the time spent. That import validates them: a label the task does not allow is quarantined with its "
        "reason. An annotation skipped in the tool has no labels and no row." + note,
        **common,
    )
    def annotation_task_pulls(
        context: dg.AssetExecutionContext,
        config: AnnotationTasksRunConfig,
        warehouse: WarehouseResource,
        label_studio: LabelStudioResource,
    ) -> dg.MaterializeResult:
        _broken_warning(context, broken)
        root = warehouse.root
        with label_studio.client() as client:
            done = _each_task(context, _selected(tasks, config), lambda task: pull_task(root.path, task, client))
        for name, pull in done.items():
            if pull.project is None:
                context.log.warning(f"annotation task {name}: no Label Studio project yet (export it first)")
        summary = {
            name: {
                "project": p.project.url if p.project else None,
                "file": p.file,
                "annotations": p.annotations,
                "items_annotated": p.items_annotated,
                "skipped_in_tool": p.skipped_in_tool,
            }
            for name, p in done.items()
        }
        return dg.MaterializeResult(
            metadata={
                "tasks": dg.MetadataValue.json(summary),
                "annotations": sum(p.annotations for p in done.values()),
                "dagster/row_count": sum(p.annotations for p in done.values()),
            }
        )

    def _annotations(root: DataRoot) -> pl.DataFrame:
        annotations = read_partition(root, "human_annotations", {})
        if annotations is None:
            raise dg.Failure("human_annotations was never materialized: materialize it first")
        return annotations

    @dg.asset(
        name="annotation_progress",
        deps=["human_annotations", annotation_task_exports],
        description="Progress of each annotation task (table `annotation_progress`), per task and per annotator, "
        "for the whole item and per criterion: items done, items with N annotations, annotations, time spent (the "
        "tool's lead time) and agreement so far (Krippendorff's alpha, percent agreement; per annotator, agreement "
        "with the others' majority). From the task's rows of `human_annotations`." + note,
        **common,
    )
    def annotation_progress(warehouse: WarehouseResource) -> dg.MaterializeResult:
        root = warehouse.root
        annotations = _annotations(root)
        tables = {name: task_progress(root, task, annotations) for name, task in tasks.items()}
        refresh(root)
        rows = pl.concat(list(tables.values())) if tables else None
        if rows is None or rows.is_empty():
            return dg.MaterializeResult(metadata={"progress": "no annotation tasks", "dagster/row_count": 0})
        overall = rows.filter((pl.col("level") == "task") & pl.col("criterion").is_null()).select(
            "task", "items_total", "items_done", "items_complete", "annotations", "time_spent_s"
        )
        agreement = rows.filter((pl.col("level") == "task") & pl.col("criterion").is_not_null()).select(
            "task", "criterion", "items_compared", "alpha", "alpha_level", "percent_agreement"
        )
        annotators = rows.filter((pl.col("level") == "annotator") & pl.col("criterion").is_null()).select(
            "task", "annotator", "items_done", "annotations", "time_spent_s", "median_lead_time_s"
        )
        return dg.MaterializeResult(
            metadata={
                "progress": dg.MetadataValue.md(markdown_table(overall)),
                "agreement_so_far": dg.MetadataValue.md(markdown_table(agreement)),
                "annotators": dg.MetadataValue.md(markdown_table(annotators)),
                "dagster/row_count": rows.height,
            }
        )

    @dg.asset(
        name="annotation_ground_truth",
        deps=["human_annotations", annotation_task_exports],
        description="Ground truth of each annotation task (table `annotation_ground_truth`): per item and "
        "criterion, the label that at least the task's consensus_threshold of its annotators gave, once it has N "
        "annotations. An item without consensus has no row (never a guessed label); the metadata counts them." + note,
        **common,
    )
    def annotation_ground_truth(warehouse: WarehouseResource) -> dg.MaterializeResult:
        root = warehouse.root
        annotations = _annotations(root)
        per_task = {}
        for name, task in tasks.items():
            truth, unsettled = task_ground_truth(root, task, annotations)
            per_task[name] = {
                "settled": truth.height,
                "labelled_not_settled": unsettled,
                "consensus_threshold": task.consensus_threshold,
                "annotations_per_item": task.annotations_per_item,
            }
        refresh(root)
        return dg.MaterializeResult(
            metadata={
                "tasks": dg.MetadataValue.json(per_task),
                "dagster/row_count": sum(t["settled"] for t in per_task.values()),
            }
        )

    assets = [annotation_task_exports, annotation_task_pulls, annotation_progress, annotation_ground_truth]
    job = dg.define_asset_job(
        "annotation_tasks_job",
        selection=dg.AssetSelection.assets(*assets) | dg.AssetSelection.assets("human_annotations"),
        description="Export every annotation task to Label Studio, pull its annotations back into "
        "human_annotations, and refresh progress and ground truth.",
    )
    return assets, job
