"""Suite files `data/benchmarks/<suite>.yaml`: tasks, their datasets, scorers, dependencies and groups.

Validated like the evaluator files: every error names the file and the field. Checks that need more than
one field (unknown dataset or version, a `depends_on` cycle, a gate on a metric its task does not
produce) run after the pydantic model, against the data root's datasets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from eval_platform.config_files import load_named
from eval_platform.judging.templates import TemplateError, parse_template
from eval_platform.scoring import registry


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScorerSpec(_Strict):
    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class Gate(_Strict):
    task: str
    metric: str
    min: float


class Task(_Strict):
    dataset: str
    version: int | Literal["newest"] = "newest"
    prompt: str | None = None
    outputs_from: str | None = None
    scorers: list[ScorerSpec] = Field(min_length=1)
    samples: int = Field(default=1, ge=1, le=10)
    weight: float = Field(default=1.0, gt=0)
    depends_on: list[str] = Field(default_factory=list)
    gate: Gate | None = None
    max_failed_rate: float = Field(default=0.1, ge=0, le=1)

    @model_validator(mode="after")
    def _one_source_of_outputs(self) -> Task:
        if (self.prompt is None) == (self.outputs_from is None):
            raise ValueError("give exactly one of 'prompt' (a template over the case's fields) or 'outputs_from'")
        return self


class Group(_Strict):
    tasks: list[str] = Field(min_length=1)
    aggregate: Literal["macro", "micro"] = "macro"


class Suite(_Strict):
    name: str
    description: str = ""
    tasks: dict[str, Task] = Field(min_length=1)
    groups: dict[str, Group] = Field(default_factory=dict)


CASE_FIELDS = {"input", "expected_output", "metadata", "case_id"}


def load_suite(path: Path, data_root: Path) -> Suite:
    """The validated suite in `path`; `SuiteError` naming the file and field otherwise."""
    suite = load_named(path, Suite, SuiteError, "suite")
    for task_name, task in suite.tasks.items():
        where = f"{path}: field 'tasks.{task_name}"
        for index, spec in enumerate(task.scorers):
            if spec.name not in registry.SCORERS:
                raise SuiteError(f"{where}.scorers.{index}.name': unknown scorer '{spec.name}'; known: {sorted(registry.SCORERS)}")
            try:
                registry.SCORERS[spec.name].options(**spec.options)
            except ValueError as exc:
                raise SuiteError(f"{where}.scorers.{index}.options': {exc}") from None
        if task.prompt is not None:
            try:
                parse_template(task.prompt, CASE_FIELDS)
            except TemplateError as exc:
                raise SuiteError(f"{where}.prompt': {exc}") from None
        _check_dataset(path, task_name, task, data_root)
        for dependency in [*task.depends_on, *([task.gate.task] if task.gate else [])]:
            if dependency not in suite.tasks:
                raise SuiteError(f"{where}.depends_on': unknown task '{dependency}'")
        if task.gate and task.gate.metric not in metrics_of(suite.tasks[task.gate.task]):
            raise SuiteError(
                f"{where}.gate.metric': task '{task.gate.task}' does not produce '{task.gate.metric}'; "
                f"it produces {sorted(metrics_of(suite.tasks[task.gate.task]))}"
            )
    for group_name, group in suite.groups.items():
        unknown = [name for name in group.tasks if name not in suite.tasks]
        if unknown:
            raise SuiteError(f"{path}: field 'groups.{group_name}.tasks': unknown task(s) {unknown}")
    cycle = find_cycle(upstream(suite))
    if cycle:
        raise SuiteError(f"{path}: field 'tasks': depends_on cycle {' -> '.join(cycle)}")
    return suite


def metrics_of(task: Task) -> set[str]:
    """The metrics a task produces: one per scorer."""
    return {spec.name for spec in task.scorers}


def upstream(suite: Suite) -> dict[str, list[str]]:
    """Each task's upstream tasks: those it depends on and the one gating it."""
    return {
        name: sorted({*task.depends_on, *([task.gate.task] if task.gate else [])}) for name, task in suite.tasks.items()
    }


def find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """A dependency cycle as a path that starts and ends on the same task, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


_VERSION = re.compile(r"^v(\d+)\.(csv|json|jsonl|parquet)$")


def dataset_versions(data_root: Path, dataset: str) -> dict[int, Path]:
    """The versions of a dataset under `datasets/<dataset>/`, as `dataset_versions` lays them out."""
    folder = data_root / "datasets" / dataset
    found = {}
    for path in sorted(folder.glob("v*")) if folder.is_dir() else []:
        if match := _VERSION.match(path.name):
            found[int(match.group(1))] = path
    return found


def _check_dataset(path: Path, task_name: str, task: Task, data_root: Path) -> None:
    versions = dataset_versions(data_root, task.dataset)
    if not versions:
        raise SuiteError(f"{path}: field 'tasks.{task_name}.dataset': unknown dataset '{task.dataset}' (no datasets/{task.dataset}/v<N>.<ext>)")
    if task.version != "newest" and task.version not in versions:
        raise SuiteError(
            f"{path}: field 'tasks.{task_name}.version': dataset '{task.dataset}' has no version {task.version}; it has {sorted(versions)}"
        )


def load_suites(folder: Path, data_root: Path) -> tuple[dict[str, Suite], dict[str, str]]:
    """Every suite in `folder` that loads, and an error message per file that does not (one bad file never hides the others)."""
    suites, errors = {}, {}
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        if path.stem == "models":
            continue
        try:
            suites[path.stem] = load_suite(path, data_root)
        except SuiteError as exc:
            errors[path.stem] = str(exc)
    return suites, errors
