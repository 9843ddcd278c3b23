"""The option blocks of an evaluator file: score scale, rubric, reference, few-shot examples, human agreement,
batch delivery and when a trace is complete enough to judge. Each is a strict pydantic model; `EvaluatorConfig`
(in `judging.config`) holds them.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

from pydantic import Field, model_validator

from eval_platform.strict import Strict


class ScoreScale(Strict):
    min: float = 1.0
    max: float = 5.0

    @model_validator(mode="after")
    def _ordered(self) -> ScoreScale:
        if self.max <= self.min:
            raise ValueError(f"score_scale.max ({self.max}) must be greater than score_scale.min ({self.min})")
        return self


class RubricLevel(Strict):
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
        if self.range is not None:
            return self.range
        assert self.score is not None  # `_one_of`: a level without a range has a score
        return self.score, self.score


class Rubric(Strict):
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


class ReferenceOptions(Strict):
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


class FewShotExample(Strict):
    """A worked example shown to the judge: the content it would see and the reply it should give."""

    input: str | None = None
    output: str | None = None
    output_a: str | None = None
    output_b: str | None = None
    expected: str | None = None
    verdict: dict[str, Any]


class HumanAgreementOptions(Strict):
    """Which human annotations this evaluator's verdicts are checked against in the `agreement` table."""

    task: str = Field(description="The annotation task (annotations' `task`) labelling the same items.")
    criterion: str | None = Field(None, description="The task's criterion; all criteria when omitted.")
    floor: float | None = Field(
        None, ge=-1, le=1, description="Minimum Cohen's kappa with the human majority; below it a WARN check fails."
    )


class AnchorOptions(Strict):
    """Anchor items: a pinned dataset version with expected verdicts, judged whenever the evaluator's configuration
    (config hash) or the model its provider reports changes, and on a schedule, to detect judge drift
    (`agreement.drift`; asset `judge_drift`)."""

    dataset: str = Field(description="The dataset (`datasets/<name>/v<N>.<ext>`) holding the anchor items.")
    version: int = Field(ge=1, description="Its version, pinned: the same anchors every time.")
    output: str = Field(
        "metadata.output",
        description="The case field holding the response the judge sees as {{output}} (`input`, `expected_output` "
        "or `metadata.<key>`).",
    )
    expected: str = Field(
        "expected_output",
        description="The case field holding the expected verdict: a score on the score_scale, true / false, or a "
        "label.",
    )
    alpha: float = Field(0.05, gt=0, lt=1, description="Significance level of the paired test of the mean shift.")
    schedule: str = Field("0 6 * * 1", description="Cron schedule (UTC) of the regular anchor check.")


# Providers whose batch API batch mode does not speak, and why (see README "Batch mode").
BATCH_REFUSED = {
    "vertex_ai": "Vertex AI batch prediction reads its requests from and writes its results to Google Cloud "
    "Storage buckets, which batch mode does not use",
    "bedrock": "Bedrock batch inference reads its requests from and writes its results to S3 buckets, which batch "
    "mode does not use",
    "azure": "litellm rewrites a reasoning model's parameters, which a batch line would not",
    "openai": "litellm rewrites a reasoning model's parameters, which a batch line would not",
}


class BatchOptions(Strict):
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
    max_requests: int | None = Field(
        None,
        gt=0,
        description="Requests per batch at most (default: the provider's limit, OpenAI and Azure 50,000, Anthropic "
        "100,000); a day with more is split into several batches.",
    )
    max_bytes: int | None = Field(
        None,
        gt=0,
        description="Size of a batch's input at most, in bytes (default: the provider's limit, OpenAI and Azure "
        "200 MB, Anthropic 256 MB); a day with more is split into several batches.",
    )


DEFAULT_QUIET_PERIOD_S = 60.0
DEFAULT_SESSION_QUIET_PERIOD_S = 1800.0


class CompletionOptions(Strict):
    """When a trace (a session) is finished enough to be judged (`judging.completion`): a trace assembled from spans
    once its root span has ended and no span of it started or ended for `quiet_period_s`; a session once no turn of
    it did for `session_quiet_period_s`. Until then it waits: no row, no call, counted in the partition's
    `traces_waiting_for_completion`. A trace read whole from one row (JSONL, CSV, Parquet) is complete when read.

    Which traces are judged when, not what their verdict is: it stays out of `config_hash`."""

    quiet_period_s: float = Field(
        DEFAULT_QUIET_PERIOD_S,
        ge=0,
        description="Seconds without a span of the trace starting or ending before it is judged (0: as soon as its "
        "root has ended).",
    )
    session_quiet_period_s: float = Field(
        DEFAULT_SESSION_QUIET_PERIOD_S,
        ge=0,
        description="target session: seconds without a turn (trace) of the session before it is judged.",
    )
