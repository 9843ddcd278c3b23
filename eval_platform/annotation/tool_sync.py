"""An annotation task between the warehouse and Label Studio: its items out, its annotations back, its progress.

- `task_items(root, config)`: the items of a task (`annotation_task_items` rows). The selection is kept: the items
  already chosen under the task's config hash stay (annotators may be working on them), and a fresh selection
  (`sampling.select_items` over the current traces, verdicts and annotations) only adds items, up to `size`,
  when fewer were chosen (say the traces of a day were not ingested yet at the first export).
- `export_task(root, config, client)`: the items -> `annotation_task_items` (the task's partition) and the task's
  Label Studio project (found, or created once) with one Label Studio task per item not already in it.
- `pull_task(root, config, client)`: the project's annotations -> `annotations/label_studio/<task>-<hash8>.jsonl`
  under the data root (replaced whole, atomically), in the format the `human_annotations` import reads, so that
  they enter `human_annotations` through that import and its validation (a bad label is quarantined with its
  reason, never dropped). One file per task and config hash: a project of an earlier config keeps its file.
- `task_progress(root, config, annotations)`: `annotation_progress` and `annotation_ground_truth` of the task from
  its rows of `human_annotations` (`annotation.progress`), written to the task's partitions.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from eval_platform.annotation.config import AnnotationTaskConfig, resolve_dataset_version
from eval_platform.annotation.label_studio import (
    ITEM_FIELDS,
    LabelStudioClient,
    Project,
    annotation_rows,
    labeling_config,
    task_data,
)
from eval_platform.annotation.progress import ground_truth, open_items, progress
from eval_platform.annotation.sampling import select_items
from eval_platform.ingest.annotations import FOLDER as ANNOTATIONS_FOLDER
from eval_platform.schemas import ANNOTATION_TASK_ITEM_SCHEMA, conform, empty_frame
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_files, read_parquet, read_partition, write_partition

ITEMS_TABLE = "annotation_task_items"
PROGRESS_TABLE = "annotation_progress"
GROUND_TRUTH_TABLE = "annotation_ground_truth"
TOOL_FOLDER = "label_studio"  # under annotations/: the files pulled from Label Studio


def _key(config: AnnotationTaskConfig) -> dict[str, str]:
    return {"task": config.name}


# ---- the items ---------------------------------------------------------------------------------------------


def _judge_rows(root: DataRoot, evaluators: list[str]) -> pl.DataFrame | None:
    if not evaluators:
        return None
    files = partition_files(root, "judge_scores", "evaluator")
    frames = [read_parquet(root, files[name], hive_partitioning=False) for name in evaluators if name in files]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _candidates(
    root: DataRoot, config: AnnotationTaskConfig
) -> tuple[pl.DataFrame, pl.DataFrame | None, tuple[int, str] | None]:
    """(candidate rows, judge_scores rows of the named evaluators, dataset version) of the task's source."""
    traces = config.source.traces
    if traces is not None:
        frames = [f for day in traces.day_keys() if (f := read_partition(root, "traces", {"date": day})) is not None]
        rows = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame({"trace_id": [], "date": []})
        return rows, _judge_rows(root, traces.evaluators), None
    dataset = config.source.dataset
    assert dataset is not None  # `Source._exactly_one`: not traces, so a dataset
    version, sha = resolve_dataset_version(root.path, dataset)
    cases = read_partition(root, "test_cases", {"dataset": dataset.name, "version": str(version)})
    if cases is None:
        raise FileNotFoundError(
            f"dataset version {dataset.name}@v{version} of annotation task '{config.name}' is not ingested yet: "
            "materialize its dataset_versions partition first"
        )
    return cases, None, (version, sha)


def task_items(root: DataRoot, config: AnnotationTaskConfig) -> tuple[pl.DataFrame, int]:
    """(the task's items, how many of them were chosen before this call)."""
    kept = read_partition(root, ITEMS_TABLE, _key(config))
    kept = (
        conform(kept, ANNOTATION_TASK_ITEM_SCHEMA).filter(pl.col("config_hash") == config.config_hash)
        if kept is not None
        else empty_frame(ANNOTATION_TASK_ITEM_SCHEMA)
    )
    if kept.height >= config.size:
        return kept, kept.height
    candidates, judge_rows, version = _candidates(root, config)
    human_rows = read_partition(root, "human_annotations", {}) if config.sampling.method == "disagreement" else None
    fresh = select_items(config, candidates, judge_rows, human_rows, dataset_version=version)
    added = fresh.join(kept.select("item_id"), on="item_id", how="anti").head(config.size - kept.height)
    added = added.with_columns((pl.int_range(1, pl.len() + 1, dtype=pl.Int64) + kept.height).alias("position"))
    return pl.concat([kept, conform(added, ANNOTATION_TASK_ITEM_SCHEMA)]), kept.height


def item_fields(items: pl.DataFrame) -> list[str]:
    """The item fields shown to annotators: those at least one item has."""
    return [f for f in ITEM_FIELDS if f in items.columns and items[f].drop_nulls().str.len_chars().sum() > 0]


# ---- out to the tool ---------------------------------------------------------------------------------------


@dataclass
class Export:
    project: Project
    created: bool  # the project was created by this export
    items: int  # the task's items
    imported: int  # items imported into the project now
    already_present: int  # items the project already had
    items_chosen_before: int
    notes: list[str] = field(default_factory=list)


def export_task(root: DataRoot, config: AnnotationTaskConfig, client: LabelStudioClient) -> Export:
    items, before = task_items(root, config)
    write_partition(root, ITEMS_TABLE, _key(config), items)
    notes = []
    if items.height < config.size:
        notes.append(f"{items.height} items of the {config.size} asked: the source has no more candidates")
    project = client.find_project(config)
    created = project is None
    if project is None:
        project = client.create_project(config, labeling_config(config, item_fields(items)))
    elif client.set_annotations_per_item(project, config.annotations_per_item):
        notes.append(f"annotations per item set to {config.annotations_per_item}")
    present = client.item_ids(project)
    fields = item_fields(items)
    new = [task_data(row, fields) for row in items.to_dicts() if row["item_id"] not in present]
    imported = client.import_tasks(project, new) if new else 0
    return Export(
        project=project,
        created=created,
        items=items.height,
        imported=imported,
        already_present=items.height - len(new),
        items_chosen_before=before,
        notes=notes,
    )


# ---- back from the tool ------------------------------------------------------------------------------------


@dataclass
class Pull:
    project: Project | None
    file: str | None  # relative to the data root
    annotations: int  # rows written (one per annotation made in the tool)
    skipped_in_tool: int  # annotations the annotator skipped (cancelled): no labels, no row
    items_annotated: int


def pulled_file(root: Path, config: AnnotationTaskConfig) -> Path:
    return root / ANNOTATIONS_FOLDER / TOOL_FOLDER / f"{config.name}-{config.config_hash[:8]}.jsonl"


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # a hidden temporary name: the import skips hidden files, so it never reads half a file
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def pull_task(root: Path, config: AnnotationTaskConfig, client: LabelStudioClient) -> Pull:
    project = client.find_project(config)
    if project is None:
        return Pull(project=None, file=None, annotations=0, skipped_in_tool=0, items_annotated=0)
    exported = client.annotated_tasks(project)
    rows, skipped = annotation_rows(exported, config, client.user_emails(), project)
    path = pulled_file(root, config)
    _write_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return Pull(
        project=project,
        file=path.relative_to(root).as_posix(),
        annotations=len(rows),
        skipped_in_tool=skipped,
        items_annotated=len({row["item_id"] for row in rows}),
    )


# ---- progress and ground truth -----------------------------------------------------------------------------


def _task_rows(annotations: pl.DataFrame, config: AnnotationTaskConfig) -> pl.DataFrame:
    return annotations.filter(pl.col("task") == config.name)


def task_progress(root: DataRoot, config: AnnotationTaskConfig, annotations: pl.DataFrame) -> pl.DataFrame:
    """Write the task's `annotation_progress` partition from `human_annotations` rows (its items: those chosen
    under its config hash; annotations of other items are left out and counted in the note); returns it."""
    items = read_partition(root, ITEMS_TABLE, _key(config))
    if items is not None:
        items = items.filter(pl.col("config_hash") == config.config_hash)
    table = progress(_task_rows(annotations, config), config, items)
    write_partition(root, PROGRESS_TABLE, _key(config), table)
    return table


def task_ground_truth(
    root: DataRoot, config: AnnotationTaskConfig, annotations: pl.DataFrame
) -> tuple[pl.DataFrame, int]:
    """Write the task's `annotation_ground_truth` partition (the labels settled at its consensus threshold) from
    `human_annotations` rows; returns it and the count of (item, criterion) labelled but not settled."""
    rows = _task_rows(annotations, config)
    truth = ground_truth(rows, config)
    write_partition(root, GROUND_TRUTH_TABLE, _key(config), truth)
    return truth, open_items(rows, config).height
