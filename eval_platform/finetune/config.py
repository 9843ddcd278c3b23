"""A fine-tuning export file (`data/finetune_exports/<name>.yaml`): which evaluators' verdicts a trace must pass.

    name: helpful_answers          # the file's stem (filled in when absent)
    description: answers rated helpful and not hallucinated
    evaluators:                    # every one must pass; a trace with no COMPLETED verdict of one is left out
      - {evaluator: helpfulness, min_score: 0.8}
      - {evaluator: hallucination_free, verdict: pass}
    system_prompt: You are ...     # optional: prepended to conversations that have no system message
    include_failed_runs: false     # the default: a trace whose run failed (traces.error) is never training data

Validated like the other config files (pydantic, `extra="forbid"`, errors naming the file and the field). An
evaluator that is not loaded (unknown, broken or disabled), or whose rows judge pairs, groups, spans or sessions
rather than one whole trace, is refused at load time: its verdicts cannot say whether a trace is good.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from eval_platform.config_files import load_folder, load_named
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.loading import whole_trace_evaluator
from eval_platform.strict import Strict


class FinetuneExportError(ValueError):
    """A fine-tuning export file is invalid; the message names the file and the field."""


class Threshold(Strict):
    """One evaluator's verdict a trace must have: a score of at least `min_score`, or `verdict: pass`."""

    evaluator: str
    min_score: float | None = Field(None, ge=0, le=1, description="The final score (0..1) must be at least this.")
    verdict: Literal["pass"] | None = Field(None, description="pass: the final verdict's `passed` must be true.")

    @model_validator(mode="after")
    def _one_rule(self) -> Threshold:
        if (self.min_score is None) == (self.verdict is None):
            raise ValueError(f"evaluator '{self.evaluator}': give exactly one of min_score or verdict: pass")
        return self

    def describe(self) -> str:
        rule = f"score >= {self.min_score:g}" if self.min_score is not None else "passed"
        return f"{self.evaluator}: {rule}"


class FinetuneExport(Strict):
    """One export: the thresholds (all must pass) and how its conversations are written."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    evaluators: list[Threshold] = Field(min_length=1)
    system_prompt: str | None = None
    include_failed_runs: bool = False

    @model_validator(mode="after")
    def _distinct(self) -> FinetuneExport:
        names = [t.evaluator for t in self.evaluators]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"evaluator(s) {repeated} listed twice: one threshold per evaluator")
        return self

    def filter_metadata(self) -> dict:
        """The filter as the materialization's metadata shows it."""
        return {
            "thresholds": [t.model_dump(exclude_none=True) for t in self.evaluators],
            "rule": " AND ".join(t.describe() for t in self.evaluators),
            "include_failed_runs": self.include_failed_runs,
            "system_prompt": self.system_prompt is not None,
        }


def _check_evaluators(path: Path, export: FinetuneExport, evaluators: dict[str, EvaluatorConfig]) -> None:
    for i, threshold in enumerate(export.evaluators):
        where = f"{path}: field 'evaluators.{i}.evaluator'"
        whole_trace_evaluator(evaluators, threshold.evaluator, where, FinetuneExportError, "select traces")


def load_export(path: Path, evaluators: dict[str, EvaluatorConfig]) -> FinetuneExport:
    """One export file, its evaluators checked against the loaded (enabled) evaluators."""
    export = load_named(path, FinetuneExport, FinetuneExportError, "fine-tuning export")
    _check_evaluators(path, export, evaluators)
    return export


def load_exports(
    directory: Path, evaluators: dict[str, EvaluatorConfig], broken: dict[str, str] | None = None
) -> dict[str, FinetuneExport]:
    """Every export file in a folder, by name; a broken one raises unless `broken` collects its error."""
    return load_folder(
        directory, lambda path: load_export(path, evaluators), FinetuneExportError, "fine-tuning export", broken
    )
