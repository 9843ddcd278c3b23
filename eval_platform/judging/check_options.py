"""The `check:` block of an evaluator file: run a scorer from the registry on each trace instead of a judge.

A check evaluator makes no model call: no model, prompt, cache or budget applies, and a field that configures
a judge call is refused when it loads. Its verdict is pass/fail (`passed`, with the scorer's value as `score`),
so the platform's agreement and experiments treat it as a `binary` evaluator. The block is flat: `scorer` and
`pass_threshold` are the check's, every other key is an option of the scorer, validated by the scorer's own
options model (`check: {scorer: regex, pattern: "^\\d+$"}`).
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from eval_platform.judging.modes import binary
from eval_platform.scoring import registry
from eval_platform.scoring.base import EmbeddingModelOptions, Scorer, ScorerOptions
from eval_platform.strict import Strict

# The fields of an evaluator file a check evaluator has; every other field configures a judge call.
CHECK_EVALUATOR_FIELDS = frozenset(
    {
        "name",
        "description",
        "enabled",
        "check",
        "trigger",
        "sample_rate",
        "projects",
        "max_failed_rate",
        "human_agreement",
        "alerts",
        "completion",  # a check on a half-finished trace is as wrong as a verdict on one
    }
)
# What a check that calls a model (a scorer of embeddings) has besides: its spend is bounded as a judge's.
BUDGET_FIELDS = frozenset({"max_daily_cost_usd", "max_monthly_cost_usd"})
CHECK_MODE = binary.MODE.name  # what a check's verdict is: passed true/false


def checkable(scorer: Scorer) -> bool:
    """A scorer that gives each trace its own value without a model: not a corpus statistic, not a judge's."""
    return scorer.aggregation == "mean" and not scorer.judge_task and not scorer.calls_evaluator


class CheckOptions(Strict):
    """Which scorer a check evaluator runs on each trace, with its options, and from what value a trace passes."""

    scorer: str = Field(description="A scorer of the registry (`scoring.registry`) with a value per trace.")
    pass_threshold: float = Field(
        1.0, ge=0, le=1, description="A trace passes when the scorer's value (0..1) is at least this."
    )
    options: dict[str, Any] = Field(default_factory=dict, description="The scorer's options (the block's other keys).")

    @model_validator(mode="before")
    @classmethod
    def _gather_options(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        own = {key: raw[key] for key in ("scorer", "pass_threshold") if key in raw}
        return {**own, "options": {key: value for key, value in raw.items() if key not in own}}

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Saved as written: the scorer's options beside `scorer` and `pass_threshold` (so a saved file loads)."""
        data = handler(self)
        return {**{key: value for key, value in data.items() if key != "options"}, **data.get("options", {})}

    @field_validator("scorer")
    @classmethod
    def _known(cls, name: str) -> str:
        usable = sorted(n for n, scorer in registry.SCORERS.items() if checkable(scorer))
        if name not in usable:
            known = "unknown scorer" if name not in registry.SCORERS else "a scorer without a value per trace"
            raise ValueError(f"{known} '{name}'; a check runs one of: {', '.join(usable)}")
        return name

    @model_validator(mode="after")
    def _valid_options(self) -> CheckOptions:
        try:
            self.scorer_def.options.model_validate(self.options)
        except ValidationError as exc:
            problems = "; ".join(
                f"option '{'.'.join(str(p) for p in err['loc']) or '(options)'}': {err['msg']}" for err in exc.errors()
            )
            raise ValueError(f"scorer '{self.scorer}': {problems}") from None
        return self

    @property
    def scorer_def(self) -> Scorer:
        return registry.get(self.scorer)

    @property
    def scorer_options(self) -> ScorerOptions:
        return self.scorer_def.options.model_validate(self.options)

    def check_budget(self, max_daily_cost_usd: float | None, max_monthly_cost_usd: float | None) -> None:
        """A budget bounds a check that calls a model (an embedding model), which must then have a known price."""
        if max_daily_cost_usd is None and max_monthly_cost_usd is None:
            return
        from eval_platform.scoring.embedding_calls import embedding_model  # it imports the call layer

        if getattr(self.scorer_options, "model_path", None) is not None:
            raise ValueError(
                f"check '{self.scorer}': a local model (model_path) makes no paid call, so a budget bounds nothing; "
                "remove max_daily_cost_usd / max_monthly_cost_usd"
            )
        options = self.scorer_options
        # budget fields are allowed on a check that embeds only, and a scorer that embeds takes these options
        assert isinstance(options, EmbeddingModelOptions)
        spec = embedding_model(options)
        if not spec.has_price():
            raise ValueError(
                f"check '{self.scorer}': embedding model '{spec.model}' has no known price in litellm's price map, so "
                "a budget cannot be enforced; set input_cost_per_million"
            )

    @property
    def label(self) -> str:
        """What check rows show in `model`."""
        return f"check:{self.scorer}"


_NO_DEFAULT = object()


def check_evaluator_fields(raw: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """A check evaluator file's fields: those that configure a judge call are refused (a check makes none), and
    the judge fields the rest of the config reads are filled: mode binary (a pass/fail verdict), no prompt.

    `saved` is what the same check evaluator holds once loaded (every field); a judge field at that value configures
    nothing and is accepted, so a saved check evaluator (every field written) loads again."""
    check = raw.get("check")
    scorer_name = check.get("scorer") if isinstance(check, dict) else getattr(check, "scorer", None)
    scorer = registry.SCORERS.get(scorer_name) if isinstance(scorer_name, str) else None
    allowed = CHECK_EVALUATOR_FIELDS | (BUDGET_FIELDS if scorer is not None and scorer.calls_model else frozenset())
    judge_fields = sorted(name for name in set(raw) - allowed if raw[name] != saved.get(name, _NO_DEFAULT))
    if judge_fields:
        raise ValueError(
            f"a check evaluator runs a scorer and calls no model: {', '.join(judge_fields)} configure a judge; "
            f"remove them (a check evaluator has only {', '.join(sorted(CHECK_EVALUATOR_FIELDS))}; one whose scorer "
            f"calls a model, such as semantic_similarity, has {' and '.join(sorted(BUDGET_FIELDS))} too)"
        )
    return {**raw, "mode": CHECK_MODE, "prompt": ""}
