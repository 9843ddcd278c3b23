"""Evaluator definitions: one YAML file in `<data root>/evaluators/` is one evaluator.

The file is validated by pydantic with `extra="forbid"`; any mistake is an `EvaluatorConfigError` that
names the file, the field and what to do about it. A valid file becomes one value of the `evaluator`
partition dimension of `judge_scores`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from eval_platform.judging import pricing
from eval_platform.judging.templates import TemplateError, parse_template

log = logging.getLogger(__name__)

MAX_SAMPLES = 10
Mode = Literal["score", "binary", "categorical", "pairwise"]
Trigger = Literal["all", "sampled", "manual"]


class EvaluatorConfigError(ValueError):
    """A broken evaluator file: the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScoreScale(_Strict):
    min: float = 1.0
    max: float = 5.0

    @model_validator(mode="after")
    def _ordered(self) -> ScoreScale:
        if self.max <= self.min:
            raise ValueError(f"score_scale.max ({self.max}) must be greater than score_scale.min ({self.min})")
        return self


class PairwiseOptions(_Strict):
    pair_by: str = Field(
        "metadata.item_id",
        description="Traces of one day sharing this value are compared: a trace column or metadata.<key>.",
    )
    orders: Literal["both", "random"] = Field(
        "both", description="both: judge A/B and B/A, a flipped verdict is a tie; random: one seeded order."
    )
    seed: int = 0


class EvaluatorConfig(_Strict):
    """One LLM-as-judge evaluator."""

    name: str
    description: str = ""
    enabled: bool = True
    mode: Mode
    prompt: str
    model: str = Field(description="Any litellm model string, e.g. openai/gpt-4o-mini or anthropic/claude-3-5-haiku.")
    api_base: str | None = None
    api_key_env: str | None = Field(
        None, description="Name of the environment variable holding the provider key; unset means no key needed."
    )
    local_judge: str = Field(
        "mock",
        description="Which local-judge model answers when the key is missing and a local judge URL is configured "
        "(mock, or replay/<recorded judge>).",
    )
    temperature: float = 0.0
    max_tokens: int = Field(512, gt=0)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    samples: int = 1
    score_scale: ScoreScale | None = None
    labels: dict[str, float] | None = None
    pairwise: PairwiseOptions | None = None
    trigger: Trigger = "all"
    sample_rate: float | None = Field(None, gt=0.0, le=1.0)
    span: str | None = Field(None, description="Judge this named span of an OTLP trace instead of the whole trace.")
    max_daily_cost_usd: float | None = Field(None, ge=0)
    max_monthly_cost_usd: float | None = Field(None, ge=0)
    input_cost_per_million: float | None = Field(None, ge=0)
    output_cost_per_million: float | None = Field(None, ge=0)
    anti_gaming_clauses: list[str] = Field(default_factory=list)

    @field_validator("samples", mode="before")
    @classmethod
    def _clamp_samples(cls, value: Any) -> Any:
        if isinstance(value, int) and value > MAX_SAMPLES:
            log.warning("samples=%s is above the hard cap; clamped to %s", value, MAX_SAMPLES)
            return MAX_SAMPLES
        if isinstance(value, int) and value < 1:
            raise ValueError("samples must be at least 1")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> EvaluatorConfig:
        if self.mode == "score" and self.score_scale is None:
            object.__setattr__(self, "score_scale", ScoreScale())
        if self.mode != "score" and self.score_scale is not None:
            raise ValueError(f"score_scale only applies to mode 'score', not '{self.mode}'")
        if self.mode == "categorical":
            if not self.labels:
                raise ValueError("mode 'categorical' needs `labels`: a mapping label -> score in 0..1")
            bad = {k: v for k, v in self.labels.items() if not 0.0 <= v <= 1.0}
            if bad:
                raise ValueError(f"labels map to scores in 0..1; out of range: {bad}")
        elif self.labels is not None:
            raise ValueError(f"labels only apply to mode 'categorical', not '{self.mode}'")
        if self.mode == "pairwise" and self.pairwise is None:
            object.__setattr__(self, "pairwise", PairwiseOptions())
        if self.mode != "pairwise" and self.pairwise is not None:
            raise ValueError(f"pairwise options only apply to mode 'pairwise', not '{self.mode}'")
        if self.trigger == "sampled" and self.sample_rate is None:
            raise ValueError("trigger 'sampled' needs sample_rate (a fraction in (0, 1])")
        if self.trigger != "sampled" and self.sample_rate is not None:
            raise ValueError(f"sample_rate only applies to trigger 'sampled', not '{self.trigger}'")
        try:
            parse_template(self.prompt, allowed=template_variables(self.mode))
        except TemplateError as exc:
            raise ValueError(f"prompt: {exc}") from exc
        if (self.input_cost_per_million is None) != (self.output_cost_per_million is None):
            raise ValueError("set both input_cost_per_million and output_cost_per_million, or neither")
        has_budget = self.max_daily_cost_usd is not None or self.max_monthly_cost_usd is not None
        if has_budget and self.prices() is None:
            raise ValueError(
                f"model '{self.model}' has no known price in litellm's price map, so a budget cannot be enforced; "
                "set input_cost_per_million and output_cost_per_million"
            )
        return self

    def prices(self) -> pricing.Prices | None:
        """USD per million input/output tokens: the override, else litellm's bundled price map."""
        if self.input_cost_per_million is not None and self.output_cost_per_million is not None:
            return pricing.Prices(self.input_cost_per_million, self.output_cost_per_million)
        return pricing.lookup(self.model, self.api_base)

    @property
    def config_hash(self) -> str:
        """Changes whenever anything that could change a verdict changes."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def template_variables(mode: str) -> set[str]:
    base = {"input", "output", "context", "expected", "metadata"}
    if mode == "pairwise":
        return (base - {"output"}) | {"output_a", "output_b"}
    return base


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(file)"


def load_evaluator(path: Path) -> EvaluatorConfig:
    """Load and validate one evaluator file; errors name the file and the field."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise EvaluatorConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise EvaluatorConfigError(f"{path}: expected a mapping of evaluator fields, got {type(raw).__name__}")
    raw.setdefault("name", path.stem)
    if raw["name"] != path.stem:
        raise EvaluatorConfigError(
            f"{path}: field 'name' is '{raw['name']}' but the file is named '{path.name}'; "
            "they must match (the name is the partition key)"
        )
    try:
        return EvaluatorConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"field '{_field_path(err['loc'])}': {err['msg']}" for err in exc.errors())
        raise EvaluatorConfigError(f"{path}: {problems}") from None


def load_evaluators(directory: Path) -> dict[str, EvaluatorConfig]:
    """All evaluators in a folder, by name, sorted. A missing folder has none."""
    if not directory.is_dir():
        return {}
    evaluators = {}
    for path in sorted(directory.glob("*.y*ml")):
        config = load_evaluator(path)
        evaluators[config.name] = config
    return evaluators
