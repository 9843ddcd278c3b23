"""An annotation task file (`data/annotation_tasks/<name>.yaml`): what people label, and which items they get.

    name: helpfulness_review            # optional: the file's stem when absent
    description: Are the answers helpful?
    source:                             # exactly one of traces / dataset
      traces:
        days: [2026-11-09, 2026-11-10]  # or from: 2026-11-09 and to: 2026-11-15 (both inclusive)
        evaluators: [helpfulness]       # only traces these evaluators judged (every trace of the days: none)
      # dataset: {name: gsm8k, version: latest}   # version: N (v<N>), latest, or a sha256 prefix of the file
    instructions: |
      Read the question and the answer. Is the answer helpful?
    criteria:                           # as in annotations/tasks.yaml (`ingest.annotation_tasks.CriterionSpec`)
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

Validated like the other config files (pydantic, `extra="forbid"`, errors naming the file and the field). With
the loaded evaluators, the evaluators a traces source names must exist and judge one whole trace per row (their
verdicts say nothing about an item otherwise); with the data root, a dataset source's dataset must be declared.
`disagreement` needs a traces source (the judges' verdicts are on traces) and at least one evaluator.

`config_hash` changes exactly when the items chosen or what annotators are asked changes (source, sampling, size,
instructions, criteria); description, `annotations_per_item` and `consensus_threshold` leave it unchanged, so
raising N or the threshold keeps the annotations already made comparable.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import date, timedelta
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from eval_platform.config_files import load_folder, read_mapping, validate
from eval_platform.ingest.annotation_tasks import COMPARABLE_SCHEMAS, AnnotationTaskError, CriterionSpec, TaskSpec
from eval_platform.ingest.datasets import dataset_versions, version_sha256
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.loading import whole_trace_evaluator
from eval_platform.record_fields import METADATA_PREFIX
from eval_platform.schemas import TEST_CASE_SCHEMA, TRACE_SCHEMA
from eval_platform.strict import Strict

FOLDER = "annotation_tasks"
LATEST = "latest"
# A sha256 prefix naming a dataset version by its content: at least 8 hex digits (benchmarks print 12).
_HASH_RE = re.compile(r"^[0-9a-f]{8,64}$")
# How many days a `from`/`to` range may span: a typo in a year should not list decades of days.
MAX_RANGE_DAYS = 366


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


def load_annotation_task(
    path: Path, evaluators: dict[str, EvaluatorConfig] | None = None, data_root: Path | None = None
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


def load_annotation_tasks(
    folder: Path,
    evaluators: dict[str, EvaluatorConfig] | None = None,
    data_root: Path | None = None,
    broken: dict[str, str] | None = None,
) -> dict[str, AnnotationTaskConfig]:
    """Every task file in a folder (`data/annotation_tasks/*.yaml`), by task name, sorted. A missing folder has
    none. A broken file raises unless `broken` collects its error (by file name, and in the code location's log);
    two files naming the same task are both an error, since one could silently replace the other."""
    tasks = load_folder(
        folder, lambda path: load_annotation_task(path, evaluators, data_root), AnnotationTaskError, "task", broken
    )
    return dict(sorted(tasks.items()))


def task_specs(data_root: Path) -> dict[str, TaskSpec]:
    """The criteria of each annotation task file (`annotation_tasks/*.yaml`), by task: what `human_annotations`
    checks the labels pulled back from a labelling tool against (`ingest.annotations.read_annotations`'s
    `task_files`). For its task such a file is authoritative over tasks.yaml; a task with no such file follows
    tasks.yaml (or is accepted as inferred when there is none). A broken task file declares nothing: its rows are
    then checked as any other rows, and the file's error is shown where the task files are loaded."""
    return {name: config.task_spec() for name, config in load_annotation_tasks(data_root / FOLDER, broken={}).items()}


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
