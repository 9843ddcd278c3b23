"""Annotation tasks, read by one loader (`load_annotation_tasks`) from the data root in either of two forms, each
validated like the other config files (pydantic, `extra="forbid"`, an `AnnotationTaskError` naming the file and the
field). Both declare criteria with one model (`ingest.annotation_criteria.CriterionSpec`).

The folder form (preferred), `annotation_tasks/<name>.yaml`, one task a file: what people label, and which items
they get (exported to Label Studio, pulled back into `human_annotations`):

    name: helpfulness_review            # optional: the file's stem when absent
    description: Are the answers helpful?
    source:                             # exactly one of traces / dataset
      traces:
        days: [2026-11-09, 2026-11-10]  # or from: 2026-11-09 and to: 2026-11-15 (both inclusive)
        evaluators: [helpfulness]       # only traces these evaluators judged (every trace of the days: none)
      # dataset: {name: gsm8k, version: latest}   # version: N (v<N>), latest, or a sha256 prefix of the file
    instructions: |
      Read the question and the answer. Is the answer helpful?
    criteria:
      helpful: {schema: classification, labels: {"yes": 1, "no": 0}}
      clarity: {schema: rating, min: 1, max: 5}
      comment: {schema: text}           # free text: collected, never compared nor made ground truth
    annotations_per_item: 3             # N annotators per item (default 1)
    sampling:
      method: stratified                # random (default) | stratified | disagreement
      field: metadata.route             # stratified: a column (project_id, model, ...) or metadata.<key>
      seed: 7                           # the same seed picks the same items (default 0)
    size: 40                            # items to annotate
    consensus_threshold: 0.66           # 0.5 < t <= 1: share of an item's annotators who must agree

The single-file form, `annotations/tasks.yaml` (or `.yml`) beside the exports of a labelling tool: the criteria
only of any number of tasks whose labels arrive as those exports (nothing is sampled or sent to Label Studio):

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
          best_summary: {schema: ranking, candidates: [A, B, C]}
          comment: {schema: text}               # free text: kept, never compared nor made ground truth

`human_annotations` checks imported labels against both (`AnnotationTasks.declared()`): a task file's criteria for
its task, over the single file's. The single file is optional: without it a task no task file declares is accepted
and each label's schema inferred; with it, rows of an undeclared task or criterion are quarantined. A broken single
file fails that import rather than guess.

With the loaded evaluators, the evaluators a traces source names must exist and judge one whole trace per row (their
verdicts say nothing about an item otherwise); with `check_datasets`, a dataset source's dataset must be declared
under the data root. `disagreement` needs a traces source (the judges' verdicts are on traces) and at least one
evaluator.

`config_hash` changes exactly when the items chosen or what annotators are asked changes (source, sampling, size,
instructions, criteria); description, `annotations_per_item` and `consensus_threshold` leave it unchanged, so
raising N or the threshold keeps the annotations already made comparable.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from eval_platform.config_files import load_folder, read_mapping, validate
from eval_platform.ingest.annotation_criteria import (
    COMPARABLE_SCHEMAS,
    TASKS_FILE_NAMES,
    CriterionSpec,
    DeclaredTasks,
    TaskSpec,
)
from eval_platform.ingest.annotations import FOLDER as ANNOTATIONS_FOLDER
from eval_platform.ingest.datasets import dataset_versions, version_sha256
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.loading import whole_trace_evaluator
from eval_platform.record_fields import METADATA_PREFIX
from eval_platform.schemas import TEST_CASE_SCHEMA, TRACE_SCHEMA
from eval_platform.strict import Strict

FOLDER = "annotation_tasks"  # the folder form; the single file is `annotations/tasks.yaml`
LATEST = "latest"
# A sha256 prefix naming a dataset version by its content: at least 8 hex digits (benchmarks print 12).
_HASH_RE = re.compile(r"^[0-9a-f]{8,64}$")
# How many days a `from`/`to` range may span: a typo in a year should not list decades of days.
MAX_RANGE_DAYS = 366


class AnnotationTaskError(ValueError):
    """A broken annotation task file (`annotation_tasks/<name>.yaml` or `annotations/tasks.yaml`): the message
    names the file and the field."""


class TraceSource(Strict):
    """Traces of some UTC days (a list, or an inclusive from/to range), optionally only those named evaluators
    judged (a COMPLETED, FAILED or SKIPPED row of theirs: what was judged, not what was concluded)."""

    model_config = ConfigDict(populate_by_name=True)  # `from_=` in code, `from:` in the file

    days: list[date] | None = None
    from_: date | None = Field(None, alias="from")
    to: date | None = None
    evaluators: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_way_to_name_days(self) -> TraceSource:
        ranged = self.from_ is not None or self.to is not None
        if (self.days is None) == (not ranged):
            raise ValueError("give either 'days' (a list) or 'from' and 'to' (an inclusive range), not both")
        if self.days is not None and not self.days:
            raise ValueError("'days' is empty: list at least one day (YYYY-MM-DD)")
        if ranged:
            if self.from_ is None or self.to is None:
                raise ValueError("a range needs both 'from' and 'to' (YYYY-MM-DD, inclusive)")
            if self.from_ > self.to:
                raise ValueError(f"'from' {self.from_} is after 'to' {self.to}")
            if (self.to - self.from_).days >= MAX_RANGE_DAYS:
                raise ValueError(f"the range spans more than {MAX_RANGE_DAYS} days; split the task or list days")
        if len(set(self.evaluators)) != len(self.evaluators):
            raise ValueError("'evaluators' lists an evaluator twice")
        return self

    def day_keys(self) -> list[str]:
        """The days, as the `traces` partition keys (YYYY-MM-DD), sorted and distinct."""
        if self.days is not None:
            return sorted({d.isoformat() for d in self.days})
        assert self.from_ is not None and self.to is not None  # `_one_way_to_name_days`: no 'days', both ends
        span = (self.to - self.from_).days
        return [(self.from_ + timedelta(days=i)).isoformat() for i in range(span + 1)]


class DatasetSource(Strict):
    """A dataset version (`test_cases` of `<name>@v<N>`): `version` is N, `latest`, or a sha256 prefix of the
    version's file (the content: the task keeps pointing at what was annotated even if files are renumbered)."""

    name: str = Field(min_length=1)
    version: int | str = LATEST

    @field_validator("version")
    @classmethod
    def _known_form(cls, value):
        if isinstance(value, int):
            if value < 1:
                raise ValueError(f"version {value}: versions are v1, v2, ... (a positive number)")
            return value
        if value == LATEST or _HASH_RE.match(value):
            return value
        raise ValueError(f"version {value!r} is not a number, 'latest' or a sha256 prefix (>= 8 lower-case hex)")


class Source(Strict):
    traces: TraceSource | None = None
    dataset: DatasetSource | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Source:
        if (self.traces is None) == (self.dataset is None):
            raise ValueError("give exactly one of 'traces' or 'dataset'")
        return self


class Sampling(Strict):
    """How the items are chosen (`annotation.sampling`)."""

    method: Literal["random", "stratified", "disagreement"] = "random"
    field: str | None = Field(None, min_length=1)  # stratified only
    seed: int = 0
    # disagreement only: the human annotations whose past agreement with the judges counts (default: this task,
    # and its only comparable criterion)
    human_task: str | None = None
    human_criterion: str | None = None
    # disagreement only: a judge's score bin needs this many past items with a human label to count
    min_history: int = Field(5, ge=1)

    @model_validator(mode="after")
    def _fits_the_method(self) -> Sampling:
        if self.method == "stratified" and self.field is None:
            raise ValueError("stratified sampling needs 'field' (a column such as project_id, or metadata.<key>)")
        if self.method != "stratified" and self.field is not None:
            raise ValueError(f"'field' applies to stratified sampling only, not '{self.method}'")
        if self.method != "disagreement":
            extra = [k for k in ("human_task", "human_criterion") if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"'{extra[0]}' applies to disagreement sampling only")
        return self


class AnnotationTaskConfig(Strict):
    """One annotation task: its source, what annotators are asked, how many items and annotations."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    source: Source
    instructions: str = Field(min_length=1)
    criteria: dict[str, CriterionSpec]
    annotations_per_item: int = Field(1, ge=1, le=100)
    sampling: Sampling = Field(default_factory=Sampling)
    size: int = Field(ge=1, le=1_000_000)
    consensus_threshold: float = Field(2 / 3, gt=0.5, le=1)

    @field_validator("instructions")
    @classmethod
    def _instructions_say_something(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("'instructions' is blank: say what annotators should do")
        return value

    @field_validator("criteria")
    @classmethod
    def _some_criteria(cls, value):
        if not value:
            raise ValueError("a task needs at least one criterion")
        return value

    @field_validator("sampling")
    @classmethod
    def _sampling_fits_the_source(cls, sampling: Sampling, info: ValidationInfo) -> Sampling:
        # a field validator (fields before `sampling` are validated by now), so that an error names the field
        source, criteria = info.data.get("source"), info.data.get("criteria")
        if sampling.method == "stratified" and source is not None:
            columns = TRACE_SCHEMA if source.traces is not None else TEST_CASE_SCHEMA
            named = sampling.field
            assert named is not None  # `Sampling._fits_the_method`: stratified sampling names its field
            if not (named.startswith(METADATA_PREFIX) and len(named) > len(METADATA_PREFIX)) and named not in columns:
                kind = "trace" if source.traces is not None else "test case"
                raise ValueError(
                    f"field '{named}' is neither a {kind} column ({', '.join(columns)}) nor metadata.<key>"
                )
        if sampling.method != "disagreement" or source is None:
            return sampling
        if source.traces is None:
            raise ValueError("disagreement sampling needs a traces source: judges judge traces, not dataset cases")
        if not source.traces.evaluators:
            raise ValueError("disagreement sampling needs 'source.traces.evaluators', the judges it compares")
        if sampling.human_criterion is not None and sampling.human_task in (None, info.data.get("name")):
            if criteria is not None and sampling.human_criterion not in criteria:
                raise ValueError(
                    f"human_criterion '{sampling.human_criterion}' is not a criterion of this task "
                    f"({', '.join(sorted(criteria))})"
                )
        return sampling

    @property
    def comparable_criteria(self) -> list[str]:
        """The criteria whose labels can agree or not (every schema but free text), in file order."""
        return [name for name, spec in self.criteria.items() if spec.schema_ in COMPARABLE_SCHEMAS]

    def human_history(self) -> tuple[str, str | None]:
        """(task, criterion) of the human annotations `disagreement` compares past judge verdicts with: as
        configured, else this task and its only comparable criterion (None: every criterion of that task)."""
        task = self.sampling.human_task or self.name
        criterion = self.sampling.human_criterion
        if criterion is None and task == self.name and len(self.comparable_criteria) == 1:
            criterion = self.comparable_criteria[0]
        return task, criterion

    def task_spec(self) -> TaskSpec:
        """The task as `annotations/tasks.yaml` declares one: what validates the labels pulled back into
        `human_annotations` (one criterion model for both)."""
        return TaskSpec(description=self.description or None, criteria=self.criteria)

    @property
    def config_hash(self) -> str:
        """Changes exactly when the items chosen or what annotators are asked changes (see the module doc)."""
        content = self.model_dump(
            mode="json", by_alias=True, include={"source", "sampling", "size", "instructions", "criteria"}
        )
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


# ---- loading ---------------------------------------------------------------------------------------------


class TasksFile(Strict):
    """The single-file form (`annotations/tasks.yaml`): task name -> its criteria."""

    tasks: dict[str, TaskSpec]


@dataclass(frozen=True)
class AnnotationTasks:
    """The annotation tasks of a data root, in both forms (`load_annotation_tasks`)."""

    root: Path
    # the folder form (`annotation_tasks/<name>.yaml`), by task name, sorted
    files: dict[str, AnnotationTaskConfig]
    # the single-file form (`annotations/tasks.yaml`) when there is one, and its tasks (None when it did not load)
    tasks_file_path: Path | None = None
    tasks_file: dict[str, TaskSpec] | None = None
    # the single file's error (naming the file and the field), when it did not load and `broken` was given
    tasks_file_error: str | None = None

    def declared(self) -> DeclaredTasks:
        """What both forms declare about the labels `human_annotations` imports. `AnnotationTaskError` when the
        single file is broken: labels are never checked against a guess."""
        if self.tasks_file_error is not None:
            raise AnnotationTaskError(self.tasks_file_error)
        path = self.tasks_file_path
        return DeclaredTasks(
            tasks_file=self.tasks_file,
            tasks_file_path=None if path is None else path.relative_to(self.root).as_posix(),
            task_files={name: config.task_spec() for name, config in self.files.items()},
        )


def load_annotation_tasks(
    data_root: Path,
    evaluators: dict[str, EvaluatorConfig] | None = None,
    *,
    check_datasets: bool = False,
    broken: dict[str, str] | None = None,
) -> AnnotationTasks:
    """Every annotation task under `data_root`, in both forms (the module doc). A missing folder or file has none.
    A broken file raises `AnnotationTaskError` naming the file and the field, unless `broken` is given: then a
    task file's error is recorded there (by file name, and in the code location's log) and the other files load,
    and the single file's is kept for `declared()` to raise. Two task files naming the same task are both an error,
    since one could silently replace the other. With `evaluators` (the loaded ones), the evaluators a task file
    names are checked against them; with `check_datasets`, its dataset against the data root's datasets."""
    root = Path(data_root)
    dataset_root = root if check_datasets else None
    files = load_folder(
        root / FOLDER,
        lambda path: _task_file(path, evaluators, dataset_root),
        AnnotationTaskError,
        "task",
        broken,
    )
    path, tasks_file, error = _tasks_file(root / ANNOTATIONS_FOLDER, raises=broken is None)
    return AnnotationTasks(root, dict(sorted(files.items())), path, tasks_file, error)


def _task_file(
    path: Path, evaluators: dict[str, EvaluatorConfig] | None, data_root: Path | None
) -> AnnotationTaskConfig:
    """One task file; with `evaluators` (the loaded ones) and `data_root`, what it names is checked too."""
    raw = read_mapping(path, AnnotationTaskError, "a mapping of annotation task fields")
    raw.setdefault("name", path.stem)
    config = validate(path, AnnotationTaskConfig, raw, AnnotationTaskError)
    if evaluators is not None:
        _check_evaluators(path, config, evaluators)
    if data_root is not None and config.source.dataset is not None:
        resolve_dataset_version(data_root, config.source.dataset, path)
    return config


def _tasks_file(folder: Path, *, raises: bool) -> tuple[Path | None, dict[str, TaskSpec] | None, str | None]:
    """(the single file, its tasks, its error): the first of `tasks.yaml`, `tasks.yml` in the annotations folder."""
    for name in sorted(TASKS_FILE_NAMES):
        path = folder / name
        if path.is_file():
            try:
                raw = read_mapping(path, AnnotationTaskError, "a mapping with a 'tasks' key")
                return path, validate(path, TasksFile, raw, AnnotationTaskError).tasks, None
            except AnnotationTaskError as error:
                if raises:
                    raise
                return path, None, str(error)
    return None, None, None


def _check_evaluators(path: Path, config: AnnotationTaskConfig, evaluators: dict[str, EvaluatorConfig]) -> None:
    if config.source.traces is None:
        return
    for i, name in enumerate(config.source.traces.evaluators):
        where = f"{path}: field 'source.traces.evaluators.{i}'"
        whole_trace_evaluator(evaluators, name, where, AnnotationTaskError, "pick traces to annotate")


def resolve_dataset_version(data_root: Path, source: DatasetSource, path: Path | None = None) -> tuple[int, str]:
    """(version N, sha256 of its file) of a dataset source; `AnnotationTaskError` naming the file and field when
    the dataset or version is not declared under the data root, or a hash prefix matches none or several."""
    where = f"{path}: " if path is not None else ""
    versions = dataset_versions(Path(data_root), source.name)
    if not versions:
        raise AnnotationTaskError(
            f"{where}field 'source.dataset.name': unknown dataset '{source.name}' "
            f"(no datasets/{source.name}/v<N>.<ext> under {data_root})"
        )
    if source.version == LATEST:
        version = max(versions)
    elif isinstance(source.version, int):
        if source.version not in versions:
            raise AnnotationTaskError(
                f"{where}field 'source.dataset.version': dataset '{source.name}' has no version {source.version}; "
                f"declared: {sorted(versions)}"
            )
        version = source.version
    else:
        matches = {n: digest for n, p in versions.items() if (digest := version_sha256(p)).startswith(source.version)}
        if len(matches) != 1:
            found = "no version" if not matches else f"versions {sorted(matches)}"
            raise AnnotationTaskError(
                f"{where}field 'source.dataset.version': {found} of dataset '{source.name}' has a file whose sha256 "
                f"starts with {source.version}"
            )
        [(version, digest)] = matches.items()
        return version, digest
    return version, version_sha256(versions[version])
