"""OpenTelemetry GenAI evaluation events over OTLP/HTTP: one `gen_ai.evaluation.result` event per verdict.

The GenAI semantic conventions (v1.39, development status) define the evaluation result as an *event*: a log
record whose event name is `gen_ai.evaluation.result`, with `gen_ai.evaluation.name` (required),
`gen_ai.evaluation.score.value` and `gen_ai.evaluation.score.label` (when applicable) and
`gen_ai.evaluation.explanation` (recommended), "parented to the GenAI operation span being evaluated": its trace
and span ids are the judged span's. So each verdict is one log record POSTed to the receiver's `/v1/logs`, carrying
the app's own trace and span ids; a backend that joins logs to traces (most do) shows the judge's score on the
app's span. The platform's own identity rides along in `eval_platform.*` attributes (the verdict key, the judge
model, the evaluator's config hash, the platform's trace id).

Sent with the OpenTelemetry SDK's own OTLP/HTTP exporter (protobuf, its retries on 429/5xx and connection errors
within `timeout_s`), an optional extra: `pip install 'eval_platform[otel-export]'`. It is imported only when a
destination of this type sends, so the platform loads and runs without it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Literal

import polars as pl
from pydantic import Field

from eval_platform.export.base import Destination, ExportError
from eval_platform.llm.redaction import clip

EVENT_NAME = "gen_ai.evaluation.result"
LOGS_PATH = "/v1/logs"
INSTALL_HINT = "pip install 'eval_platform[otel-export]' (opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
# The SDK's exporter's words when it stops retrying an error it treats as transient (429, 5xx, a connection error).
_SDK_GAVE_UP_RETRYING = ("Transient error", "Failed to export logs batch due to timeout, max retries")
# The SDK's exporter reports why an export failed only to its logger; its words become the error's.
_EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http._log_exporter", "opentelemetry.exporter.otlp.common.http")


class OtlpDestination(Destination):
    """An OTLP/HTTP receiver (an OpenTelemetry Collector, or any backend's OTLP endpoint)."""

    type: Literal["otlp"]
    endpoint: str = Field(
        pattern=r"^https?://",
        description="The receiver's base URL (http://collector:4318); /v1/logs is appended unless already there.",
    )
    headers_env: str | None = Field(
        None,
        description="The environment variable holding request headers as OTLP's `key=value,key2=value2` "
        "(an API key, a token): never in the file.",
    )
    service_name: str = Field("eval_platform", description="The events' resource `service.name`.")

    def logs_url(self) -> str:
        base = self.endpoint.rstrip("/")
        return base if base.endswith(LOGS_PATH) else base + LOGS_PATH

    def headers(self, env: Mapping[str, str]) -> dict[str, str]:
        if self.headers_env is None:
            return {}
        text = env.get(self.headers_env)
        if not text:
            raise ExportError(f"destination '{self.name}': ${self.headers_env} (headers_env) is not set")
        pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise ExportError(f"destination '{self.name}': ${self.headers_env} is not `key=value,key2=value2`")
        return {key.strip(): value.strip() for key, value in pairs}

    def secrets(self, env: Mapping[str, str]) -> list[str]:
        text = env.get(self.headers_env or "") or ""
        return [value for item in text.split(",") if "=" in item for value in [item.split("=", 1)[1].strip()] if value]

    def send(self, batch: pl.DataFrame, env: Mapping[str, str]) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs.export import LogRecordExportResult
        except ImportError as exc:
            missing = f"destination '{self.name}': the OpenTelemetry exporter is not installed: {INSTALL_HINT}"
            raise ExportError(missing) from exc
        exporter = OTLPLogExporter(endpoint=self.logs_url(), headers=self.headers(env), timeout=self.timeout_s)
        try:
            with _exporter_messages() as messages:
                result = exporter.export(log_records(batch, self.service_name))
        finally:
            exporter.shutdown()
        if result != LogRecordExportResult.SUCCESS:
            why = "; ".join(messages) or "no reason given"
            raise ExportError(
                clip(
                    f"destination '{self.name}': OTLP/HTTP export to {self.logs_url()} failed: {why}",
                    500,
                    self.secrets(env),
                ),
                # the SDK gave up on an error it retries (429, 5xx, a connection error): the receiver may be back
                # in a moment; an error it does not retry (400, 401, ...) is not transient
                transient=any(m.startswith(_SDK_GAVE_UP_RETRYING) for m in messages),
            )


def event_attributes(row: Mapping[str, Any]) -> dict[str, Any]:
    """The `gen_ai.evaluation.result` attributes of one verdict (VERDICT_COLUMNS)."""
    attributes: dict[str, Any] = {"gen_ai.evaluation.name": row["evaluator"]}
    if row["score"] is not None:
        attributes["gen_ai.evaluation.score.value"] = float(row["score"])
    label = score_label(row)
    if label is not None:
        attributes["gen_ai.evaluation.score.label"] = label
    if row["reasoning"]:
        attributes["gen_ai.evaluation.explanation"] = row["reasoning"]
    attributes |= {
        "eval_platform.verdict_key": row["verdict_key"],
        "eval_platform.trace_id": row["trace_id"],
        "eval_platform.judge.model": row["model"],
        "eval_platform.config_hash": row["config_hash"],
    }
    if row.get("session_id"):
        attributes["gen_ai.conversation.id"] = row["session_id"]  # the GenAI conventions' name for a session
    attributes |= {f"eval_platform.{name}": value for name, value in shared_context(row).items()}
    return {key: value for key, value in attributes.items() if value is not None}


def shared_context(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a verdict about more than the span it is attached to says of the rest (both destinations send it):
    a session verdict's session, a pairwise verdict's side and the other side's trace."""
    context = {
        "session_id": row.get("session_id"),
        "pair.side": row.get("pair_side"),
        "pair.opponent_trace_id": row.get("opponent_trace_id"),
    }
    return {name: value for name, value in context.items() if value is not None}


def score_label(row: Mapping[str, Any]) -> str | None:
    """The verdict's label: the judge's own (categorical, rubric), else pass/fail for a pass/fail verdict."""
    if row["label"]:
        return str(row["label"])
    if row["passed"] is not None:
        return "pass" if row["passed"] else "fail"
    return None


def log_records(batch: pl.DataFrame, service_name: str) -> list[Any]:
    """The batch's verdicts as the SDK's readable log records, each in the judged span's trace context."""
    from opentelemetry._logs import LogRecord
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

    resource = Resource.create({"service.name": service_name})
    scope = InstrumentationScope("eval_platform.export")
    records = []
    for row in batch.iter_rows(named=True):
        judged_at: datetime | None = row["judged_at"]
        judged = SpanContext(
            trace_id=int(row["otel_trace_id"], 16),
            span_id=int(row["otel_span_id"], 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        record = LogRecord(
            timestamp=int(judged_at.timestamp() * 1e9) if judged_at is not None else None,
            context=set_span_in_context(NonRecordingSpan(judged)),  # the event's parent: the judged span
            event_name=EVENT_NAME,
            attributes=event_attributes(row),
        )
        records.append(ReadableLogRecord(log_record=record, resource=resource, instrumentation_scope=scope))
    return records


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _exporter_messages() -> Iterator[list[str]]:
    """What the SDK's exporter logs while it sends: why an export failed (an HTTP status, a refused connection)."""
    handler = _Collect()
    loggers = [logging.getLogger(name) for name in _EXPORTER_LOGGERS]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
