"""OpenLLMetry / Traceloop: `opentelemetry-instrumentation-openai` for the chat spans (content on by default,
`TRACELOOP_TRACE_CONTENT=true`).

The app's own spans follow what Traceloop's SDK decorators (`@workflow`, `@agent`, `@tool`, `@task`) write, with
the attribute names of `opentelemetry-semantic-conventions-ai`: spans named `<name>.workflow` / `.agent` /
`.tool` / `.task` with `traceloop.span.kind`, `traceloop.entity.name`, `traceloop.workflow.name`,
`traceloop.entity.input` / `traceloop.entity.output` (JSON), and the session and user as association properties
(`traceloop.association.properties.session_id` / `.user_id`) on every span of the request, as the SDK's span
processor copies them. `traceloop-sdk` itself is not a dependency: it pins OpenTelemetry below the versions
used here and brings some forty other instrumentations, so `AssociationProperties` below does its one job here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as context_api
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from eval_platform.sample_data.agent_app.convention import Convention, Step, add_otlp_export, tracer_provider

# The context keys traceloop-sdk keeps them under.
ASSOCIATION_PROPERTIES_KEY = "association_properties"
WORKFLOW_NAME_KEY = "workflow_name"


class AssociationProperties(SpanProcessor):
    """Copies the request's association properties and workflow name onto every span started inside it."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        from opentelemetry.semconv_ai import SpanAttributes

        properties = context_api.get_value(ASSOCIATION_PROPERTIES_KEY, parent_context) or {}
        for key, value in properties.items():
            span.set_attribute(f"{SpanAttributes.TRACELOOP_ASSOCIATION_PROPERTIES}.{key}", value)
        workflow = context_api.get_value(WORKFLOW_NAME_KEY, parent_context)
        if workflow:
            span.set_attribute(SpanAttributes.TRACELOOP_WORKFLOW_NAME, workflow)

    def on_end(self, span: ReadableSpan) -> None:
        pass


class OpenLLMetryConvention(Convention):
    name = "openllmetry"
    env = {"TRACELOOP_TRACE_CONTENT": "true"}

    def setup(self) -> None:
        from opentelemetry import trace
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        self.tracer_provider = tracer_provider(self.name)
        self.tracer_provider.add_span_processor(self.ledger)
        self.tracer_provider.add_span_processor(AssociationProperties())
        add_otlp_export(self.tracer_provider, self.endpoint)
        trace.set_tracer_provider(self.tracer_provider)
        OpenAIInstrumentor().instrument(tracer_provider=self.tracer_provider)
        self.tracer = self.tracer_provider.get_tracer("traceloop.tracer")

    @contextmanager
    def _entity(self, kind: str, name: str, inputs: dict[str, Any]) -> Iterator[Step]:
        from opentelemetry.semconv_ai import SpanAttributes, TraceloopSpanKindValues

        step = Step()
        attributes = {
            SpanAttributes.TRACELOOP_SPAN_KIND: TraceloopSpanKindValues(kind).value,
            SpanAttributes.TRACELOOP_ENTITY_NAME: name,
            SpanAttributes.TRACELOOP_ENTITY_INPUT: json.dumps({"args": [], "kwargs": inputs}),
        }
        with self.tracer.start_as_current_span(f"{name}.{kind}", attributes=attributes) as span:
            yield step
            span.set_attribute(SpanAttributes.TRACELOOP_ENTITY_OUTPUT, json.dumps(step.output))

    @contextmanager
    def request(
        self, name: str, user_text: str, session_id: str | None = None, user_id: str | None = None
    ) -> Iterator[Step]:
        properties = {key: value for key, value in (("session_id", session_id), ("user_id", user_id)) if value}
        ctx = context_api.set_value(ASSOCIATION_PROPERTIES_KEY, properties)
        token = context_api.attach(context_api.set_value(WORKFLOW_NAME_KEY, name, ctx))
        try:
            with self._entity("workflow", name, {"question": user_text}) as step:
                yield step
        finally:
            context_api.detach(token)

    def agent(self, name: str, user_text: str) -> Any:
        return self._entity("agent", name, {"question": user_text})

    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> Any:
        return self._entity("tool", name, arguments)

    def retrieval(self, source: str, query: str) -> Any:
        return self._entity("task", f"retrieve_{source}", {"query": query})

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
