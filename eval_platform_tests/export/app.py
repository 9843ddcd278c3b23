"""The traced application of the export tests: a tiny agent traced with the OpenTelemetry SDK (GenAI conventions).

Each run is an `invoke_agent` root span with a `chat` child span, both carrying `gen_ai.*` attributes and the
messages, as an instrumented app exports them. The same finished spans go to the day's OTLP/JSON file under the
data root (the platform ingests it, as the Collector's file exporter would have written it) and, when given, over
OTLP/HTTP to a real backend (Phoenix) through the SDK's own exporter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from tools.sample_data.otlp_receiver import to_otlp_json

PROJECT = "export-app"  # the app's service and Phoenix project name


class _Keep(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _nanos(day: str, second: int) -> int:
    return int(datetime.fromisoformat(f"{day}T10:00:{second:02d}+00:00").timestamp() * 1e9)


def run_app(
    root: Path,
    day: str,
    questions: list[tuple[str, str]],
    phoenix_url: str | None = None,
    file_name: str = "app.otlp.jsonl",
    sessions: list[str] | None = None,
) -> list[dict]:
    """Trace one agent run per (question, answer), write the day's OTLP/JSON file, and send the spans to Phoenix
    when `phoenix_url` is given; `sessions`: per run, the session it belongs to (its root span's `session.id`).
    Returns per run its trace id, root span id and chat span id (hex)."""
    kept = _Keep()
    provider = TracerProvider(
        resource=Resource.create({"service.name": PROJECT, "openinference.project.name": PROJECT})
    )
    provider.add_span_processor(SimpleSpanProcessor(kept))
    if phoenix_url is not None:
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix_url}/v1/traces")))
    tracer = provider.get_tracer("export-test-app")
    runs = []
    for i, (question, answer) in enumerate(questions):
        start = _nanos(day, 2 * i)
        root_attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "helper",
            "gen_ai.input.messages": _messages("user", question),
            "gen_ai.output.messages": _messages("assistant", answer),
        }
        if sessions is not None:
            root_attributes["session.id"] = sessions[i]
        with tracer.start_as_current_span(
            "invoke_agent helper",
            kind=SpanKind.INTERNAL,
            start_time=start,
            attributes=root_attributes,
            end_on_exit=False,
        ) as agent:
            chat_attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "app-model",
                "gen_ai.response.model": "app-model",
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 7,
                "gen_ai.input.messages": _messages("user", question),
                "gen_ai.output.messages": _messages("assistant", answer),
            }
            chat = tracer.start_span(
                "chat app-model", kind=SpanKind.CLIENT, start_time=start + 1_000_000, attributes=chat_attributes
            )
            chat.end(end_time=start + 500_000_000)
            agent.end(end_time=start + 600_000_000)
        runs.append(
            {
                "trace_id": format(agent.get_span_context().trace_id, "032x"),
                "root_span_id": format(agent.get_span_context().span_id, "016x"),
                "chat_span_id": format(chat.get_span_context().span_id, "016x"),
            }
        )
    provider.shutdown()
    folder = root / "traces" / day
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file_name).write_text(json.dumps(to_otlp_json(encode_spans(kept.spans))) + "\n")
    return runs
