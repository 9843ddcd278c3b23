"""Annotation tasks (`annotations/tasks.yaml`): which criteria a task labels, their schema and allowed labels.

    tasks:
      pandalm_pairwise:
        description: Which of two responses to an instruction is better.
        criteria:
          preference:
            schema: classification              # classification | rating | ranking | text
            labels: {"0": 0, "1": 1, "2": 2}    # allowed labels; a mapping also gives each label's value
            description: 0 tie, 1 response1 better, 2 response2 better
      summary_quality:
        criteria:
          relevance: {schema: rating, min: 1, max: 5}
          fluency:   {schema: rating, min: 1, max: 5}
          best_summary: {schema: ranking, candidates: [A, B, C]}
          comment: {schema: text}               # free text: kept, never compared nor made ground truth

The file is optional. Without it every task is accepted and each label's schema is inferred (see
`annotations.py`). With it, rows of an undeclared task or criterion are quarantined, and labels are checked
against the declared set or range. A broken file is an error naming the file and the field, like a broken
evaluator file: the asset fails rather than guess.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from eval_platform.config_files import read_mapping, validate
from eval_platform.strict import Strict

TASKS_FILE_NAMES = frozenset({"tasks.yaml", "tasks.yml"})
Schema = Literal["classification", "rating", "ranking", "text"]
# Schemas whose labels can be compared between annotators (agreement, consensus); `text` is free text.
COMPARABLE_SCHEMAS = ("classification", "rating", "ranking")


class AnnotationTaskError(ValueError):
    """A broken annotation task file (`annotations/tasks.yaml` or `annotation_tasks/<name>.yaml`): the message
    names the file and the field."""


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


class AnnotationTasks(Strict):
    tasks: dict[str, TaskSpec]


def _label_text(value) -> str:
    """YAML keys and list items may be numbers (`0: tie`); labels compare as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def load_tasks_yaml(annotations_dir: Path) -> tuple[Path | None, AnnotationTasks | None]:
    """The tasks file directly in the annotations folder and its validated content, or (None, None); a broken file
    is an `AnnotationTaskError` naming the file and the field. (The annotation task files of
    `annotation_tasks/*.yaml` load with `eval_platform.annotation.config.load_annotation_tasks`.)"""
    for name in sorted(TASKS_FILE_NAMES):
        path = annotations_dir / name
        if path.is_file():
            raw = read_mapping(path, AnnotationTaskError, "a mapping with a 'tasks' key")
            return path, validate(path, AnnotationTasks, raw, AnnotationTaskError)
    return None, None
