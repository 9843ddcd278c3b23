"""What the demo app needs from a tracing library, and the OpenTelemetry SDK set-up three of them share.

A `Convention` owns one instrumentation: it patches `openai` (the library does that, globally, so each runs in
its own process), hands out the OpenAI client, and runs the app's own steps (a request, an agent, a tool, a
retrieval: plain functions of the app) inside that library's spans, the way its users write them: Traceloop's
users decorate the functions (`@workflow`, `@tool`, ...), the others open spans around the call
(`SpanConvention`). The scenarios in `app.py` are the same for all.
"""

from __future__ import annotations

import random
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator

SERVICE_NAME = "agent-demo-app"
# Spans leave the app in batches of this many as they end (BatchSpanProcessor / Langfuse's flush_at), so one
# trace's spans land on several lines of the Collector-style file, as they do in production.
EXPORT_BATCH_SIZE = 4
# Long enough that batches are cut by size only (and the last one at shutdown): the lines come out the same
# on every run instead of depending on a timer.
EXPORT_DELAY_MS = 60_000


@dataclass
class Step:
    """A span the app opened; the app sets `output` (text, a tool result, retrieved documents) before it ends."""

    output: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)


class SeededIdGenerator(IdGenerator):
    """Trace and span ids drawn from a seeded generator, so re-recording gives the same ids (timestamps differ)."""

    def __init__(self, seed: str):
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def generate_span_id(self) -> int:
        with self._lock:
            return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        with self._lock:
            return self._random.getrandbits(128) or 1


class ScenarioLedger(SpanProcessor):
    """Notes which trace ids each scenario started (the app's bookkeeping for `manifest.json`; nothing exported)."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.traces: dict[str, list[str]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.current is None:
            return
        trace_id = f"{span.context.trace_id:032x}"
        seen = self.traces.setdefault(self.current, [])
        if trace_id not in seen:
            seen.append(trace_id)

    def on_end(self, span: ReadableSpan) -> None:
        pass


# A named run of the scenarios (`record --run NAME`), mixed into the id seed so that runs of one instrumentation
# get distinct trace and span ids. Each run is a process of its own (`recorder`), so this is that process's setting.
_run: str | None = None


def set_run(run: str | None) -> None:
    """Name this process's run (None: the ids of the committed test recordings)."""
    global _run
    _run = run


def tracer_provider(seed: str, provider_class: type[TracerProvider] = TracerProvider, **kwargs: Any) -> TracerProvider:
    """A tracer provider with the app's resource and ids seeded by `seed` and the run's name (exporters are added
    by the caller)."""
    seed = seed if _run is None else f"{seed}:{_run}"
    resource = Resource.create({"service.name": SERVICE_NAME, "deployment.environment.name": "local-demo"})
    return provider_class(resource=resource, id_generator=SeededIdGenerator(seed), **kwargs)


def add_otlp_export(provider: TracerProvider, endpoint: str) -> None:
    """Export spans over OTLP/HTTP protobuf to `endpoint`/v1/traces, in batches of `EXPORT_BATCH_SIZE`."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    provider.add_span_processor(
        BatchSpanProcessor(exporter, max_export_batch_size=EXPORT_BATCH_SIZE, schedule_delay_millis=EXPORT_DELAY_MS)
    )


class Convention(ABC):
    """One instrumentation library and the way its users trace their own steps."""

    name: str = ""
    # Environment the app runs with (content capture switches); set before the library is imported.
    env: dict[str, str] = {}
    # What a scratch venv must hold to record it (`LEGACY_CONVENTIONS`: older releases, pip requirement pins);
    # empty: the project's test extra has it.
    requirements: tuple[str, ...] = ()

    def __init__(self, endpoint: str, ledger: ScenarioLedger):
        self.endpoint = endpoint
        self.ledger = ledger

    @abstractmethod
    def setup(self) -> None:
        """Create the providers, add the ledger and the exporter, and instrument `openai`."""

    def openai_client(self, base_url: str, api_key: str) -> Any:
        """The application's OpenAI client (no retries: the failing call is meant to fail once)."""
        from openai import OpenAI

        return OpenAI(base_url=base_url, api_key=api_key, max_retries=0)

    @abstractmethod
    def run_request(
        self,
        name: str,
        handle: Callable[[str], str | None],
        question: str,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> str | None:
        """`handle(question)` as one request to the app (the root span of one trace), carrying the session and
        user when given; its answer. An exception escaping `handle` marks the request failed and propagates."""

    @abstractmethod
    def run_agent(self, name: str, run: Callable[[str], str], question: str) -> str:
        """`run(question)` as an agent run (invoke_agent) inside a request; its final answer."""

    @abstractmethod
    def run_tool(self, name: str, call_id: str, function: Callable[..., str], arguments: dict[str, Any]) -> str:
        """`function(**arguments)` as one tool execution (the model's call `call_id`); its result. An exception
        escaping it marks the tool span failed and propagates."""

    @abstractmethod
    def run_retrieval(
        self, source: str, search: Callable[[str], list[tuple[str, str, float]]], query: str
    ) -> list[tuple[str, str, float]]:
        """`search(query)` as a retrieval step; the (document id, text, score) it found."""

    @abstractmethod
    def shutdown(self) -> None:
        """Flush every pending span and log record to the receiver."""


class SpanConvention(Convention):
    """A library whose users open their spans around a call (context managers): the `run_*` steps are these."""

    def run_request(
        self,
        name: str,
        handle: Callable[[str], str | None],
        question: str,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> str | None:
        with self.request(name, question, session_id, user_id) as step:
            step.output = handle(question)
        return step.output

    def run_agent(self, name: str, run: Callable[[str], str], question: str) -> str:
        with self.agent(name, question) as step:
            step.output = run(question)
        return step.output

    def run_tool(self, name: str, call_id: str, function: Callable[..., str], arguments: dict[str, Any]) -> str:
        with self.tool(name, call_id, arguments) as step:
            step.output = function(**arguments)
        return step.output

    def run_retrieval(
        self, source: str, search: Callable[[str], list[tuple[str, str, float]]], query: str
    ) -> list[tuple[str, str, float]]:
        with self.retrieval(source, query) as step:
            step.output = search(query)
        return step.output

    @abstractmethod
    def request(
        self, name: str, user_text: str, session_id: str | None = None, user_id: str | None = None
    ) -> AbstractContextManager[Step]:
        """The root span of one request to the app (one trace), carrying the session and user when given."""

    @abstractmethod
    def agent(self, name: str, user_text: str) -> AbstractContextManager[Step]:
        """An agent run (invoke_agent) inside a request; `output` is its final answer."""

    @abstractmethod
    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> AbstractContextManager[Step]:
        """One tool execution; `output` is its result; an exception escaping it marks the span failed."""

    @abstractmethod
    def retrieval(self, source: str, query: str) -> AbstractContextManager[Step]:
        """A retrieval step; `output` is the list of (document id, text, score) found."""
