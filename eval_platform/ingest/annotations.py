"""Human annotations exported from a labelling tool -> the long table `human_annotations`.

`read_annotations(data_root, tasks=...)` reads every file under `<data_root>/annotations/` (JSONL, JSON array,
CSV, Parquet, optionally gzip; see `export_files.py`) except `tasks.yaml`, which declares tasks (read, with the
task files, by `eval_platform.annotation.config.load_annotation_tasks`, whose `declared()` is `tasks`). One input
row is one annotator's labels for one item:

    {"task": "summary_quality", "item_id": "doc-17", "annotator": "ann2", "labels": {"relevance": 4, "fluency": 5}}
    {"task": "pandalm_pairwise", "item_id": "pandalm-0000", "annotator": "annotator1", "criterion": "preference",
     "label": 2, "response1_trace_id": "...", "response2_trace_id": "..."}

and becomes one output row per criterion (a ranking: one per ranked candidate):

- task: `task` (alias `task_name`); default: the file name without extensions
- item_id: `item_id` (aliases `item`, `example_id`; else `trace_id`)
- annotator: `annotator` (aliases `annotator_id`, `rater`, `user`)
- criterion: a key of `labels` (or a flat `labels.<criterion>` column), else `criterion`; default: the task's
  only declared criterion, else `overall`
- schema: classification, rating, ranking or text (free text, never inferred): declared in tasks.yaml, else the
  row's `schema`, else inferred (a number is a rating, a list a ranking, anything else a classification)
- label: the label as text (a rating's number as written; a ranking row's candidate; a text criterion's text)
- value: rating: the number; classification: the value tasks.yaml maps the label to (else null); ranking: the
  candidate's 1-based rank
- trace_id, response1_trace_id, response2_trace_id: references to the judged traces, when the export has them
- annotated_at: `annotated_at` (aliases `created_at`, `timestamp`), UTC
- metadata: every other field of the row, as a JSON object
- source_file, source_line: where the row came from (CSV: the header is line 1)

Each annotation task file (`annotation_tasks/*.yaml`, `eval_platform.annotation`) declares its task's criteria
the same way, over tasks.yaml for that task: the labels pulled back from Label Studio are checked against what
annotators were asked (`DeclaredTasks.task_files`).

A ranking is a list best first (`["B", "A", "C"]`, in CSV also `B > A > C` or a JSON list) or an object
candidate -> rank. Rejected rows go to the quarantine (source `human_annotations`) with file, line and one of:
`missing_field:annotator|item_id|label`, `invalid_type:<field>`, `conflicting_fields:label,labels`,
`unknown_task`, `unknown_criterion:<c>`, `schema_mismatch:<c>`, `invalid_label:<c>`, `label_not_allowed:<c>`,
`label_out_of_range:<c>`, `invalid_ranking:<c>`, `invalid_timestamp`, `duplicate_annotation` (the same
task, item, annotator and criterion again: the first in file/line order is kept), the file-level reasons of
`export_files.py`, or `unexpected_error`. A row with any bad criterion is rejected whole.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import polars as pl

from eval_platform.ingest.annotation_criteria import (
    TASKS_FILE_NAMES,
    CriterionSpec,
    DeclaredTasks,
    Schema,
    TaskSpec,
)
from eval_platform.ingest.annotation_labels import label_schema, normalized_labels
from eval_platform.ingest.common import RowError, dumps, preview
from eval_platform.ingest.export_files import (
    ExportRow,
    Rejects,
    export_files,
    export_rows,
    file_stem,
    first_present,
    text_field,
)
from eval_platform.ingest.quarantine import utc_now
from eval_platform.ingest.records import parse_timestamp
from eval_platform.schemas import HUMAN_ANNOTATION_SCHEMA, conform, empty_frame

SOURCE = "human_annotations"
FOLDER = "annotations"
DEFAULT_CRITERION = "overall"
SCHEMAS: tuple[str, ...] = get_args(Schema)  # classification, rating, ranking, text

ALIASES: dict[str, tuple[str, ...]] = {
    "task": ("task", "task_name"),
    "item_id": ("item_id", "item", "example_id", "trace_id"),
    "annotator": ("annotator", "annotator_id", "rater", "user"),
    "annotated_at": ("annotated_at", "created_at", "timestamp"),
}
REFERENCES = ("trace_id", "response1_trace_id", "response2_trace_id")
_KNOWN = (
    {alias for names in ALIASES.values() for alias in names}
    | set(REFERENCES)
    | {
        "criterion",
        "label",
        "labels",
        "schema",
        "metadata",
    }
)


@dataclass
class Annotations:
    """The normalized annotations, the quarantine, the files read and the tasks file used (if any)."""

    annotations: pl.DataFrame
    quarantine: pl.DataFrame
    files: list[str] = field(default_factory=list)
    tasks_file: str | None = None


def read_annotations(data_root: Path, *, tasks: DeclaredTasks, now: datetime | None = None) -> Annotations:
    """Every annotation export under `<data_root>/annotations/`, checked against what the annotation tasks declare
    (`tasks`: `annotation.config.load_annotation_tasks(...).declared()`, read by the caller: the annotation package
    stands above ingest); never raises for a bad row or file."""
    data_root = Path(data_root)
    rejects = Rejects(SOURCE, now or utc_now())
    files = export_files(data_root, FOLDER, ignore=TASKS_FILE_NAMES)
    rows: list[dict[str, Any]] = []
    first_seen: dict[tuple[str, str, str, str], str] = {}
    for row in export_rows(data_root, files, rejects, "annotation exports"):
        try:
            normalized = normalize_annotation(row, tasks)
        except RowError as error:
            rejects.reject(row, error)
            continue
        except Exception as exc:  # an ingest bug must not crash the asset nor lose the row
            rejects.reject(
                row, RowError("unexpected_error", f"the row could not be normalized ({type(exc).__name__}: {exc})")
            )
            continue
        keys = {(r["task"], r["item_id"], r["annotator"], r["criterion"]) for r in normalized}
        repeated = next((key for key in sorted(keys) if key in first_seen), None)
        if repeated is not None:
            task, item_id, annotator, criterion = repeated
            message = (
                f"annotator {annotator!r} already labelled {criterion!r} of item {item_id!r} (task {task!r}) "
                f"in {first_seen[repeated]}; the first occurrence is kept"
            )
            rejects.reject(row, RowError("duplicate_annotation", message))
            continue
        first_seen.update({key: row.where for key in keys})
        rows.extend(normalized)
    frame = (
        conform(pl.DataFrame(rows, schema=HUMAN_ANNOTATION_SCHEMA), HUMAN_ANNOTATION_SCHEMA)
        if rows
        else empty_frame(HUMAN_ANNOTATION_SCHEMA)
    )
    return Annotations(
        annotations=frame,
        quarantine=rejects.frame(),
        files=[path.relative_to(data_root).as_posix() for path in files],
        tasks_file=tasks.tasks_file_path,
    )


# --- one row ------------------------------------------------------------------------------------------


def normalize_annotation(row: ExportRow, tasks: DeclaredTasks) -> list[dict[str, Any]]:
    """The output rows of one export row (one per criterion, or per ranked candidate); RowError if bad. A task
    file's criteria (`tasks.task_files`) are authoritative for its task, over tasks.yaml's."""
    record = _cleaned(row.record, row.from_text)
    annotator = _required_text(record, "annotator")
    item_id = _required_text(record, "item_id")
    task = text_field(first_present(record, ALIASES["task"]), "task") or file_stem(row.file)
    spec = tasks.task_files[task] if task in tasks.task_files else _task_spec(tasks.tasks_file, task)
    labels = _labels(record, spec)
    annotated_at = first_present(record, ALIASES["annotated_at"])
    base = {
        "task": task,
        "item_id": item_id,
        "annotator": annotator,
        "annotated_at": None if annotated_at is None else _timestamp(annotated_at),
        "metadata": _metadata(record),
        "source_file": row.file,
        "source_line": row.line,
        **{name: text_field(record.get(name), name) for name in REFERENCES},
    }
    row_schema = text_field(record.get("schema"), "schema")
    if row_schema is not None and row_schema not in SCHEMAS:
        raise RowError("invalid_type:schema", f"field 'schema' is {row_schema!r}, not one of {', '.join(SCHEMAS)}")

    out, problems = [], []
    for criterion, value in labels.items():
        try:
            criterion_spec = _criterion_spec(spec, task, criterion)
            schema = label_schema(criterion_spec, row_schema, criterion, value)
            for label, number in normalized_labels(schema, criterion_spec, criterion, value):
                out.append({**base, "criterion": criterion, "schema": schema, "label": label, "value": number})
        except RowError as error:
            problems.append(error)
    if problems:
        message = "; ".join(error.message for error in problems)
        raise RowError(problems[0].reason, message)
    return out


def _cleaned(record: dict[str, Any], from_text: bool) -> dict[str, Any]:
    """CSV cells are text, so an empty cell is absent; `labels`/`metadata` written as JSON text (CSV, Parquet
    string columns) are decoded."""
    cleaned = {}
    for key, value in record.items():
        if from_text and isinstance(value, str) and not value.strip():
            continue
        if key in ("labels", "metadata") and isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError:
                raise RowError(f"invalid_type:{key}", f"field '{key}' is not a JSON object: {preview(value)}") from None
        cleaned[key] = value
    return cleaned


def _required_text(record: dict[str, Any], name: str) -> str:
    value = text_field(first_present(record, ALIASES[name]), name)
    if value is None:
        aliases = ", ".join(f"'{alias}'" for alias in ALIASES[name])
        raise RowError(f"missing_field:{name}", f"no {name} (looked for {aliases})")
    return value


def _timestamp(value: Any) -> datetime:
    return parse_timestamp(value, "annotated_at")


def _metadata(record: dict[str, Any]) -> str:
    extras = {k: v for k, v in record.items() if k not in _KNOWN and not k.startswith("labels.")}
    nested = record.get("metadata")
    if nested is not None and not isinstance(nested, dict):
        raise RowError("invalid_type:metadata", f"field 'metadata' value {preview(nested)} is not an object")
    return dumps({**(nested or {}), **extras})


def _task_spec(tasks_file: Mapping[str, TaskSpec] | None, task: str) -> TaskSpec | None:
    if tasks_file is None:
        return None
    spec = tasks_file.get(task)
    if spec is None:
        declared = ", ".join(sorted(tasks_file)) or "none"
        raise RowError("unknown_task", f"task {task!r} is not declared in tasks.yaml (declared: {declared})")
    return spec


def _labels(record: dict[str, Any], spec) -> dict[str, Any]:
    """criterion -> raw label value."""
    nested = record.get("labels")
    flat = {k.removeprefix("labels."): v for k, v in record.items() if k.startswith("labels.") and v is not None}
    if nested is not None and not isinstance(nested, dict):
        raise RowError(
            "invalid_type:labels", f"field 'labels' value {preview(nested)} is not an object of criterion -> label"
        )
    labels = {**(nested or {}), **flat}
    if labels:
        if record.get("label") is not None:
            raise RowError("conflicting_fields:label,labels", "the row has both 'label' and 'labels'; use one of them")
        missing = sorted(str(k) for k, v in labels.items() if v is None)
        if missing:
            raise RowError("missing_field:label", f"no label for criterion {', '.join(missing)}")
        return {str(k): v for k, v in labels.items()}
    if record.get("label") is None:
        raise RowError(
            "missing_field:label", "no label (looked for 'label', 'labels' and 'labels.<criterion>' columns)"
        )
    criterion = text_field(record.get("criterion"), "criterion")
    if criterion is None:
        criterion = next(iter(spec.criteria)) if spec is not None and len(spec.criteria) == 1 else DEFAULT_CRITERION
    return {criterion: record["label"]}


def _criterion_spec(spec, task: str, criterion: str) -> CriterionSpec | None:
    if spec is None:
        return None
    found = spec.criteria.get(criterion)
    if found is None:
        declared = ", ".join(sorted(spec.criteria))
        raise RowError(
            f"unknown_criterion:{criterion}",
            f"criterion {criterion!r} is not declared for task {task!r} in tasks.yaml (declared: {declared})",
        )
    return found


def annotation_overview(frame: pl.DataFrame) -> pl.DataFrame:
    """Per task and criterion: schema, items, annotators (sorted list) and rows; for metadata and the UI."""
    if frame.is_empty():
        return pl.DataFrame(
            schema={
                "task": pl.String,
                "criterion": pl.String,
                "schema": pl.String,
                "items": pl.UInt32,
                "annotators": pl.List(pl.String),
                "rows": pl.UInt32,
            }
        )
    return (
        frame.group_by("task", "criterion", "schema")
        .agg(
            pl.col("item_id").n_unique().alias("items"),
            pl.col("annotator").unique().sort().alias("annotators"),
            pl.len().alias("rows"),
        )
        .sort("task", "criterion", "schema")
    )
