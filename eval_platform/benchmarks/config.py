"""Suite files `data/benchmarks/<suite>.yaml`: tasks, their datasets, scorers, dependencies and groups.

Validated like the evaluator files: every error names the file and the field. Checks that need more than
one field (unknown dataset or version, a `depends_on` cycle, a gate on a metric its task does not
produce) run after the pydantic model, against the data root's datasets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from eval_platform.config_files import load_folder, load_named, read_mapping, record_broken, validate
from eval_platform.ingest.datasets import dataset_versions
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.models import ModelSpec
from eval_platform.judging.modes import MODES
from eval_platform.judging.templates import TemplateError, parse_template
from eval_platform.scoring import registry
from eval_platform.strict import Strict


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the file and the field."""


class ScorerSpec(Strict):
    name: str
    options: dict[str, Any] = Field(default_factory=dict)
    metric: str | None = None  # the metric's name in results (default: the scorer's), to use one scorer twice

    @property
    def metric_name(self) -> str:
        return self.metric or self.name


class Gate(Strict):
    task: str
    metric: str
    min: float


# The judge modes a model under test can be benchmarked in: those that say how their verdict meets a gold one.
JUDGE_MODES = tuple(name for name, mode in MODES.items() if mode.as_judge is not None)


class JudgeAs(Strict):
    """The model under test acting as a judge: an evaluator's fields (all but `name` and `model`), and the
    case fields it is shown: the two candidates (`pair`, pairwise judges) or the one response it rates
    (`output`: score, binary and categorical judges), and optionally a reference answer as {{expected}}.
    Its prompts are built, and its replies parsed, by that judge mode's own code, exactly as `judge_scores`
    builds and parses them. The case's `expected_output` is the gold verdict: the judge never sees it."""

    evaluator: dict[str, Any]
    pair: tuple[str, str] = ("metadata.output_1", "metadata.output_2")
    output: str = "metadata.output"
    reference: str | None = None  # the case field shown as {{expected}} (a reference answer), none by default

    @property
    def mode(self) -> str:
        return self.evaluator.get("mode", "score")

    @property
    def pairwise(self) -> bool:
        """The judge compares two candidates (shown in both orders), rather than rating one response."""
        return self.mode in MODES and MODES[self.mode].unit == "pair"

    def shown_fields(self) -> tuple[str, ...]:
        """The case fields the judge's prompt needs (a case without one is FAILED missing_field)."""
        return tuple(self.pair) if self.pairwise else (self.output,)

    def config(self, name: str, model: str) -> EvaluatorConfig:
        return EvaluatorConfig(name=name, model=model, **self.evaluator)


class Task(Strict):
    dataset: str
    version: int | Literal["newest"] = "newest"
    prompt: str | None = None
    system: str | None = None
    outputs_from: str | None = None
    outputs_of: str | None = None
    as_judge: JudgeAs | None = None
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=512, ge=1)
    scorers: list[ScorerSpec] = Field(min_length=1)
    samples: int = Field(default=1, ge=1, le=10)
    # The k of the pass@k / pass^k rows, each at most `samples` (default: k = samples when samples > 1).
    pass_at: list[int] | None = Field(default=None, min_length=1)
    weight: float = Field(default=1.0, gt=0)
    depends_on: list[str] = Field(default_factory=list)
    gate: Gate | None = None
    max_failed_rate: float = Field(default=0.1, ge=0, le=1)

    @model_validator(mode="after")
    def _one_source_of_outputs(self) -> Task:
        sources = [self.prompt, self.outputs_from, self.outputs_of, self.as_judge]
        if sum(source is not None for source in sources) != 1:
            raise ValueError(
                "give exactly one of 'prompt' (a template over the case's fields), 'outputs_from' (a case field "
                "holding recorded outputs), 'outputs_of' (another task's outputs) or 'as_judge'"
            )
        return self

    @field_validator("pass_at")
    @classmethod
    def _pass_at_within_samples(cls, pass_at: list[int] | None, info: ValidationInfo) -> list[int] | None:
        samples = info.data.get("samples")
        if pass_at is None or samples is None:  # no samples: its own error is reported
            return pass_at
        for k in pass_at:
            if not 1 <= k <= samples:
                raise ValueError(
                    f"each k must be between 1 and the task's samples ({samples}), got {k}; "
                    "raise 'samples' to estimate a larger k"
                )
        if len(set(pass_at)) != len(pass_at):
            raise ValueError(f"each k once, got {pass_at}")
        return pass_at

    @property
    def ks(self) -> list[int]:
        """The k of the task's pass@k / pass^k rows, ascending: `pass_at`, or k = samples when samples > 1."""
        if self.pass_at is not None:
            return sorted(self.pass_at)
        return [self.samples] if self.samples > 1 else []

    @property
    def calls_model(self) -> bool:
        """Whether the task calls the model under test (else its outputs exist already)."""
        return self.prompt is not None or self.as_judge is not None


class Group(Strict):
    tasks: list[str] = Field(min_length=1)
    aggregate: Literal["macro", "micro"] = "macro"


class Suite(Strict):
    name: str
    description: str = ""
    tasks: dict[str, Task] = Field(min_length=1)
    groups: dict[str, Group] = Field(default_factory=dict)


CASE_FIELDS = {"input", "expected_output", "metadata", "case_id"}
# The placeholder model an `as_judge` evaluator is validated with; each model under test replaces it.
UNDER_TEST = "benchmark/model-under-test"


class ModelUnderTest(ModelSpec):
    """One entry of `models.yaml`: a litellm model string (or `local/<name>`, served by the local judge),
    its key's environment variable, prices; optionally the only tasks it runs (`<suite>.<task>` or `<suite>`)."""

    only: list[str] | None = None
    # Spend limits on this model's calls (UTC day / month, all suites and tasks together), as evaluators have.
    max_daily_cost_usd: float | None = Field(None, ge=0)
    max_monthly_cost_usd: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _budget_needs_a_price(self) -> ModelUnderTest:
        if self.budgeted and not self.has_price():
            raise ValueError(
                f"model '{self.model}' has no known price in litellm's price map, so a budget cannot be "
                "enforced; set input_cost_per_million and output_cost_per_million"
            )
        return self

    @property
    def budgeted(self) -> bool:
        return self.max_daily_cost_usd is not None or self.max_monthly_cost_usd is not None

    def runs(self, suite: str, task: str) -> bool:
        return self.only is None or suite in self.only or f"{suite}.{task}" in self.only


class ModelsFile(Strict):
    models: dict[str, ModelUnderTest] = Field(min_length=1)


class _ModelEntries(Strict):
    """The file's shape only; each entry is validated on its own, so one bad entry breaks only itself."""

    models: dict[Any, Any] = Field(min_length=1)


_PARTITION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$")


def load_models(path: Path, broken: dict[str, str] | None = None) -> dict[str, ModelUnderTest]:
    """`models.yaml`: partition key -> model under test. Errors name the file and the field.

    A bad entry raises, unless `broken` is given: then its error is recorded there (by the model's name) and the
    other entries load. A file that is not a mapping with `models` raises either way (there is no entry to keep).
    """
    if not path.exists():
        return {}
    entries = validate(path, _ModelEntries, read_mapping(path, SuiteError, "a mapping with 'models'"), SuiteError)
    models: dict[str, ModelUnderTest] = {}
    for key, entry in entries.models.items():
        name = str(key)
        try:
            if not _PARTITION_NAME.match(name):
                raise SuiteError(
                    f"{path}: field 'models.{name}': a model's name is its partition key: "
                    "letters, digits and _.:@+- only"
                )
            models |= validate(path, ModelsFile, {"models": {name: entry}}, SuiteError).models
        except SuiteError as exc:
            if broken is None:
                raise
            record_broken(broken, name, exc, "model under test")
    return models


def load_suite(path: Path, data_root: Path, evaluators: set[str] | None = None) -> Suite:
    """The validated suite in `path`; `SuiteError` naming the file and field otherwise."""
    suite = load_named(path, Suite, SuiteError, "suite")
    for task_name, task in suite.tasks.items():
        where = f"{path}: field 'tasks.{task_name}"
        for index, spec in enumerate(task.scorers):
            if spec.name not in registry.SCORERS:
                raise SuiteError(
                    f"{where}.scorers.{index}.name': unknown scorer '{spec.name}'; known: {sorted(registry.SCORERS)}"
                )
            try:
                registry.SCORERS[spec.name].options(**spec.options)
            except ValueError as exc:
                raise SuiteError(f"{where}.scorers.{index}.options': {exc}") from None
        names = [spec.metric_name for spec in task.scorers]
        if len(set(names)) < len(names):
            raise SuiteError(
                f"{where}.scorers': two scorers give the metric {sorted({n for n in names if names.count(n) > 1})}; "
                "name one with 'metric'"
            )
        for field_name in ("prompt", "system"):
            template = getattr(task, field_name)
            if template is not None:
                try:
                    parse_template(template, CASE_FIELDS)
                except TemplateError as exc:
                    raise SuiteError(f"{where}.{field_name}': {exc}") from None
        if task.as_judge is not None:
            _check_judge(where, task_name, task.as_judge)
        for index, spec in enumerate(task.scorers):
            if (
                registry.SCORERS[spec.name].calls_evaluator
                and evaluators is not None
                and spec.options["evaluator"] not in evaluators
            ):
                raise SuiteError(
                    f"{where}.scorers.{index}.options.evaluator': unknown evaluator '{spec.options['evaluator']}'; "
                    f"known: {sorted(evaluators)}"
                )
            scorer = registry.SCORERS[spec.name]
            if scorer.judge_task and task.as_judge is None:
                raise SuiteError(
                    f"{where}.scorers.{index}.name': scorer '{spec.name}' scores a judge's verdicts: "
                    "the task needs 'as_judge'"
                )
            judged = MODES.get(task.as_judge.mode) if task.as_judge is not None else None
            if scorer.judge_task and (judged is None or judged.as_judge != scorer.judge_gold):
                scored = sorted(name for name, mode in MODES.items() if mode.as_judge == scorer.judge_gold)
                assert task.as_judge is not None  # a judge's scorer without 'as_judge' was refused above
                raise SuiteError(
                    f"{where}.scorers.{index}.name': scorer '{spec.name}' scores {' or '.join(scored)} "
                    f"judges, and this task's judge is {task.as_judge.mode}"
                )
        if task.outputs_from is not None:
            _check_case_field(f"{where}.outputs_from'", task.outputs_from)
        if task.outputs_of is not None and task.outputs_of not in suite.tasks:
            raise SuiteError(f"{where}.outputs_of': unknown task '{task.outputs_of}'")
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


def _check_judge(where: str, task_name: str, judge: JudgeAs) -> None:
    for key in ("name", "model", "models"):
        if key in judge.evaluator:
            raise SuiteError(f"{where}.as_judge.evaluator.{key}': not allowed: the model under test is the judge")
    mode = judge.evaluator.get("mode")
    if mode not in JUDGE_MODES:
        raise SuiteError(
            f"{where}.as_judge.evaluator.mode': judges of mode {', '.join(JUDGE_MODES)} "
            f"can be benchmarked, not {mode!r}"
        )
    try:
        judge.config(task_name, UNDER_TEST)
    except ValidationError as exc:
        problems = "; ".join(
            f"{where}.as_judge.evaluator{''.join(f'.{part}' for part in err['loc'])}': {err['msg']}"
            for err in exc.errors()
        )
        raise SuiteError(problems) from None
    for field_name in judge.shown_fields():
        _check_case_field(f"{where}.as_judge.{'pair' if judge.pairwise else 'output'}'", field_name)
    if judge.reference is not None:
        _check_case_field(f"{where}.as_judge.reference'", judge.reference)
        if judge.reference == "expected_output":
            raise SuiteError(
                f"{where}.as_judge.reference': expected_output is the gold verdict; the judge must not see it"
            )


def _check_case_field(where: str, name: str) -> None:
    base, _, key = name.partition(".")
    if base not in CASE_FIELDS or (base == "metadata") != bool(key):
        raise SuiteError(f"{where}: '{name}' is not a case field (input, expected_output, case_id, metadata.<key>)")


def metrics_of(task: Task) -> set[str]:
    """The metrics a task produces: one per scorer."""
    return {spec.metric_name for spec in task.scorers}


def upstream(suite: Suite) -> dict[str, list[str]]:
    """Each task's upstream tasks: those it depends on, the one gating it and the one whose outputs it scores."""
    return {
        name: sorted(
            {
                *task.depends_on,
                *([task.gate.task] if task.gate else []),
                *([task.outputs_of] if task.outputs_of else []),
            }
        )
        for name, task in suite.tasks.items()
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


def _check_dataset(path: Path, task_name: str, task: Task, data_root: Path) -> None:
    versions = dataset_versions(data_root, task.dataset)
    if not versions:
        raise SuiteError(
            f"{path}: field 'tasks.{task_name}.dataset': unknown dataset '{task.dataset}' "
            f"(no datasets/{task.dataset}/v<N>.<ext>)"
        )
    if task.version != "newest" and task.version not in versions:
        raise SuiteError(
            f"{path}: field 'tasks.{task_name}.version': dataset '{task.dataset}' has no version {task.version}; "
            f"it has {sorted(versions)}"
        )


def load_suites(
    folder: Path, data_root: Path, evaluators: set[str] | None = None
) -> tuple[dict[str, Suite], dict[str, str]]:
    """Every suite in `folder` that loads, and an error message per file that does not (one bad file never
    hides the others)."""
    errors: dict[str, str] = {}
    suites = load_folder(
        folder,
        lambda path: load_suite(path, data_root, evaluators),
        SuiteError,
        "suite",
        errors,
        skip={"models"},  # benchmarks/models.yaml: the models under test (`load_models`)
        broken_key=lambda path: path.stem,
    )
    return suites, errors
