"""What a scorer is: its options model, the case fields it needs, its per-case value and how it aggregates.

Scorer modules import this module, never `scoring.registry` (which imports them all): each imports first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from eval_platform.strict import Strict


class ScorerOptions(Strict):
    """Base of every scorer's options: unknown options are an error, never ignored."""


# The case key under which a scorer that `embeds` finds its texts' vectors (one float32 array per text, in order).
EMBEDDINGS = "_embeddings"


class EmbeddingModelOptions(ScorerOptions):
    """Options of a scorer that compares embeddings: the embedding model its vectors come from, either a provider's
    (`model`), whose calls take the one call path (cache, budget, retries, redaction, cost;
    `scoring.embedding_calls`), as a judge's do, or a model folder on this machine (`model_path`, read by
    `local_models`: no call, no cost, never downloaded)."""

    model: str | None = Field(
        None,
        description="An embedding model: a litellm model string (openai/text-embedding-3-small, ...), or "
        "local/<name> for the local judge's deterministic stand-in (word overlap, not meaning).",
    )
    model_path: str | None = Field(
        None,
        description="A sentence-embedding model folder on this machine (sentence-transformers or transformers "
        "layout), instead of `model`: read with the local-models extra, never downloaded, no call and no cost.",
    )
    api_base: str | None = None
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the provider key.")
    input_cost_per_million: float | None = Field(
        None, ge=0, description="USD per million input tokens; default litellm's price map (unknown: no cost known)."
    )
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)

    @model_validator(mode="after")
    def _one_model(self) -> EmbeddingModelOptions:
        if (self.model is None) == (self.model_path is None):
            raise ValueError("give exactly one of model (a provider's embedding model) and model_path (a local folder)")
        if self.model_path is not None:
            provider = [name for name in ("api_base", "api_key_env", "input_cost_per_million") if getattr(self, name)]
            if provider:
                raise ValueError(
                    f"model_path is a local model, which makes no call: {', '.join(provider)} do not apply"
                )
            from eval_platform.local_models.loading import check_installed, read_layout  # reads no weights

            check_installed()  # the local-models extra, without importing torch
            read_layout(self.model_path)  # a missing folder, or one without config.json: an error naming it
        return self


class MissingField(ValueError):
    """A case lacks a field the scorer needs; the case is FAILED with this message, never scored 0."""


class NotApplicable(ValueError):
    """The metric has no value for this row (e.g. position agreement when the other order's call failed);
    the row keeps its status and its other metrics."""


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean; None for no values (nothing answered is not a score of 0)."""
    return sum(values) / len(values) if values else None


def mean_of_values(values: Sequence[float], _outputs, _cases, _options) -> float | None:
    """The `aggregate` of a per-case scorer: the mean of its per-case values."""
    return mean(values)


# "mean": the task value is the mean of the per-case values (exact match, token F1, ...);
# "corpus": a statistic over all the task's cases at once (corpus BLEU and chrF, a kappa, a correlation), which
# the scorer computes in its own `aggregate`.
# What gold verdict a benchmark checks a judge's verdicts against: a score, a label, a preference between two.
GoldKind = Literal["rating", "label", "preference"]
Aggregation = Literal["mean", "corpus"]


@dataclass(frozen=True)
class Scorer:
    """One metric: `value(output, case, options)` per case and `aggregate(values, outputs, cases, options)`."""

    name: str
    options: type[ScorerOptions]
    value: Callable[[str, Mapping[str, Any], Any], float]
    needs: Callable[[Any], tuple[str, ...]] = lambda _options: ()
    aggregate: Callable[[Sequence[float], Sequence[str], Sequence[Mapping[str, Any]], Any], float | None] = (
        mean_of_values
    )
    # Declared, never inferred from `aggregate`: a "corpus" scorer gives its own `aggregate`, a "mean" one does not.
    aggregation: Aggregation = "mean"
    # Reads the verdict an `as_judge` task parsed from the model's reply (case fields `verdict`, `verdict_other`),
    # for judges whose mode a benchmark checks against this kind of gold verdict (a mode's `as_judge`).
    judge_task: bool = False
    judge_gold: GoldKind | None = None
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
    # False for a scorer of a trace's other fields (its tool calls, steps, latency): it never reads `output`, so a
    # check runs it on a trace without a final answer.
    reads_output: bool = True
    # `describe(output, case, options)` -> (what was measured: a count, a rate, milliseconds, dollars; the finding
    # in words), for a scorer whose value is a verdict on a quantity: a check row keeps them as raw_score and
    # reasoning. Raises what `value` raises.
    describe: Callable[[str, Mapping[str, Any], Any], tuple[float, str]] | None = None
    # A scorer of embeddings: `embeds(output, case, options)` -> the texts it compares. The caller fetches their
    # vectors through the one call path before scoring (`scoring.embedding_calls`; `options` are
    # `EmbeddingModelOptions`) and `value` reads them from case[EMBEDDINGS]. Raises what `value` raises.
    embeds: Callable[[str, Mapping[str, Any], Any], tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        if self.aggregation not in ("mean", "corpus"):
            raise ValueError(f"scorer '{self.name}': aggregation must be 'mean' or 'corpus', not {self.aggregation!r}")
        if (self.aggregation == "corpus") == (self.aggregate is mean_of_values):
            raise ValueError(
                f"scorer '{self.name}': aggregation='corpus' needs its own aggregate, and an own aggregate needs "
                "aggregation='corpus' (a 'mean' scorer's task value is the mean of its per-case values)"
            )
        if self.aggregation == "mean" and (self.statistics or self.from_statistics):
            raise ValueError(f"scorer '{self.name}': sufficient statistics belong to a corpus scorer")

    @property
    def calls_model(self) -> bool:
        """Its value needs a model call (an embedding) made before `value`, which costs money."""
        return self.embeds is not None

    @property
    def task_level(self) -> bool:
        """Its task value is a statistic over the task's cases (`aggregate`), not the mean of per-case values."""
        return self.aggregation == "corpus"

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
