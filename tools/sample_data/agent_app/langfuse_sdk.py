"""Langfuse's SDK (v5, OpenTelemetry-based): its drop-in `langfuse.openai` client makes the generation
observations; the app's own spans are observations of the matching type (`chain` per request, `agent`,
`retriever`) from `start_as_current_observation`, and its tools are functions decorated with
`@observe(as_type="tool")`, as Langfuse's docs show them (input: the call's `{"args": [...], "kwargs": {...}}`;
output: the result). A retriever's output is its documents (`{"id", "content", "score"}` each), as retrievers
hand them on. `propagate_attributes(session_id=..., user_id=...)` puts the session and user on every span of a
request. The SDK exports OTLP/HTTP (gzip) to `<base_url>/api/public/
otel/v1/traces` with Basic auth made of the project's public and secret keys, in batches of `flush_at`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tools.sample_data.agent_app.convention import EXPORT_BATCH_SIZE, SpanConvention, Step, tracer_provider

# The project's keys for the local receiver: dummies (the receiver checks them as Langfuse would), and the tests
# check that neither reaches a recorded file.
LANGFUSE_PUBLIC_KEY = "pk-lf-local-demo"
LANGFUSE_SECRET_KEY = "sk-lf-Jd3Ns8Pq6Yc1Rt5Ve9Gu2"
FLUSH_INTERVAL_S = 60.0


class LangfuseConvention(SpanConvention):
    name = "langfuse"
    env = {"LANGFUSE_PUBLIC_KEY": LANGFUSE_PUBLIC_KEY, "LANGFUSE_SECRET_KEY": LANGFUSE_SECRET_KEY}

    def setup(self) -> None:
        from langfuse import Langfuse

        self.tracer_provider = tracer_provider(self.name)
        self.tracer_provider.add_span_processor(self.ledger)
        self.langfuse = Langfuse(
            public_key=LANGFUSE_PUBLIC_KEY,
            secret_key=LANGFUSE_SECRET_KEY,
            base_url=self.endpoint,
            flush_at=EXPORT_BATCH_SIZE,
            flush_interval=FLUSH_INTERVAL_S,
            tracer_provider=self.tracer_provider,
            environment="local-demo",
        )

    def openai_client(self, base_url: str, api_key: str) -> Any:
        from langfuse.openai import OpenAI

        return OpenAI(base_url=base_url, api_key=api_key, max_retries=0)

    @contextmanager
    def _observation(self, as_type: str, name: str, input_value: Any) -> Iterator[Step]:
        step = Step()
        with self.langfuse.start_as_current_observation(as_type=as_type, name=name, input=input_value) as observation:
            yield step
            observation.update(output=step.output)

    @contextmanager
    def request(
        self, name: str, user_text: str, session_id: str | None = None, user_id: str | None = None
    ) -> Iterator[Step]:
        from langfuse import propagate_attributes

        step = Step()
        with self.langfuse.start_as_current_observation(as_type="chain", name=name, input=user_text) as observation:
            with propagate_attributes(session_id=session_id, user_id=user_id, trace_name=name):
                yield step
            observation.update(output=step.output)

    def agent(self, name: str, user_text: str) -> Any:
        return self._observation("agent", name, user_text)

    def run_tool(self, name: str, call_id: str, function: Callable[..., str], arguments: dict[str, Any]) -> str:
        from langfuse import observe

        return observe(name=name, as_type="tool")(function)(**arguments)

    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> Any:
        raise NotImplementedError("Langfuse tools are decorated functions here (run_tool)")

    @contextmanager
    def retrieval(self, source: str, query: str) -> Iterator[Step]:
        step = Step()
        with self.langfuse.start_as_current_observation(
            as_type="retriever", name=f"retrieve {source}", input=query
        ) as observation:
            yield step
            documents = [{"id": doc_id, "content": text, "score": score} for doc_id, text, score in step.output]
            observation.update(output=documents)

    def shutdown(self) -> None:
        self.langfuse.flush()
        self.langfuse.shutdown()
