"""Name -> scorer. A scorer owns its options model, the case fields it needs, its per-case value and its aggregate.

Adding a metric is one module defining a `Scorer` plus a line in `SCORERS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict


class ScorerOptions(BaseModel):
    """Base of every scorer's options: unknown options are an error, never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class MissingField(ValueError):
    """A case lacks a field the scorer needs; the case is FAILED with this message, never scored 0."""


class NotApplicable(ValueError):
    """The metric has no value for this row (e.g. position agreement when the other order's call failed);
    the row keeps its status and its other metrics."""


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean; None for no values (nothing answered is not a score of 0)."""
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Scorer:
    """One metric: `value(output, case, options)` per case and `aggregate(values, outputs, cases, options)`."""

    name: str
    options: type[ScorerOptions]
    value: Callable[[str, Mapping[str, Any], Any], float]
    needs: Callable[[Any], tuple[str, ...]] = lambda _options: ()
    aggregate: Callable[[Sequence[float], Sequence[str], Sequence[Mapping[str, Any]], Any], float | None] = (
        lambda values, _outputs, _cases, _options: mean(values)
    )
    # Reads the verdict an `as_judge` task parsed from the model's reply (case fields `verdict`, `verdict_other`),
    # for judges of these modes.
    judge_task: bool = False
    judge_modes: tuple[str, ...] = ()
    # Its value comes from an evaluator's judge call made by the suite runner, not from `value`.
    calls_evaluator: bool = False
    # False for a task-level statistic (e.g. a kappa) whose interval is not the per-case values' interval.
    interval: bool = True
    # A corpus statistic (corpus BLEU, chrF) declares how it is built from per-output sufficient statistics, so
    # its interval resamples cases and recomputes it, instead of describing the mean of the per-case values:
    # `statistics(outputs, cases, options)` -> an array with one row per output, and
    # `from_statistics(summed row, options)` -> the value `aggregate` gives for those outputs.
    statistics: Callable[[Sequence[str], Sequence[Mapping[str, Any]], Any], Any] | None = None
    from_statistics: Callable[[Any, Any], float] | None = None

    @property
    def task_level(self) -> bool:
        """Its task value is a statistic over the task's cases (`aggregate`), not the mean of per-case values."""
        return self.aggregate.__name__ != "<lambda>"

    def score(self, output: str, case: Mapping[str, Any], options: ScorerOptions | None = None) -> float:
        """The case's value; `MissingField` when the case lacks a field this scorer needs."""
        options = options or self.options()
        missing = [field for field in self.needs(options) if case.get(field) is None]
        if missing:
            raise MissingField(f"scorer '{self.name}' needs case field(s) {missing}, absent in this case")
        return self.value(output, case, options)


def reference_field(options: Any) -> tuple[str, ...]:
    """`needs` of scorers comparing against the case field named by their `reference_field` option."""
    return (options.reference_field,)


def _registry() -> dict[str, Scorer]:
    from eval_platform.scoring import (
        judge_evaluator,
        judge_verdict,
        json_valid,
        numeric,
        pairwise_choice,
        rouge,
        sacrebleu_metrics,
        squad,
        text_match,
    )

    modules = (squad, sacrebleu_metrics, rouge, text_match, json_valid, numeric, pairwise_choice, judge_verdict,
               judge_evaluator)
    scorers = [scorer for module in modules for scorer in module.SCORERS]
    return {scorer.name: scorer for scorer in scorers}


SCORERS: dict[str, Scorer] = _registry()


def get(name: str) -> Scorer:
    """The scorer called `name`; a KeyError listing the known names otherwise."""
    try:
        return SCORERS[name]
    except KeyError:
        raise KeyError(f"unknown scorer '{name}'; known: {sorted(SCORERS)}") from None
