"""OpenTelemetry GenAI semantic conventions: `opentelemetry-instrumentation-openai-v2` for the chat spans, and
`opentelemetry-util-genai`'s `TelemetryHandler` (the package the instrumentation builds on) for the app's own
spans: `invoke_workflow` for a request, `invoke_agent` (with `gen_ai.conversation.id`), `execute_tool` and
`retrieval`. The chat spans of this instrumentation carry no conversation id, so a request in a session carries
`gen_ai.conversation.id` on its workflow span; the conventions have no user id, so it carries the general
`user.id` attribute.

Three recordings, by the switches users set (with util-genai 1.1b0 the instrumentation always follows the latest
experimental conventions; `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` is set as its docs ask):
- `genai`: content `span_and_event`: messages on span attributes (`gen_ai.input.messages`,
  `gen_ai.output.messages`, `gen_ai.system_instructions`) and as `gen_ai.client.inference.operation.details` log
  events;
- `genai_events`: content `event_only`: the messages only in the log events, none on spans;
- `genai_no_content`: the instrumentation's default: no message content anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tools.sample_data.agent_app.convention import (
    EXPORT_BATCH_SIZE,
    EXPORT_DELAY_MS,
    SpanConvention,
    Step,
    add_otlp_export,
    tracer_provider,
)


def _text(role: str, text: str) -> Any:
    from opentelemetry.util.genai.types import InputMessage, Text

    return InputMessage(role=role, parts=[Text(content=text)])


def _answer(text: str) -> Any:
    from opentelemetry.util.genai.types import OutputMessage, Text

    return OutputMessage(role="assistant", parts=[Text(content=text)], finish_reason="stop")


class GenAIConvention(SpanConvention):
    name = "genai"
    env = {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_and_event",
        "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": "true",
    }

    def setup(self) -> None:
        from opentelemetry import trace
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.util.genai.handler import TelemetryHandler

        self.tracer_provider = tracer_provider(self.name)
        self.tracer_provider.add_span_processor(self.ledger)
        add_otlp_export(self.tracer_provider, self.endpoint)
        trace.set_tracer_provider(self.tracer_provider)
        self.logger_provider = LoggerProvider(resource=self.tracer_provider.resource)
        self.logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=f"{self.endpoint}/v1/logs"),
                max_export_batch_size=EXPORT_BATCH_SIZE,
                schedule_delay_millis=EXPORT_DELAY_MS,
            )
        )
        set_logger_provider(self.logger_provider)
        OpenAIInstrumentor().instrument(tracer_provider=self.tracer_provider, logger_provider=self.logger_provider)
        self._session_id: str | None = None
        self.handler = TelemetryHandler(
            tracer_provider=self.tracer_provider,
            logger_provider=self.logger_provider,
        )

    @contextmanager
    def request(
        self, name: str, user_text: str, session_id: str | None = None, user_id: str | None = None
    ) -> Iterator[Step]:
        step = Step()
        self._session_id = session_id  # the agent span inside carries it as gen_ai.conversation.id
        with self.handler.workflow(name) as invocation:
            if session_id:
                invocation.attributes["gen_ai.conversation.id"] = session_id
            if user_id:
                invocation.attributes["user.id"] = user_id
            if self.handler.should_capture_content():
                invocation.input_messages = [_text("user", user_text)]
            yield step
            if self.handler.should_capture_content() and step.output is not None:
                invocation.output_messages = [_answer(step.output)]

    @contextmanager
    def agent(self, name: str, user_text: str) -> Iterator[Step]:
        from tools.sample_data.agent_app.app import APP_MODEL

        step = Step()
        with self.handler.invoke_local_agent(agent_name=name, request_model=APP_MODEL) as invocation:
            invocation.conversation_id = self._session_id
            if self.handler.should_capture_content():
                invocation.input_messages = [_text("user", user_text)]
            yield step
            if self.handler.should_capture_content() and step.output is not None:
                invocation.output_messages = [_answer(step.output)]

    @contextmanager
    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> Iterator[Step]:
        step = Step()
        with self.handler.tool(name, tool_call_id=call_id, tool_type="function") as invocation:
            if self.handler.should_capture_content():
                invocation.arguments = arguments
            yield step
            if self.handler.should_capture_content():
                invocation.tool_result = step.output

    @contextmanager
    def retrieval(self, source: str, query: str) -> Iterator[Step]:
        step = Step()
        with self.handler.retrieval(data_source_id=source) as invocation:
            if self.handler.should_capture_content():
                invocation.query_text = query
            yield step
            invocation.top_k = len(step.output)
            if self.handler.should_capture_content():
                invocation.documents = [
                    {"id": doc_id, "content": text, "score": score} for doc_id, text, score in step.output
                ]

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()


class GenAIEventsConvention(GenAIConvention):
    name = "genai_events"
    env = {**GenAIConvention.env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only"}


class GenAINoContentConvention(GenAIConvention):
    name = "genai_no_content"
    env = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
