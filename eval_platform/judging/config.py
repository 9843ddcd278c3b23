"""The evaluator config: what one evaluator file says, validated by pydantic with `extra="forbid"`.

The model's validators check the fields against each other and against the judge mode; `config_hash` says
which fields can change a verdict. Reading files is `judging.loading`; the option blocks are
`judging.options`, the judge models `judging.models`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Literal

import jsonschema
from pydantic import Field, field_validator, model_validator

from eval_platform.alerting.rules import BUDGET_METRICS, SCORE_METRICS, AlertRule
from eval_platform.config_files import field_errors
from eval_platform.judging.check_options import CHECK_EVALUATOR_FIELDS, CheckOptions, check_evaluator_fields
from eval_platform.judging.models import ModelSpec
from eval_platform.judging.modes import MODE_FIELDS, MODES, ConsensusRule, JudgeMode
from eval_platform.judging.modes.n_wise import NWiseOptions
from eval_platform.judging.modes.pairwise import PairwiseOptions
from eval_platform.judging.options import (
    BATCH_REFUSED,
    DEFAULT_SESSION_QUIET_PERIOD_S,
    AnchorOptions,
    BatchOptions,
    CompletionOptions,
    FewShotExample,
    HumanAgreementOptions,
    ReferenceOptions,
    Rubric,
    ScoreScale,
)
from eval_platform.judging.targets import (
    DEFAULT_CONVERSATION_LAST_N,
    DEFAULT_SESSION_LOOKBACK_DAYS,
    SPAN_VARIABLES,
    ContextSource,
    SpanSelector,
    Target,
    as_selector,
    check_context_source,
)
from eval_platform.judging.templates import (
    TemplateError,
    parse_template,
    template_names,
)
from eval_platform.llm.batch.providers import batch_accepts, batch_supports
from eval_platform.strict import Strict

log = logging.getLogger(__name__)

MAX_SAMPLES = 10
Trigger = Literal["all", "sampled", "manual"]
Consensus = ConsensusRule


class EvaluatorConfig(Strict):
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
    anchors: AnchorOptions | None = None
    request_confidence: bool = Field(False, description="Ask the judge for a confidence in 0..1 with each verdict.")
    min_confidence: float = Field(0.5, ge=0, le=1, description="Reported confidence below this flags the row.")
    trigger: Trigger = "all"
    sample_rate: float | None = Field(None, gt=0.0, le=1.0)
    projects: list[str] | None = Field(
        None,
        min_length=1,
        description="Judge only the traces of these projects (`project_id`); unset: every trace. Traces of other "
        "projects are not this evaluator's: they get no row.",
    )
    # What is judged (`judging.targets`; README "What an evaluator judges").
    target: Target | None = Field(None, description="trace (default), span (each selected span) or session.")
    span: str | SpanSelector | None = Field(
        None, description="Which spans target span judges; a bare name is {name: <name>, pick: first}."
    )
    conversation_last_n: int = Field(DEFAULT_CONVERSATION_LAST_N, ge=1, description="Messages {{conversation}} shows.")
    framework_prompt: bool = Field(
        False,
        description="Show an agent framework's own system prompt (smolagents' boilerplate) in {{conversation}}.",
    )
    context_from: list[ContextSource] | None = Field(
        None, description="What {{context}} shows: retrieval, tool_results, metadata.<key>, span selectors."
    )
    session_lookback_days: int = Field(
        DEFAULT_SESSION_LOOKBACK_DAYS, ge=0, le=366, description="target session: earlier days of traces read."
    )
    completion: CompletionOptions = Field(
        default_factory=CompletionOptions,
        description="When a trace is finished enough to judge: its root ended and quiet_period_s (default 60) without "
        "a span; a session after session_quiet_period_s (default 1800) without a turn (judging.completion).",
    )
    judge_errors: bool = Field(False, description="Judge traces and spans whose model call failed (else app_error).")
    judge_missing_fields: bool = Field(
        False,
        description="Judge rows whose {{output}} or {{input}}, shown by the prompt, is empty (else no_final_answer / "
        "missing_field:input).",
    )
    max_daily_cost_usd: float | None = Field(None, ge=0)
    max_monthly_cost_usd: float | None = Field(None, ge=0)
    input_cost_per_million: float | None = Field(None, ge=0)
    output_cost_per_million: float | None = Field(None, ge=0)
    cached_input_cost_per_million: float | None = Field(None, ge=0)
    anti_gaming_clauses: list[str] = Field(default_factory=list)
    max_failed_rate: float = Field(
        0.2, ge=0, le=1, description="A partition whose judged rows FAILED above this rate fails a WARN check."
    )
    alerts: list[AlertRule] = Field(
        default_factory=list,
        description="Threshold alert rules (`alerting.rules`): `rate(score < 0.5) > 2%`, `mean < 0.6`, "
        "`failed_rate > 10%`, `budget_used_pct > 80`; delivered as alerting.yaml says.",
    )
    batch: BatchOptions | None = Field(
        None,
        description="Judge each partition through the provider's batch API (see BatchOptions); default interactive.",
    )
    check: CheckOptions | None = Field(
        None,
        description="Run this scorer of the registry on each trace instead of calling a judge (no model, no cost); "
        "see judging.check_options.",
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

    @field_validator("span", mode="before")
    @classmethod
    def _span_selector(cls, value: Any) -> Any:
        return as_selector(value)

    @field_validator("context_from", mode="before")
    @classmethod
    def _context_selectors(cls, value: Any) -> Any:
        return [as_selector(item) for item in value] if isinstance(value, list) else value

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
        if isinstance(raw, dict) and raw.get("check") is not None:
            own = {name: value for name, value in raw.items() if name in CHECK_EVALUATOR_FIELDS}
            saved = cls.model_validate(own).model_dump() if len(own) < len(raw) else {}
            raw = check_evaluator_fields(raw, saved)
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
        if self.anchors is not None and (self.judge_mode.relative or self.check is not None):
            raise ValueError(
                "anchors: judge drift compares one verdict per anchor item; a pairwise or n_wise evaluator's score is "
                "relative to its candidates, and a check evaluator has no model to drift. Remove `anchors`."
            )
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
        self._check_target()
        self._check_alerts()
        return self

    def _check_alerts(self) -> None:
        """Rules the evaluator cannot measure, each reported at its own field (`alerts.0.rule`)."""
        problems: list[tuple[tuple[str | int, ...], Any, str]] = []
        for i, rule in enumerate(self.alerts):
            metric, where = rule.parsed.metric, ("alerts", i, "rule")
            if metric in SCORE_METRICS and self.judge_mode.relative:
                why = (
                    f"{rule.rule!r}: mode '{self.mode}' scores are relative to the other candidates; "
                    "their rate or mean says nothing: use failed_rate or a budget rule"
                )
                problems.append((where, rule.rule, why))
            budget = self.max_monthly_cost_usd if metric == "monthly_budget_used_pct" else self.max_daily_cost_usd
            if metric in BUDGET_METRICS and budget is None:
                needed = "max_monthly_cost_usd" if metric == "monthly_budget_used_pct" else "max_daily_cost_usd"
                why = f"{rule.rule!r}: {metric} is measured against {needed}, which is not set: set it or drop the rule"
                problems.append((where, rule.rule, why))
        if problems:
            raise field_errors(type(self), problems)

    @property
    def judged_target(self) -> Target:
        """What one row judges: `target`, else a span when `span` is set on a mode judging one trace at a time."""
        if self.target is not None:
            return self.target
        return "span" if self.span is not None and self.judge_mode.unit == "trace" else "trace"

    def _check_target(self) -> None:
        target, unit = self.judged_target, self.judge_mode.unit
        if target != "trace" and unit != "trace":
            why = f"mode '{self.mode}' judges {unit}s"
            raise ValueError(f"target '{target}' judges one span or session per call; {why}")
        if target == "span" and self.span is None:
            raise ValueError("target 'span' needs `span`: a selector {name, operation, attribute, pick}")
        if target != "span" and self.span is not None and unit == "trace":
            raise ValueError(f"`span` selects what target 'span' judges; with target '{target}' use context_from")
        # Compared with the default, not "was it written": a dumped config (every field written) loads again.
        if target != "session" and self.session_lookback_days != DEFAULT_SESSION_LOOKBACK_DAYS:
            raise ValueError("session_lookback_days only applies to target 'session'")
        session_quiet = self.completion.session_quiet_period_s
        if target != "session" and session_quiet != DEFAULT_SESSION_QUIET_PERIOD_S:
            why = f"only applies to target 'session' (this is '{target}'); a trace waits for quiet_period_s"
            raise field_errors(type(self), [(("completion", "session_quiet_period_s"), session_quiet, why)])
        named = sorted(set(SPAN_VARIABLES) & template_names(parse_template(self.prompt, template_variables(self.mode))))
        if named and target != "span":
            shown = ", ".join(f"{{{{{name}}}}}" for name in named)
            raise ValueError(f"{shown} name the judged span: only target 'span' has one (this is '{target}')")
        for source in self.context_from or []:
            check_context_source(source)

    def _check_batch(self) -> None:
        if not self.batched:
            return
        for spec in self.judge_models():
            # Which models a batch API takes is each provider module's word (`llm/batch/providers/`).
            if batch_accepts(spec.model, spec.api_base):
                continue
            provider = spec.model.split("/", 1)[0] if "/" in spec.model else "openai"
            if "/" not in spec.model:
                why = "which provider serves it is not said; spell it openai/<model> or give an api_base"
            else:
                why = BATCH_REFUSED.get(provider, f"batch mode does not speak the batch API of provider '{provider}'")
            raise ValueError(
                f"batch: model '{spec.model}': {why}. Batch mode supports {batch_supports()}; use one of those, "
                "or remove `batch`"
            )

    @property
    def batched(self) -> bool:
        """True when partitions are judged through the provider's batch API."""
        return self.batch is not None and self.batch.enabled

    def _check_models(self) -> None:
        if self.check is not None:  # a check evaluator has no judge model (judging.check_options)
            self.check.check_budget(self.max_daily_cost_usd, self.max_monthly_cost_usd)
            return
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
            assert scale is not None  # a rubric's modes (score, reference) default their score_scale
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
        """The judges, with evaluator-level api_base / key / local judge / prices filled in; none for a check."""
        if self.check is not None:
            return []
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
        if self.check is not None:
            return self.check.label
        return ",".join(spec.model for spec in self.judge_models())

    @property
    def config_hash(self) -> str:
        """Changes exactly when something that can change a verdict changes (VERDICT_FIELDS and the models).

        The description, enabled, the trigger, sample rate and projects (which traces, not what verdict), budgets and
        prices, timeouts and retries, the endpoint and key variable, and human_agreement leave it unchanged.
        """
        verdict = self.model_dump(mode="json", include=set(VERDICT_FIELDS) - {"target", *HASHED_WHEN_SET})
        verdict |= self.model_dump(mode="json", include=set(HASHED_WHEN_SET), exclude_defaults=True)
        if self.judged_target == "session":
            verdict["target"] = "session"
        verdict["models"] = [{"model": s.model, "local_judge": s.local_judge} for s in self.judge_models()]
        canonical = json.dumps(verdict, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# Verdict fields added with agent targets: in the hash only when set away from their default, so an evaluator that
# does not use them keeps its hash (and its rows stay comparable). `target` is implied by `span` but for sessions.
HASHED_WHEN_SET = ("conversation_last_n", "context_from", "session_lookback_days", "framework_prompt")

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
    "check",
    "target",
    "conversation_last_n",
    "context_from",
    "session_lookback_days",
    "framework_prompt",  # what {{conversation}} shows
)

# What cannot: which traces are judged, when, at what price and budget, through which endpoint and key.
NON_VERDICT_FIELDS = (
    "name",
    "description",
    "enabled",
    "trigger",
    "sample_rate",
    "projects",
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
    "anchors",  # what the drift check judges, not how any trace is judged
    "model",
    "models",
    "local_judge",
    "max_prompt_chars",
    "max_failed_rate",  # the models enter the hash as (model, local_judge) pairs
    "batch",  # how requests are delivered (batch API or one by one), not what they ask
    "judge_errors",  # which traces are judged (failed ones too), not their verdict
    "judge_missing_fields",  # which traces are judged (with an empty shown field too), not their verdict
    "completion",  # when a trace is judged (once finished), not its verdict
    "alerts",  # who is told about the verdicts, not what they are
)


def default_consensus(mode: str) -> Consensus:
    return MODES[mode].default_consensus


def template_variables(mode: str) -> set[str]:
    return MODES[mode].template_variables()
