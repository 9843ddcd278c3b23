"""Sample traces written as one OTLP/JSON export of OpenTelemetry GenAI spans.

Three shapes, as an instrumented application would emit them:

* `chat`: a single `chat <model>` client span with `gen_ai.*` attributes and the messages as JSON strings;
* `rag`: an HTTP server span `POST /v1/answer` with two children, `retrieval pandalm-kb` (documents in
  `gen_ai.retrieval.documents`) and `chat <model>`;
* `agent`: an `invoke_agent pandalm-assistant` span carrying the user's request and the final answer, with a
  child `chat <model>` span whose input adds the agent's system instructions (and, with `retrieval=True`, a
  retrieval child before it), so a judge can score the named step `chat <model>` on its own.

Trace-level fields without a GenAI convention ride on the root span as `eval.trace_id`, `eval.experiment_id`,
`eval.variant`, `eval.metadata.<key>` and `app.cost_usd` (see `eval_platform/ingest/otel/model.py`).
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Any

from eval_platform.ingest.otel.values import encode_attributes
from tools.sample_data.pandalm import EXPERIMENT_ID, PROJECT_ID, Trace

AGENT_NAME = "pandalm-assistant"
AGENT_INSTRUCTIONS = "You are a helpful assistant. Follow the user's instruction and answer concisely."
PROVIDER = "huggingface"
SPAN_KIND_SERVER, SPAN_KIND_CLIENT, SPAN_KIND_INTERNAL = 2, 3, 1


def _nanos(moment: datetime) -> str:
    delta = moment - datetime(1970, 1, 1, tzinfo=moment.tzinfo)
    return str((delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000)


def _text_messages(role: str, text: str, finish_reason: str | None = None) -> str:
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish_reason:
        message["finish_reason"] = finish_reason
    return json.dumps([message], ensure_ascii=False)


class _Ids:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def trace(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    def span(self) -> str:
        return f"{self.rng.getrandbits(64):016x}"


def _span(
    trace_hex: str,
    span_id: str,
    parent: str,
    name: str,
    kind: int,
    start: datetime,
    end: datetime,
    attributes: dict[str, Any],
) -> dict[str, Any]:
    return {
        "traceId": trace_hex,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": _nanos(start),
        "endTimeUnixNano": _nanos(end),
        "attributes": encode_attributes(attributes),
        "status": {},
    }


def _trace_attributes(trace: Trace) -> dict[str, Any]:
    attributes = {
        "eval.trace_id": trace.trace_id,
        "eval.experiment_id": EXPERIMENT_ID,
        "eval.variant": trace.model,
        "app.cost_usd": trace.cost_usd,
    }
    attributes.update({f"eval.metadata.{key}": value for key, value in trace.metadata.items()})
    return attributes


def _chat_attributes(trace: Trace, rng: random.Random, *, instructions: str | None = None) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": trace.model,
        "gen_ai.request.max_tokens": 512,
        "gen_ai.request.temperature": 0.7,
        "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(48):012x}",
        "gen_ai.response.model": trace.model,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": trace.prompt_tokens,
        "gen_ai.usage.output_tokens": trace.completion_tokens,
        "server.address": "llm-gateway.internal",
        "server.port": 8000,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": instructions}]) if instructions else None,
        "gen_ai.input.messages": _text_messages("user", trace.input),
        "gen_ai.output.messages": _text_messages("assistant", trace.output, "stop"),
    }


def _retrieval_span(
    trace: Trace, trace_hex: str, span_id: str, parent: str, start: datetime, rng: random.Random
) -> tuple[dict[str, Any], datetime]:
    end = start + timedelta(milliseconds=round(rng.uniform(8, 60), 3))
    documents = [
        {
            "id": f"pandalm-{trace.idx:04d}-input",
            "score": round(rng.uniform(0.80, 0.97), 3),
            "content": trace.item["input"],
        }
    ]
    documents.append(
        {
            "id": f"pandalm-{trace.idx:04d}-instruction",
            "score": round(rng.uniform(0.45, 0.75), 3),
            "content": trace.item["instruction"],
        }
    )
    attributes = {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": "pandalm-kb",
        "gen_ai.request.top_k": 2.0,
        "gen_ai.retrieval.query.text": trace.item["instruction"],
        "gen_ai.retrieval.documents": json.dumps(documents, ensure_ascii=False),
    }
    return _span(trace_hex, span_id, parent, "retrieval pandalm-kb", SPAN_KIND_CLIENT, start, end, attributes), end


def trace_spans(trace: Trace, shape: str, rng: random.Random, *, retrieval: bool = False) -> list[dict[str, Any]]:
    """The spans of one trace; the root GenAI span starts at `trace.start` and lasts `trace.latency_ms`."""
    ids = _Ids(rng)
    trace_hex = ids.trace()
    if shape == "chat":
        attributes = {**_chat_attributes(trace, rng), **_trace_attributes(trace)}
        return [
            _span(
                trace_hex, ids.span(), "", f"chat {trace.model}", SPAN_KIND_CLIENT, trace.start, trace.end, attributes
            )
        ]
    if shape == "rag":
        http_id, retrieval_id, chat_id = ids.span(), ids.span(), ids.span()
        http_start = trace.start - timedelta(milliseconds=80)
        retrieval_span, _ = _retrieval_span(
            trace, trace_hex, retrieval_id, http_id, http_start + timedelta(milliseconds=2), rng
        )
        chat_attributes = {**_chat_attributes(trace, rng), **_trace_attributes(trace)}
        http_attributes = {"http.request.method": "POST", "http.route": "/v1/answer", "http.response.status_code": 200}
        return [
            _span(
                trace_hex,
                http_id,
                "",
                "POST /v1/answer",
                SPAN_KIND_SERVER,
                http_start,
                trace.end + timedelta(milliseconds=3),
                http_attributes,
            ),
            retrieval_span,
            _span(
                trace_hex,
                chat_id,
                http_id,
                f"chat {trace.model}",
                SPAN_KIND_CLIENT,
                trace.start,
                trace.end,
                chat_attributes,
            ),
        ]
    if shape == "agent":
        agent_id = ids.span()
        agent_attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.request.model": trace.model,
            "gen_ai.input.messages": _text_messages("user", trace.input),
            "gen_ai.output.messages": _text_messages("assistant", trace.output, "stop"),
            **_trace_attributes(trace),
        }
        spans = [
            _span(
                trace_hex,
                agent_id,
                "",
                f"invoke_agent {AGENT_NAME}",
                SPAN_KIND_INTERNAL,
                trace.start,
                trace.end,
                agent_attributes,
            )
        ]
        chat_start = trace.start + timedelta(milliseconds=5)
        if retrieval:
            retrieval_span, retrieval_end = _retrieval_span(trace, trace_hex, ids.span(), agent_id, chat_start, rng)
            spans.append(retrieval_span)
            chat_start = retrieval_end + timedelta(milliseconds=1)
        chat_end = max(chat_start, trace.end - timedelta(milliseconds=4))
        chat_attributes = _chat_attributes(trace, rng, instructions=AGENT_INSTRUCTIONS)
        spans.append(
            _span(
                trace_hex,
                ids.span(),
                agent_id,
                f"chat {trace.model}",
                SPAN_KIND_CLIENT,
                chat_start,
                chat_end,
                chat_attributes,
            )
        )
        return spans
    raise ValueError(f"unknown span shape {shape!r}")


def otlp_document(traces_with_shapes: list[tuple[Trace, str, bool]], seed: int) -> dict[str, Any]:
    """An ExportTraceServiceRequest with every trace's spans under one resource and scope."""
    rng = random.Random(seed)
    spans = [
        span
        for trace, shape, retrieval in traces_with_shapes
        for span in trace_spans(trace, shape, rng, retrieval=retrieval)
    ]
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": encode_attributes(
                        {
                            "service.name": PROJECT_ID,
                            "service.version": "1.4.2",
                            "deployment.environment.name": "production",
                        }
                    )
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "pandalm-demo.genai-instrumentation", "version": "0.3.0"},
                        "spans": spans,
                    }
                ],
            }
        ]
    }
