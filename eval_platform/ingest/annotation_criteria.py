"""What an annotation task declares about its labels: each criterion's schema and allowed labels or range
(`CriterionSpec`, a task's `TaskSpec`), and what `human_annotations` checks imported labels against
(`DeclaredTasks`). Both forms of annotation task declare their criteria with these models; they are read by the
one loader, `eval_platform.annotation.config.load_annotation_tasks`, which stands above ingest and hands
`DeclaredTasks` to `read_annotations`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field, field_validator, model_validator

from eval_platform.strict import Strict

# The single-file form of annotation tasks, in the annotations folder beside the exports (never read as one).
TASKS_FILE_NAMES = frozenset({"tasks.yaml", "tasks.yml"})
Schema = Literal["classification", "rating", "ranking", "text"]
# Schemas whose labels can be compared between annotators (agreement, consensus); `text` is free text.
COMPARABLE_SCHEMAS = ("classification", "rating", "ranking")


class CriterionSpec(Strict):
    """One labelled criterion of a task."""

    # `schema` would shadow a BaseModel attribute, hence the alias
    schema_: Schema = Field("classification", alias="schema")
    description: str | None = None
    # classification: the allowed labels, or label -> value (the value lands in the `value` column)
    labels: list[str] | dict[str, float] | None = None
    # rating: the inclusive range (either bound may be open)
    min: float | None = None
    max: float | None = None
    # ranking: the candidates a ranking must order, each exactly once
    candidates: list[str] | None = None

    @field_validator("labels", mode="before")
    @classmethod
    def _labels_as_text(cls, value):
        if isinstance(value, list):
            return [_label_text(v) for v in value]
        if isinstance(value, dict):
            return {_label_text(k): v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _fits_the_schema(self) -> CriterionSpec:
        misplaced = {
            "classification": ("min", "max", "candidates"),
            "rating": ("labels", "candidates"),
            "ranking": ("labels", "min", "max"),
            "text": ("labels", "min", "max", "candidates"),
        }[self.schema_]
        for name in misplaced:
            if getattr(self, name) is not None:
                raise ValueError(f"'{name}' does not apply to schema '{self.schema_}'")
        if self.min is not None and self.max is not None and not self.min <= self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        if self.labels is not None and not self.labels:
            raise ValueError("'labels' is empty: list the allowed labels, or leave it out to allow any")
        if self.candidates is not None and len(set(self.candidates)) != len(self.candidates):
            raise ValueError("'candidates' lists a candidate twice")
        return self

    @property
    def allowed(self) -> list[str] | None:
        return None if self.labels is None else list(self.labels)

    def label_value(self, label: str) -> float | None:
        return self.labels.get(label) if isinstance(self.labels, dict) else None


class TaskSpec(Strict):
    description: str | None = None
    criteria: dict[str, CriterionSpec]

    @field_validator("criteria")
    @classmethod
    def _some_criteria(cls, value):
        if not value:
            raise ValueError("a task needs at least one criterion")
        return value


@dataclass(frozen=True)
class DeclaredTasks:
    """What the annotation tasks declare about the labels `human_annotations` imports, as
    `annotation.config.load_annotation_tasks` read them (`AnnotationTasks.declared()`). The default declares
    nothing: every task is accepted and its schemas inferred."""

    # The tasks of the single file (`annotations/tasks.yaml`). None when there is none: a task no task file declares
    # is then accepted and its schemas inferred; with the file, such a task is `unknown_task`.
    tasks_file: Mapping[str, TaskSpec] | None = None
    # that file, relative to the data root (the asset's metadata)
    tasks_file_path: str | None = None
    # The criteria of each task file (`annotation_tasks/<name>.yaml`), by task: for its task, over the single file.
    task_files: Mapping[str, TaskSpec] = field(default_factory=dict)


def _label_text(value) -> str:
    """YAML keys and list items may be numbers (`0: tie`); labels compare as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)
