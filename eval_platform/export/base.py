"""What every export destination shares: its config fields, the verdict columns it receives and its error."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl
from pydantic import Field

from eval_platform.strict import Strict

# The columns of the frame a destination's `send` receives (`verdicts.exportable`), one row per verdict.
VERDICT_COLUMNS = (
    "verdict_key",  # the verdict's identity (`verdicts.verdict_key`): the ledger's key, Phoenix's identifier
    "evaluator",
    "date",
    "trace_id",  # the platform's trace id (traces.trace_id)
    "otel_trace_id",  # the app's OpenTelemetry trace id (32 hex digits)
    "otel_span_id",  # the judged span: the evaluator's target span, else the trace's root span (16 hex digits)
    "model",
    "provider_model",
    "sample",
    "score",
    "label",
    "passed",
    "reasoning",
    "config_hash",
    "judged_at",
    "session_id",  # a session verdict: the judged session (the verdict is on its last trace so far)
    "pair_side",  # a pairwise verdict, one row per side: A (judge_scores.trace_id) or B (trace_id_b)
    "opponent_trace_id",  # a pairwise verdict: the platform's id of the other side's trace
)


class ExportError(Exception):
    """A send that did not reach its destination; the message names the destination and is redacted.

    `refused_spans`: when the receiver refused only the verdicts on these spans (Phoenix: spans it does not have),
    their ids; the rest of the batch can be sent without them. `transient`: the receiver may take it a moment
    later (a 5xx or 429 answer, a refused or timed-out connection): the run tries again, with backoff."""

    def __init__(self, message: str, refused_spans: frozenset[str] = frozenset(), transient: bool = False):
        super().__init__(message)
        self.refused_spans = refused_spans
        self.transient = transient


class Destination(Strict):
    """The fields every destination of verdict_export.yaml has; each kind adds its own and its `send`."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="Names the destination in the ledger (`verdict_exports.destination`) and in errors.",
    )
    evaluators: list[str] | None = Field(None, description="Only these evaluators' verdicts; unset: every one.")
    timeout_s: float = Field(10.0, gt=0, le=300, description="One request's time limit, retries included.")
    batch_size: int = Field(500, ge=1, le=10_000, description="Verdicts per request.")
    retries: int = Field(
        3,
        ge=0,
        le=10,
        description="Tries again this many times within a run after a transient error (5xx, 429, "
        "a refused or timed-out connection).",
    )
    retry_backoff_s: float = Field(
        1.0, ge=0, le=60, description="The wait before the first retry, doubled before each next one."
    )

    def wants(self, evaluator: str) -> bool:
        return self.evaluators is None or evaluator in self.evaluators

    def secrets(self, env: Mapping[str, str]) -> list[str]:
        """The secret values this destination reads from `env` (redacted from every error and log)."""
        return []

    def send(self, batch: pl.DataFrame, env: Mapping[str, str]) -> None:
        """Send `batch` (VERDICT_COLUMNS) or raise ExportError; a return means the receiver accepted all of it."""
        raise NotImplementedError
