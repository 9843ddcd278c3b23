"""OpenInference (Arize Phoenix's conventions): `openinference-instrumentation-openai` for the LLM spans, and
`openinference-instrumentation`'s `OITracer` for the app's own spans: a CHAIN span per request, AGENT, TOOL
(`tool.name`, `tool.parameters`, `input.value` / `output.value`) and RETRIEVER (`retrieval.documents.N.*`).
Session and user are set the OpenInference way, `using_session` / `using_user` around the request, so every span
inside carries `session.id` / `user.id`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from tools.sample_data.agent_app.convention import SpanConvention, Step, add_otlp_export, tracer_provider


class OpenInferenceConvention(SpanConvention):
    name = "openinference"
    env: dict[str, str] = {}

    def setup(self) -> None:
        from openinference.instrumentation import TracerProvider
        from openinference.instrumentation.openai import OpenAIInstrumentor
        from opentelemetry import trace

        self.tracer_provider = tracer_provider(self.name, TracerProvider)
        self.tracer_provider.add_span_processor(self.ledger)
        add_otlp_export(self.tracer_provider, self.endpoint)
        trace.set_tracer_provider(self.tracer_provider)
        OpenAIInstrumentor().instrument(tracer_provider=self.tracer_provider)
        self.tracer = self.tracer_provider.get_tracer("tools.sample_data.agent_app")

    @contextmanager
    def _span(self, name: str, kind: str, input_value: Any, **attributes: Any) -> Iterator[tuple[Any, Step]]:
        step = Step()
        with self.tracer.start_as_current_span(name, openinference_span_kind=kind) as span:
            span.set_input(input_value)
            if attributes:
                span.set_attributes(attributes)
            yield span, step

    @contextmanager
    def request(
        self, name: str, user_text: str, session_id: str | None = None, user_id: str | None = None
    ) -> Iterator[Step]:
        from openinference.instrumentation import using_session, using_user

        with ExitStack() as stack:
            if session_id:
                stack.enter_context(using_session(session_id))
            if user_id:
                stack.enter_context(using_user(user_id))
            with self._span(name, "chain", user_text) as (span, step):
                yield step
                span.set_output(step.output)

    @contextmanager
    def agent(self, name: str, user_text: str) -> Iterator[Step]:
        with self._span(name, "agent", user_text) as (span, step):
            yield step
            span.set_output(step.output)

    @contextmanager
    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> Iterator[Step]:
        from openinference.instrumentation import get_tool_attributes

        with self._span(name, "tool", json.dumps(arguments), **{"tool_call.id": call_id}) as (span, step):
            span.set_attributes(get_tool_attributes(name=name, parameters=arguments))
            yield step
            span.set_output(step.output)

    @contextmanager
    def retrieval(self, source: str, query: str) -> Iterator[Step]:
        from openinference.instrumentation import get_retriever_attributes

        with self._span(f"retrieve {source}", "retriever", query) as (span, step):
            yield step
            documents = [{"id": doc_id, "content": text, "score": score} for doc_id, text, score in step.output]
            span.set_attributes(get_retriever_attributes(documents=documents))

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
