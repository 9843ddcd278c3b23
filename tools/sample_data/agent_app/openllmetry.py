"""OpenLLMetry / Traceloop: `traceloop-sdk` as its users run it. `Traceloop.init(...)` instruments `openai` (its
`opentelemetry-instrumentation-openai`, content on: `TRACELOOP_TRACE_CONTENT=true`), and the app's own steps are
its functions decorated with `@workflow` (a request), `@agent`, `@tool` and `@task` (the retrieval: Traceloop has
no retrieval kind). The SDK names those spans `<name>.workflow` / `.agent` / `.tool` / `.task` and writes
`traceloop.span.kind`, `traceloop.entity.name`, `traceloop.entity.input` (JSON `{"args": [...], "kwargs": {...}}`
of the call) and `traceloop.entity.output` (JSON of the return value). The session and user are association
properties set with `Traceloop.set_association_properties` inside the request; the SDK's span processor copies
them (`traceloop.association.properties.session_id` / `.user_id`) and `traceloop.workflow.name` onto every span
started inside.

Kept off the network: spans go only to the local receiver (`exporter=`; no Traceloop API key, so no Traceloop
client, prompt sync or metrics/logs export), only the OpenAI instrumentation is enabled (`instruments=`, not the
requests/urllib3/sqlalchemy... ones the SDK would otherwise turn on), and `TRACELOOP_TELEMETRY=false`,
`TRACELOOP_METRICS_ENABLED=false`. The SDK adds its span processor to the tracer provider already set globally,
so the app's seeded ids and ledger apply; `OTEL_BSP_*` make its batch processor send batches of
`EXPORT_BATCH_SIZE` like the other recordings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tools.sample_data.agent_app.convention import (
    EXPORT_BATCH_SIZE,
    EXPORT_DELAY_MS,
    SERVICE_NAME,
    Convention,
    tracer_provider,
)


class OpenLLMetryConvention(Convention):
    name = "openllmetry"
    env = {
        "TRACELOOP_TRACE_CONTENT": "true",
        "TRACELOOP_TELEMETRY": "false",
        "TRACELOOP_METRICS_ENABLED": "false",
        "TRACELOOP_LOGGING_ENABLED": "false",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(EXPORT_BATCH_SIZE),
        "OTEL_BSP_SCHEDULE_DELAY": str(EXPORT_DELAY_MS),
    }

    def setup(self) -> None:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from traceloop.sdk import Traceloop
        from traceloop.sdk.instruments import Instruments

        self.tracer_provider = tracer_provider(self.name)
        self.tracer_provider.add_span_processor(self.ledger)
        trace.set_tracer_provider(self.tracer_provider)
        Traceloop.init(
            app_name=SERVICE_NAME,
            api_endpoint=self.endpoint,  # never used with a custom exporter; loopback all the same
            exporter=OTLPSpanExporter(endpoint=f"{self.endpoint}/v1/traces"),
            disable_batch=False,
            telemetry_enabled=False,
            instruments={Instruments.OPENAI},
        )

    def run_request(
        self,
        name: str,
        handle: Callable[[str], str | None],
        question: str,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> str | None:
        from traceloop.sdk import Traceloop
        from traceloop.sdk.decorators import workflow

        @workflow(name=name)
        def request(question: str) -> str | None:
            properties = {key: value for key, value in (("session_id", session_id), ("user_id", user_id)) if value}
            if properties:
                Traceloop.set_association_properties(properties)
            return handle(question)

        return request(question)

    def run_agent(self, name: str, run: Callable[[str], str], question: str) -> str:
        from traceloop.sdk.decorators import agent

        return agent(name=name)(run)(question)

    def run_tool(self, name: str, call_id: str, function: Callable[..., str], arguments: dict[str, Any]) -> str:
        from traceloop.sdk.decorators import tool

        return tool(name=name)(function)(**arguments)

    def run_retrieval(
        self, source: str, search: Callable[[str], list[tuple[str, str, float]]], query: str
    ) -> list[tuple[str, str, float]]:
        from traceloop.sdk.decorators import task

        return task(name=f"retrieve_{source}")(search)(query)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
