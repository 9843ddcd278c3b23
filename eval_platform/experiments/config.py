"""Experiment definitions: one YAML file in `<data root>/experiments/` is one A/B (or A/B/n) experiment.

The file is validated by pydantic with `extra="forbid"`; any mistake is an `ExperimentConfigError` that names
the file, the field and what to do about it. The experiment's name is the file's stem.

```yaml
description: Does the new prompt help without making answers more toxic?
experiment_id: prompt-v2          # which traces belong (traces.experiment_id); omit for all traces
control: prompt-v1                # a value of traces.variant
treatments: [prompt-v2]
primary_metric: {evaluator: helpfulness, field: score, direction: increase, target_effect: 0.05}
guardrails:
  - {evaluator: toxicity, max_degradation: 0.02}
  - {evaluator: faithfulness, must_not_be_significantly_worse: true}
method: both                      # frequentist | bayesian | both | sequential
alpha: 0.05
multiple_comparisons: holm        # holm | benjamini_hochberg | none, across treatments × metrics
minimum_sample_size: 100          # per variant and metric
start_date: 2026-11-01            # optional window on the trace day (inclusive)
end_date: 2026-11-30
pairwise_evaluator: preference    # optional: win rates and a Bradley–Terry ranking of the variants
```
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from eval_platform.config_files import load_folder, load_named
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.stats.multiplicity import Correction
from eval_platform.stats.sequential import DEFAULT_PRIOR_EFFECT_SIZE, DEFAULT_VARIANCE, Variance
from eval_platform.strict import Strict

Method = Literal["frequentist", "bayesian", "both", "sequential"]
Direction = Literal["increase", "decrease"]
MetricField = Literal["score", "passed"]


class ExperimentConfigError(ValueError):
    """A broken experiment file: the message names the file and the field."""


class Metric(Strict):
    """One evaluator's per-trace result, compared between variants."""

    evaluator: str = Field(description="An evaluator's name (a file stem in evaluators/).")
    field: MetricField = Field("score", description="score: the 0..1 score; passed: the pass rate (binary, assertion).")
    direction: Direction = Field("increase", description="Which way is better.")
    target_effect: float | None = Field(
        None,
        gt=0,
        description="The smallest difference (in the metric's units) worth detecting: experiment_results reports "
        "the sample per variant needed to detect it with the experiment's `power`.",
    )

    @property
    def name(self) -> str:
        return f"{self.evaluator}.{self.field}"


class Guardrail(Metric):
    """A metric the treatment must not make worse. At least one rule is required; with both, both must hold."""

    max_degradation: float | None = Field(
        None,
        gt=0,
        description="Non-inferiority margin in the metric's units: the guardrail fails unless the confidence "
        "(or credible) interval of the difference rules out a degradation larger than this.",
    )
    must_not_be_significantly_worse: bool = Field(
        False, description="The guardrail fails when the treatment is significantly worse (any amount)."
    )

    @model_validator(mode="after")
    def _has_a_rule(self) -> Guardrail:
        if self.max_degradation is None and not self.must_not_be_significantly_worse:
            raise ValueError(
                "a guardrail needs a rule: set max_degradation (e.g. 0.02) and/or must_not_be_significantly_worse: true"
            )
        return self

    @property
    def rule(self) -> str:
        rules = []
        if self.max_degradation is not None:
            rules.append(f"degradation at most {self.max_degradation:g}")
        if self.must_not_be_significantly_worse:
            rules.append("not significantly worse")
        return " and ".join(rules)


class ExperimentConfig(Strict):
    """One experiment: a control variant, treatment variants, a primary metric and guardrails."""

    name: str
    description: str = ""
    experiment_id: str | None = Field(None, description="Traces whose experiment_id equals this; None: all traces.")
    control: str = Field(description="The control variant (a value of traces.variant).")
    treatments: list[str] = Field(min_length=1, description="Treatment variants, each compared with the control.")
    primary_metric: Metric
    guardrails: list[Guardrail] = Field(default_factory=list)
    method: Method = "frequentist"
    alpha: float = Field(0.05, gt=0, lt=0.5, description="Significance level; intervals are at 1 - alpha.")
    multiple_comparisons: Correction = Field(
        "holm",
        description="How the p-values of all treatments × metrics are adjusted before `significant` is decided: "
        "holm (family-wise error rate), benjamini_hochberg (false discovery rate) or none.",
    )
    power: float = Field(0.8, gt=0, lt=1, description="The power the planning columns (mde, required_n) aim at.")
    sequential_prior_effect_size: float = Field(
        DEFAULT_PRIOR_EFFECT_SIZE,
        gt=0,
        description="method: sequential: the standard deviation of the mixture's prior on the effect, in residual "
        "standard deviations (Cohen's d); it sets which effects the test detects soonest, never its validity.",
    )
    sequential_variance: Variance = Field(
        DEFAULT_VARIANCE,
        description="method: sequential: per_arm (default) estimates each variant's own spread, valid when the "
        "variants' spreads and sizes differ (asymptotically); pooled assumes one spread for both (exact then, "
        "Lindon et al.'s model, equal to savvi) and overstates significance when the smaller variant is noisier.",
    )
    minimum_sample_size: int = Field(30, ge=2, description="Observations needed per variant and metric.")
    start_date: dt.date | None = Field(None, description="First trace day included (inclusive).")
    end_date: dt.date | None = Field(None, description="Last trace day included (inclusive).")
    pairwise_evaluator: str | None = Field(
        None, description="A pairwise evaluator: win rates and a Bradley–Terry ranking of the variants."
    )

    @field_validator("treatments")
    @classmethod
    def _distinct(cls, treatments: list[str]) -> list[str]:
        duplicates = sorted({t for t in treatments if treatments.count(t) > 1})
        if duplicates:
            raise ValueError(f"treatments are listed more than once: {duplicates}")
        return treatments

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        if self.control in self.treatments:
            raise ValueError(f"the control '{self.control}' is also listed in treatments")
        if self.start_date and self.end_date and self.end_date < self.start_date:
            raise ValueError(f"end_date ({self.end_date}) is before start_date ({self.start_date})")
        names = [self.primary_metric.name] + [g.name for g in self.guardrails]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"a metric is both primary and guardrail, or a guardrail twice: {repeated}")
        return self

    @property
    def variants(self) -> list[str]:
        return [self.control, *self.treatments]

    @property
    def metrics(self) -> list[tuple[str, Metric]]:
        """(role, metric) pairs: the primary metric first, then the guardrails in file order."""
        return [("primary", self.primary_metric)] + [("guardrail", g) for g in self.guardrails]

    def check_evaluators(
        self, evaluators: dict[str, EvaluatorConfig], broken_evaluators: dict[str, str] | None = None
    ) -> list[str]:
        """Problems with the evaluators this experiment names, as "field 'x': message" strings. `broken_evaluators`:
        evaluator files that did not load (file name -> error), so the problem says why, not only "no evaluator"."""
        problems = []
        broken = {Path(file).stem: error for file, error in (broken_evaluators or {}).items()}
        for field, metric in [("primary_metric", self.primary_metric)] + [
            (f"guardrails.{i}", g) for i, g in enumerate(self.guardrails)
        ]:
            evaluator = evaluators.get(metric.evaluator)
            if evaluator is None and metric.evaluator in broken:
                problems.append(
                    f"field '{field}.evaluator': evaluator '{metric.evaluator}' did not load "
                    f"({broken[metric.evaluator]})"
                )
            elif evaluator is None:
                problems.append(
                    f"field '{field}.evaluator': no evaluator named '{metric.evaluator}' "
                    f"(known: {', '.join(sorted(evaluators)) or 'none'})"
                )
            elif evaluator.judge_mode.unit == "pair":
                problems.append(
                    f"field '{field}.evaluator': '{metric.evaluator}' is pairwise and has no per-trace metric; "
                    "name it in pairwise_evaluator instead"
                )
            elif metric.field == "passed" and evaluator.judge_mode.verdict != "boolean":
                problems.append(
                    f"field '{field}.field': '{metric.evaluator}' is a {evaluator.mode} evaluator without pass/fail; "
                    "use field: score"
                )
        if self.pairwise_evaluator is not None:
            evaluator = evaluators.get(self.pairwise_evaluator)
            if evaluator is None and self.pairwise_evaluator in broken:
                problems.append(
                    f"field 'pairwise_evaluator': evaluator '{self.pairwise_evaluator}' did not load "
                    f"({broken[self.pairwise_evaluator]})"
                )
            elif evaluator is None:
                problems.append(
                    f"field 'pairwise_evaluator': no evaluator named '{self.pairwise_evaluator}' "
                    f"(known: {', '.join(sorted(evaluators)) or 'none'})"
                )
            elif evaluator.judge_mode.unit != "pair":
                problems.append(
                    f"field 'pairwise_evaluator': '{self.pairwise_evaluator}' is a {evaluator.mode} evaluator, "
                    "not pairwise"
                )
        return problems


def load_experiment(
    path: Path, evaluators: dict[str, EvaluatorConfig] | None = None, broken_evaluators: dict[str, str] | None = None
) -> ExperimentConfig:
    """Load and validate one experiment file; with `evaluators`, also check the evaluators it names exist
    and fit the metric (`broken_evaluators`: files that did not load, named in the error). Errors name the file
    and the field."""
    config = load_named(path, ExperimentConfig, ExperimentConfigError, "experiment")
    if evaluators is not None:
        problems = config.check_evaluators(evaluators, broken_evaluators)
        if problems:
            raise ExperimentConfigError(f"{path}: {'; '.join(problems)}")
    return config


def load_experiments(
    directory: Path,
    evaluators: dict[str, EvaluatorConfig] | None = None,
    broken: dict[str, str] | None = None,
    broken_evaluators: dict[str, str] | None = None,
) -> dict[str, ExperimentConfig]:
    """All experiments in a folder, by name, sorted. A missing folder has none.

    As for evaluators, a broken file raises unless `broken` collects its error (by file name, and in the code
    location's log). An experiment naming an evaluator in `broken_evaluators` is broken too, and says why.
    """
    return load_folder(
        directory,
        lambda path: load_experiment(path, evaluators, broken_evaluators),
        ExperimentConfigError,
        "experiment",
        broken,
    )
