"""Evaluator definitions: one YAML file in `<data root>/evaluators/` is one evaluator.

The file is validated by pydantic with `extra="forbid"`; any mistake is an `EvaluatorConfigError` that
names the file, the field and what to do about it. A valid file becomes one value of the `evaluator`
partition dimension of `judge_scores`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from pathlib import Path
from typing import Any, Literal

import jsonschema
from pydantic import Field, field_validator, model_validator

from eval_platform.config_files import load_named, record_broken
from eval_platform.ingest.datasets import dataset_versions
from eval_platform.judging.modes import MODE_FIELDS, MODES, ConsensusRule, JudgeMode
from eval_platform.judging.modes import Strict as _Strict
from eval_platform.judging.modes.n_wise import MAX_CANDIDATES, NWiseOptions  # noqa: F401 (MAX_CANDIDATES re-exported)
from eval_platform.judging.modes.pairwise import PairwiseOptions
from eval_platform.judging.templates import (
    TemplateError,
    parse_template,
    template_names,
)
from eval_platform.llm import pricing
from eval_platform.llm.openai_compat import is_openai_compatible

log = logging.getLogger(__name__)

MAX_SAMPLES = 10
Trigger = Literal["all", "sampled", "manual"]
Consensus = ConsensusRule


class EvaluatorConfigError(ValueError):
    """A broken evaluator file: the message names the file and the field."""


class ScoreScale(_Strict):
    min: float = 1.0
    max: float = 5.0

    @model_validator(mode="after")
    def _ordered(self) -> ScoreScale:
        if self.max <= self.min:
            raise ValueError(f"score_scale.max ({self.max}) must be greater than score_scale.min ({self.min})")
        return self


class RubricLevel(_Strict):
    score: float | None = None
    range: tuple[float, float] | None = None
    description: str

    @model_validator(mode="after")
    def _one_of(self) -> RubricLevel:
        if (self.score is None) == (self.range is None):
            raise ValueError("a rubric level has either `score` or `range: [low, high]`")
        if self.range is not None and self.range[0] > self.range[1]:
            raise ValueError(f"rubric range {list(self.range)} is reversed")
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        return self.range if self.range is not None else (self.score, self.score)


class Rubric(_Strict):
    """Either scored levels (single scores or ranges) or G-Eval style criteria with evaluation steps."""

    levels: list[RubricLevel] = Field(default_factory=list)
    criteria: str | None = None
    steps: list[str] = Field(default_factory=list, description="G-Eval evaluation steps, followed in order.")
    chain_of_thought: bool = Field(False, description="Ask for step-by-step reasoning before the verdict.")

    @model_validator(mode="after")
    def _something(self) -> Rubric:
        if not self.levels and not self.criteria:
            raise ValueError("a rubric needs `levels` or `criteria`")
        spans = sorted(level.bounds for level in self.levels)
        for (lo1, hi1), (lo2, hi2) in itertools.pairwise(spans):
            if lo2 <= hi1:
                raise ValueError(f"rubric levels overlap: {lo1}..{hi1} and {lo2}..{hi2}")
        return self


class ReferenceOptions(_Strict):
    source: Literal["trace", "dataset"] = Field(
        "trace", description="trace: the trace's expected_output; dataset: a test case's expected_output."
    )
    dataset: str | None = None
    version: int | None = Field(None, description="Dataset version; the newest materialized one when omitted.")
    match_on: str = Field("metadata.case_id", description="The trace field (or metadata.<key>) holding the case_id.")

    @model_validator(mode="after")
    def _dataset_named(self) -> ReferenceOptions:
        if self.source == "dataset" and not self.dataset:
            raise ValueError("reference.source 'dataset' needs reference.dataset (the dataset name)")
        if self.source == "trace" and (self.dataset or self.version):
            raise ValueError("reference.dataset/version only apply to source 'dataset'")
        return self


class FewShotExample(_Strict):
    """A worked example shown to the judge: the content it would see and the reply it should give."""

    input: str | None = None
    output: str | None = None
    output_a: str | None = None
    output_b: str | None = None
    expected: str | None = None
    verdict: dict[str, Any]


class HumanAgreementOptions(_Strict):
    """Which human annotations this evaluator's verdicts are checked against in the `agreement` table."""

    task: str = Field(description="The annotation task (annotations' `task`) labelling the same items.")
    criterion: str | None = Field(None, description="The task's criterion; all criteria when omitted.")
    floor: float | None = Field(
        None, ge=-1, le=1, description="Minimum Cohen's kappa with the human majority; below it a WARN check fails."
    )


# Providers whose batch API batch mode does not speak, and why (see README "Batch mode").
BATCH_REFUSED = {
    "vertex_ai": "Vertex AI batch prediction reads its requests from and writes its results to Google Cloud "
    "Storage buckets, which batch mode does not use",
    "bedrock": "Bedrock batch inference reads its requests from and writes its results to S3 buckets, which batch "
    "mode does not use",
    "azure": "litellm rewrites a reasoning model's parameters, which a batch line would not",
    "openai": "litellm rewrites a reasoning model's parameters, which a batch line would not",
}


class BatchOptions(_Strict):
    """Judge a partition through the provider's batch API (OpenAI's or Azure's Files + Batches, Anthropic's
    Message Batches) at its discount.

    Delivery does not change a verdict: the same requests are sent and parsed the same way, so it stays out
    of `config_hash` and a batch verdict and an interactive one share their cache entry.
    """

    enabled: bool = True
    poll_interval_s: float = Field(30.0, gt=0, description="How often the batch's status is asked for.")
    timeout_s: float = Field(
        86_400.0,
        gt=0,
        description="How long one run waits for the batch; then its traces are FAILED batch_timeout and the next "
        "run of the partition resumes the same batch (it is not submitted again).",
    )
    discount: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Batch price as a fraction of the interactive price (OpenAI, Anthropic and Google: 0.5).",
    )


class ModelSpec(_Strict):
    model: str = Field(description="Any litellm model string, e.g. openai/gpt-4o-mini or anthropic/claude-3-5-haiku.")
    api_base: str | None = None
    api_key_env: str | None = None
    local_judge: str | None = None
    input_cost_per_million: float | None = Field(None, ge=0)
    output_cost_per_million: float | None = Field(None, ge=0)
    cached_input_cost_per_million: float | None = Field(
        None,
        ge=0,
        description="Price of prompt tokens served from the provider's cache; default: litellm's, else input",
    )

    def prices(self) -> pricing.Prices | None:
        """USD per million input/output (and cached input) tokens: the override, else litellm's bundled price map."""
        if self.input_cost_per_million is not None and self.output_cost_per_million is not None:
            return pricing.Prices(
                self.input_cost_per_million, self.output_cost_per_million, self.cached_input_cost_per_million
            )
        return pricing.lookup(self.model, self.api_base)

    def has_price(self) -> bool:
        """Explicit prices, or a price litellm knows: what a budget needs (a local model's 'free' is a guess)."""
        explicit = self.input_cost_per_million is not None and self.output_cost_per_million is not None
        return explicit or pricing.known(self.model) is not None


class EvaluatorConfig(_Strict):
    """One LLM-as-judge evaluator."""

    name: str
    description: str = ""
    enabled: bool = True
    mode: str = Field(description="The judge mode: a name in the registry `judging.modes.MODES`.")
    prompt: str
    model: str | None = Field(None, description="One judge model (litellm string); or give `models`.")
    models: list[ModelSpec] | None = Field(
        None, description="Several judges; their verdicts are combined by `consensus`."
    )
    consensus: Consensus | None = None
    min_agreement_threshold: float | None = Field(
        None, ge=0, le=1, description="Below this agreement among members, the consensus row is FAILED (low_agreement)."
    )
    flag_on_disagreement: bool = Field(False, description="Flag consensus rows whose members did not all agree.")
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
    rubric: Rubric | None = None
    labels: dict[str, float] | None = None
    expect: bool = Field(True, description="assertion: the answer that passes; false flips the polarity.")
    strict: bool = Field(False, description="Accept only a JSON reply with exactly typed fields; no lenient shapes.")
    pairwise: PairwiseOptions | None = None
    n_wise: NWiseOptions | None = None
    reference: ReferenceOptions | None = None
    few_shot: list[FewShotExample] = Field(default_factory=list)
    output_schema: dict[str, Any] | None = Field(None, description="JSON Schema every reply must satisfy.")
    human_agreement: HumanAgreementOptions | None = None
    request_confidence: bool = Field(False, description="Ask the judge for a confidence in 0..1 with each verdict.")
    min_confidence: float = Field(0.5, ge=0, le=1, description="Reported confidence below this flags the row.")
    trigger: Trigger = "all"
    sample_rate: float | None = Field(None, gt=0.0, le=1.0)
    span: str | None = Field(None, description="Judge this named span of an OTLP trace instead of the whole trace.")
    max_daily_cost_usd: float | None = Field(None, ge=0)
    max_monthly_cost_usd: float | None = Field(None, ge=0)
    input_cost_per_million: float | None = Field(None, ge=0)
    output_cost_per_million: float | None = Field(None, ge=0)
    cached_input_cost_per_million: float | None = Field(None, ge=0)
    anti_gaming_clauses: list[str] = Field(default_factory=list)
    max_failed_rate: float = Field(
        0.2, ge=0, le=1, description="A partition whose judged rows FAILED above this rate fails a WARN check."
    )
    batch: BatchOptions | None = Field(
        None,
        description="Judge each partition through the provider's batch API (see BatchOptions); default interactive.",
    )
    max_prompt_chars: int = Field(
        200_000,
        gt=0,
        description=(
            "A request whose prompt (with the fenced content) is longer is SKIPPED (prompt_too_large), never sent."
        ),
    )

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        # Checked against the registry when an evaluator loads (not frozen into a type when this module loads),
        # so that a mode registered in MODES is a mode: the registry is the one list.
        if value not in MODES:
            raise ValueError(f"Input should be {', '.join(repr(name) for name in MODES)}")
        return value

    @field_validator("samples", mode="before")
    @classmethod
    def _clamp_samples(cls, value: Any) -> Any:
        if isinstance(value, int) and value > MAX_SAMPLES:
            log.warning("samples=%s is above the hard cap; clamped to %s", value, MAX_SAMPLES)
            return MAX_SAMPLES
        if isinstance(value, int) and value < 1:
            raise ValueError("samples must be at least 1")
        return value

    @model_validator(mode="before")
    @classmethod
    def _mode_defaults(cls, raw: Any) -> Any:
        """Fill the options a mode needs with their defaults before validation (the model stays frozen)."""
        if not isinstance(raw, dict) or not isinstance(raw.get("mode"), str):
            return raw
        mode, raw = raw["mode"], dict(raw)
        if mode not in MODES:
            return raw  # the field's own validation names the modes there are
        if raw.get("consensus") is None:
            raw["consensus"] = default_consensus(mode)
        for option in MODES[mode].options:
            if raw.get(option) is None:
                raw[option] = {}
        return raw

    @model_validator(mode="after")
    def _consistent(self) -> EvaluatorConfig:
        self._check_models()
        self._check_mode_options()
        if self.trigger == "sampled" and self.sample_rate is None:
            raise ValueError("trigger 'sampled' needs sample_rate (a fraction in (0, 1])")
        if self.trigger != "sampled" and self.sample_rate is not None:
            raise ValueError(f"sample_rate only applies to trigger 'sampled', not '{self.trigger}'")
        try:
            tree = parse_template(self.prompt, allowed=template_variables(self.mode))
        except TemplateError as exc:
            raise ValueError(f"prompt: {exc}") from exc
        for variable, purpose in MODES[self.mode].required_variables:
            if variable not in template_names(tree):
                raise ValueError(f"mode '{self.mode}' needs {{{{{variable}}}}} in the prompt: {purpose}")
        if self.output_schema is not None:
            try:
                jsonschema.Draft202012Validator.check_schema(self.output_schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"output_schema is not a valid JSON Schema: {exc.message}") from None
        self._check_few_shot()
        self._check_batch()
        return self

    def _check_batch(self) -> None:
        if not self.batched:
            return
        for spec in self.judge_models():
            provider = spec.model.split("/", 1)[0] if "/" in spec.model else "openai"
            if is_openai_compatible(spec.model, spec.api_base) or provider == "anthropic":
                continue
            if provider == "azure" and is_openai_compatible(f"openai/{spec.model.removeprefix('azure/')}", None):
                continue
            if "/" not in spec.model:
                why = "which provider serves it is not said; spell it openai/<model> or give an api_base"
            else:
                why = BATCH_REFUSED.get(provider, f"batch mode does not speak the batch API of provider '{provider}'")
            raise ValueError(
                f"batch: model '{spec.model}': {why}. Batch mode supports openai/<model> (or the api_base of an "
                "OpenAI-compatible server with /v1/files + /v1/batches), azure/<deployment> (Azure OpenAI) and "
                "anthropic/<model> (Message Batches); use one of those, or remove `batch`"
            )

    @property
    def batched(self) -> bool:
        """True when partitions are judged through the provider's batch API."""
        return self.batch is not None and self.batch.enabled

    def _check_models(self) -> None:
        if (self.model is None) == (self.models is None):
            raise ValueError("give exactly one of `model` (one judge) or `models` (a list of judges)")
        if self.models is not None and not self.models:
            raise ValueError("`models` is empty")
        if (self.input_cost_per_million is None) != (self.output_cost_per_million is None):
            raise ValueError("set both input_cost_per_million and output_cost_per_million, or neither")
        members = len(self.judge_models()) * self.samples
        allowed = self.judge_mode.consensus
        if self.consensus not in allowed:
            what = "averages numbers" if self.consensus in {"mean", "median"} else "counts votes"
            gives = "labels" if self.judge_mode.labelled else "ranks" if self.judge_mode.unit == "group" else "numbers"
            raise ValueError(
                f"consensus '{self.consensus}' {what}; mode '{self.mode}' gives {gives}: use {' or '.join(allowed)}"
            )
        if members < 2 and (self.min_agreement_threshold is not None or self.flag_on_disagreement):
            raise ValueError("min_agreement_threshold / flag_on_disagreement need several models or samples")
        has_budget = self.max_daily_cost_usd is not None or self.max_monthly_cost_usd is not None
        for spec in self.judge_models():
            if has_budget and not spec.has_price():
                raise ValueError(
                    f"model '{spec.model}' has no known price in litellm's price map, so a budget cannot be "
                    "enforced; set input_cost_per_million and output_cost_per_million"
                )

    @property
    def judge_mode(self) -> JudgeMode:
        """The evaluator's mode: its options, reply, planning, consensus and agreement (`judging.modes`)."""
        return MODES[self.mode]

    def _check_mode_options(self) -> None:
        mode = self.judge_mode
        for name in MODE_FIELDS:
            unset = getattr(self, name) is None if name != "expect" else self.expect
            if not unset and name not in (*mode.options, *mode.accepts):
                owners = sorted(m.name for m in MODES.values() if name in (*m.options, *m.accepts))
                if name == "expect":
                    raise ValueError(f"expect only applies to mode {' / '.join(repr(o) for o in owners)}")
                raise ValueError(f"`{name}` only applies to mode {' / '.join(owners)}, not '{self.mode}'")
        if self.rubric is not None:
            scale = self.score_scale
            for level in self.rubric.levels:
                low, high = level.bounds
                if low < scale.min or high > scale.max:
                    raise ValueError(f"rubric level {low}..{high} lies outside score_scale {scale.min}..{scale.max}")
        if mode.check is not None:
            mode.check(self)

    def _check_few_shot(self) -> None:
        from eval_platform.judging.prompts import (
            reply_schema,  # prompts builds on this module
        )

        if self.few_shot and not self.judge_mode.few_shot:
            raise ValueError(f"few_shot is not supported for mode '{self.mode}'")
        validators = [jsonschema.Draft202012Validator(reply_schema(self))]
        if self.output_schema is not None:
            validators.append(jsonschema.Draft202012Validator(self.output_schema))
        for i, example in enumerate(self.few_shot):
            shown = {name: getattr(example, name, None) for name in self.judge_mode.output_variables}
            if not all(value is not None for value in shown.values()):
                raise ValueError(f"few_shot[{i}] needs {' and '.join(shown)} for mode '{self.mode}'")
            for validator in validators:
                error = jsonschema.exceptions.best_match(validator.iter_errors(example.verdict))
                if error is not None:
                    raise ValueError(f"few_shot[{i}].verdict does not match the reply schema: {error.message}")

    def judge_models(self) -> list[ModelSpec]:
        """The judges, with evaluator-level api_base / key / local judge / prices filled in."""
        specs = self.models if self.models is not None else [ModelSpec(model=self.model)]
        inherited = {
            "api_base": self.api_base,
            "api_key_env": self.api_key_env,
            "local_judge": self.local_judge,
            "input_cost_per_million": self.input_cost_per_million,
            "output_cost_per_million": self.output_cost_per_million,
            "cached_input_cost_per_million": self.cached_input_cost_per_million,
        }
        filled = []
        for spec in specs:
            updates = {k: v for k, v in inherited.items() if getattr(spec, k) is None}
            filled.append(spec.model_copy(update=updates))
        return filled

    @property
    def members(self) -> int:
        """How many verdicts each trace (pair, group) gets: models x samples."""
        return len(self.judge_models()) * self.samples

    @property
    def model_label(self) -> str:
        return ",".join(spec.model for spec in self.judge_models())

    @property
    def config_hash(self) -> str:
        """Changes exactly when something that can change a verdict changes (VERDICT_FIELDS and the models).

        The description, enabled, the trigger and sample rate (which traces, not what verdict), budgets and
        prices, timeouts and retries, the endpoint and key variable, and human_agreement leave it unchanged.
        """
        verdict = self.model_dump(mode="json", include=set(VERDICT_FIELDS))
        verdict["models"] = [{"model": s.model, "local_judge": s.local_judge} for s in self.judge_models()]
        canonical = json.dumps(verdict, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# What can change a verdict, besides the judge models: the prompt and how it is built, the mode and its
# options, how replies are parsed and checked, sampling and decoding, how members are combined and flagged.
VERDICT_FIELDS = (
    "mode",
    "prompt",
    "consensus",
    "min_agreement_threshold",
    "flag_on_disagreement",
    "temperature",
    "max_tokens",
    "samples",
    "score_scale",
    "rubric",
    "labels",
    "expect",
    "strict",
    "pairwise",
    "n_wise",
    "reference",
    "few_shot",
    "output_schema",
    "request_confidence",
    "min_confidence",
    "span",
    "anti_gaming_clauses",
)

# What cannot: which traces are judged, when, at what price and budget, through which endpoint and key.
NON_VERDICT_FIELDS = (
    "name",
    "description",
    "enabled",
    "trigger",
    "sample_rate",
    "max_daily_cost_usd",
    "max_monthly_cost_usd",
    "input_cost_per_million",
    "output_cost_per_million",
    "cached_input_cost_per_million",
    "timeout_s",
    "max_retries",
    "api_base",
    "api_key_env",
    "human_agreement",
    "model",
    "models",
    "local_judge",
    "max_prompt_chars",
    "max_failed_rate",  # the models enter the hash as (model, local_judge) pairs
    "batch",  # how requests are delivered (batch API or one by one), not what they ask
)


def default_consensus(mode: str) -> Consensus:
    return MODES[mode].default_consensus


def template_variables(mode: str) -> set[str]:
    return MODES[mode].template_variables()


def load_evaluator(path: Path, data_root: Path | None = None) -> EvaluatorConfig:
    """Load and validate one evaluator file; errors name the file and the field. With `data_root`, a reference
    dataset (and version) the evaluator names must be declared there (see `check_reference_dataset`)."""
    config = load_named(path, EvaluatorConfig, EvaluatorConfigError, "evaluator", " (the name is the partition key)")
    if data_root is not None:
        check_reference_dataset(path, config, data_root)
    return config


def check_reference_dataset(path: Path, config: EvaluatorConfig, data_root: Path) -> None:
    """A `reference` evaluator's dataset must exist when it loads, where "exists" means declared: a file
    `datasets/<name>/v<N>.<ext>` under the data root (the version named, or any when none is). Whether that
    version is materialized in `test_cases` yet is checked by the run, which can then say to materialize it."""
    options = config.reference
    if options is None or options.source != "dataset":
        return
    versions = dataset_versions(data_root, options.dataset)
    if not versions:
        raise EvaluatorConfigError(
            f"{path}: field 'reference.dataset': unknown dataset '{options.dataset}' "
            f"(no datasets/{options.dataset}/v<N>.<ext> under {data_root})"
        )
    if options.version is not None and options.version not in versions:
        raise EvaluatorConfigError(
            f"{path}: field 'reference.version': dataset '{options.dataset}' has no version {options.version}; "
            f"declared: {sorted(versions)} (datasets/{options.dataset}/v<N>.<ext>)"
        )


def load_evaluators(
    directory: Path, broken: dict[str, str] | None = None, data_root: Path | None = None
) -> dict[str, EvaluatorConfig]:
    """All evaluators in a folder, by name, sorted. A missing folder has none.

    A file that does not validate raises, unless `broken` is given: then its error is recorded there
    (by file name, and in the code location's log) and the other evaluators load, so one typo does not take
    the code location down. `data_root`: where reference datasets are declared; by default the folder holding
    `directory` (the data root's layout: `<data root>/evaluators/`).
    """
    if not directory.is_dir():
        return {}
    evaluators = {}
    for path in sorted(directory.glob("*.y*ml")):
        try:
            config = load_evaluator(path, data_root or directory.parent)
        except EvaluatorConfigError as exc:
            if broken is None:
                raise
            record_broken(broken, path.name, exc, "evaluator file")
            continue
        evaluators[config.name] = config
    return evaluators
