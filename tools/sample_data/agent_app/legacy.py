"""Older releases of the instrumentations, for the forms users still have in their exports and the current
releases no longer write (`LEGACY_CONVENTIONS`). Each is recorded with `record --python <scratch venv>`, the venv
holding those releases (eval_platform_tests/fixtures/otel/README.md has the commands); the project's test extra
holds the current ones, so these recordings are committed, not re-made by the tests.

- `openllmetry_indexed`: `traceloop-sdk` / `opentelemetry-instrumentation-openai` 0.54.0, the last release that
  writes the messages as indexed attributes (`gen_ai.prompt.N.role/content/tool_call_id/tool_calls.M.*`,
  `gen_ai.completion.N.role/content/finish_reason/tool_calls.M.*`) and the request's tools as
  `llm.request.functions.N.*`; 0.55.0 moved to `gen_ai.input.messages` / `gen_ai.output.messages`. Same app code
  as `openllmetry` (the SDK's `Traceloop.init` and decorators took the same arguments then).
- `genai_log_events`: `opentelemetry-instrumentation-openai-v2` 2.1b0 (2.0b0 to 2.3b0 write the same), GenAI
  semantic conventions v1.28: no content on spans; each input message is a log event `gen_ai.system.message` /
  `gen_ai.user.message` / `gen_ai.assistant.message` / `gen_ai.tool.message` and each choice a `gen_ai.choice`
  event, the content in the event's body, emitted through the (since deprecated) Events API. That era had no
  GenAI conventions, nor `opentelemetry-util-genai`, for an app's own steps: the app opens its request, agent
  and tool spans with the plain OpenTelemetry API and gives them the attributes today's conventions name
  (`gen_ai.operation.name` `invoke_agent` / `execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id`,
  `gen_ai.conversation.id`, `user.id`), as an app instrumenting itself would.
- `genai_log_events_no_content`: the same release without content capture (its default).
- `openlit_prompt_events`: OpenLIT 1.34.43, which writes the deprecated `gen_ai.prompt` / `gen_ai.completion` (GenAI
  conventions v1.26-1.27) both as span attributes and as the span events `gen_ai.content.prompt` /
  `gen_ai.content.completion` (no openai-v2 or OpenLLMetry release wrote those events); the app's own spans as in
  `genai_log_events`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tools.sample_data.agent_app.convention import (
    EXPORT_BATCH_SIZE,
    EXPORT_DELAY_MS,
    SERVICE_NAME,
    SpanConvention,
    Step,
    add_otlp_export,
    tracer_provider,
)
from tools.sample_data.agent_app.openllmetry import OpenLLMetryConvention


class IndexedOpenLLMetryConvention(OpenLLMetryConvention):
    name = "openllmetry_indexed"
    requirements = (
        "traceloop-sdk==0.54.0",
        "opentelemetry-instrumentation-openai==0.54.0",
        "opentelemetry-sdk==1.38.0",
        "opentelemetry-exporter-otlp-proto-http==1.38.0",
        "openai==2.14.0",
    )


class PlainSpansConvention(SpanConvention):
    """The app's own request, agent and tool spans opened with the plain OpenTelemetry API, with the attributes
    today's GenAI conventions name (the older releases had none for an app's steps); `setup` adds the library."""

    tracer: Any

    def start_tracing(self) -> None:
        """The app's tracer provider (seeded ids, ledger, batched OTLP export), set globally."""
        from opentelemetry import trace

        self.tracer_provider = tracer_provider(self.name)
        self.tracer_provider.add_span_processor(self.ledger)
        add_otlp_export(self.tracer_provider, self.endpoint)
        trace.set_tracer_provider(self.tracer_provider)
        self.tracer = self.tracer_provider.get_tracer("agent-demo-app")
        self._session_id: str | None = None

    @contextmanager
    def _span(self, name: str, attributes: dict[str, Any]) -> Iterator[Step]:
        step = Step()
        attributes = {key: value for key, value in attributes.items() if value is not None}
        with self.tracer.start_as_current_span(name, attributes=attributes):
            yield step

    @contextmanager
    def request(
        self, name: str, user_text: str, session_id: str | None = None, user_id: str | None = None
    ) -> Iterator[Step]:
        self._session_id = session_id
        with self._span(name, {"gen_ai.conversation.id": session_id, "user.id": user_id}) as step:
            yield step

    @contextmanager
    def agent(self, name: str, user_text: str) -> Iterator[Step]:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.conversation.id": self._session_id,
        }
        with self._span(f"invoke_agent {name}", attributes) as step:
            yield step

    @contextmanager
    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> Iterator[Step]:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
        with self._span(f"execute_tool {name}", attributes) as step:
            yield step

    @contextmanager
    def retrieval(self, source: str, query: str) -> Iterator[Step]:
        with self._span(f"retrieve {source}", {}) as step:
            yield step

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()


class GenAILogEventsConvention(PlainSpansConvention):
    name = "genai_log_events"
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    # the OpenTelemetry family of its release (January 2025: API/SDK 1.29, instrumentation 0.50b0) and an openai of then
    requirements = (
        "opentelemetry-instrumentation-openai-v2==2.1b0",
        "opentelemetry-sdk==1.29.0",
        "opentelemetry-exporter-otlp-proto-http==1.29.0",
        "opentelemetry-instrumentation==0.50b0",
        "opentelemetry-semantic-conventions==0.50b0",
        "openai==1.59.9",
    )

    def setup(self) -> None:
        from opentelemetry._events import set_event_logger_provider
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        from opentelemetry.sdk._events import EventLoggerProvider
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        self.start_tracing()
        self.logger_provider = LoggerProvider(resource=self.tracer_provider.resource)
        self.logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=f"{self.endpoint}/v1/logs"),
                max_export_batch_size=EXPORT_BATCH_SIZE,
                schedule_delay_millis=EXPORT_DELAY_MS,
            )
        )
        set_logger_provider(self.logger_provider)
        event_logger_provider = EventLoggerProvider(self.logger_provider)
        set_event_logger_provider(event_logger_provider)
        OpenAIInstrumentor().instrument(
            tracer_provider=self.tracer_provider, event_logger_provider=event_logger_provider
        )

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()


class GenAILogEventsNoContentConvention(GenAILogEventsConvention):
    """The same release with its default, no content capture: the events are still sent, with roles only (and an
    assistant's tool calls without their arguments)."""

    name = "genai_log_events_no_content"
    env = {}


class OpenLITConvention(PlainSpansConvention):
    """OpenLIT 1.34.43: `openlit.init(tracer=<the app's>)`, only its OpenAI instrumentor, content captured (its
    default), no metrics; its price list from a local empty file (it would fetch one from the network)."""

    name = "openlit_prompt_events"
    requirements = (
        "openlit==1.34.43",
        "openai==1.99.9",
        "opentelemetry-sdk==1.36.0",
        "opentelemetry-api==1.36.0",
        "opentelemetry-exporter-otlp-proto-http==1.36.0",
        "opentelemetry-instrumentation==0.57b0",
    )

    def setup(self) -> None:
        import tempfile
        from pathlib import Path

        import openlit
        from openlit._instrumentors import get_all_instrumentors

        self.start_tracing()
        prices = Path(tempfile.mkdtemp()) / "pricing.json"
        prices.write_text('{"chat": {}, "embeddings": {}}')
        openlit.init(
            application_name=SERVICE_NAME,
            environment="local-demo",
            tracer=self.tracer_provider.get_tracer("openlit.otel.tracing"),
            disable_metrics=True,
            pricing_json=str(prices),
            disabled_instrumentors=[name for name in get_all_instrumentors() if name != "openai"],
        )
