"""Langfuse's OTel attributes (the Langfuse Python SDK v3+, an OTel SDK, and what Langfuse's OTLP endpoint reads).

- `langfuse.observation.type`: generation, embedding, agent, tool, chain, retriever, evaluator, guardrail, span,
  event -> operation: chat, embeddings, invoke_agent, execute_tool, chain, retrieval, other, guardrail, other, other
- `langfuse.observation.input` / `.output` (JSON) -> input / output: messages when they are messages (a generation),
  else text; tool arguments / result on a tool. The input of an `@observe`d function is its call,
  `{"args": [...], "kwargs": {...}}`: a lone argument is shown alone, keyword arguments as their JSON object (a
  tool's arguments, as the other conventions give them)
- a retriever's `langfuse.observation.output` (a list) -> documents (each its `content`/`text`/`page_content`, a
  string as is, else its JSON)
- `langfuse.trace.input` / `.output` -> the trace's input / output (used when no inference span has content)
- `langfuse.observation.model.name` -> model
- `langfuse.observation.usage_details` (`input`/`output`, or `prompt_tokens`/`completion_tokens`, ...) -> tokens
- `langfuse.observation.cost_details` (`total`) -> cost_usd
- `langfuse.observation.level` = ERROR, `langfuse.observation.status_message` -> error_type (`ERROR`), error_message
- `langfuse.session.id`, else `session.id`; `langfuse.user.id`, else `user.id` -> session_id, user_id
- `langfuse.trace.name` -> trace name
"""

from __future__ import annotations

from typing import Any

from eval_platform.ingest.messages import document_text, maybe_json
from eval_platform.ingest.otel.envelope import Span
from eval_platform.ingest.otel.fields import SpanFields, integer, label, number
from eval_platform.ingest.otel.openllmetry import call_text
from eval_platform.ingest.otel.transcript import as_text, normalize_messages

NAME = "langfuse"
PREFIX = "langfuse."
_TYPES = {
    "generation": "chat",
    "embedding": "embeddings",
    "agent": "invoke_agent",
    "tool": "execute_tool",
    "chain": "chain",
    "retriever": "retrieval",
    "guardrail": "guardrail",
}
_INPUT_TOKENS = ("input", "prompt_tokens", "input_tokens", "promptTokens")
_OUTPUT_TOKENS = ("output", "completion_tokens", "output_tokens", "completionTokens")


def matches(span: Span) -> bool:
    return any(key.startswith(PREFIX) for key in span.attrs)


def _json(value: Any) -> Any:
    return maybe_json(value) if isinstance(value, str) else value


def _text(value: Any) -> str | None:
    """A serialized input/output: a JSON string stays its text, anything else its JSON text."""
    decoded = _json(value)
    return decoded if isinstance(decoded, str) else as_text(value) if value is not None else None


def _usage(details: Any, keys: tuple[str, ...]) -> int | None:
    details = _json(details)
    if not isinstance(details, dict):
        return None
    return next((integer(details[key]) for key in keys if integer(details.get(key)) is not None), None)


def read(span: Span, fields: SpanFields) -> None:
    attrs = span.attrs
    kind = attrs.get("langfuse.observation.type")
    fields.put("operation", _TYPES.get(kind, "other") if isinstance(kind, str) else None)
    observation_in, observation_out = attrs.get("langfuse.observation.input"), attrs.get("langfuse.observation.output")
    if fields.operation == "execute_tool":
        fields.put("tool_name", span.name or None)
        fields.put("tool_arguments", call_text(observation_in))
        fields.put("tool_result", _text(observation_out))
    elif fields.operation in ("chat", "embeddings"):
        fields.put("input_raw", _json(observation_in))
        fields.put("input_messages", normalize_messages(_json(observation_in), "user"))
        fields.put("output_raw", _json(observation_out))
        fields.put("output_messages", normalize_messages(_json(observation_out), "assistant"))
    output = _json(observation_out)
    if fields.operation == "retrieval" and output is not None:
        fields.put("documents", [document_text(d) for d in (output if isinstance(output, list) else [output])])
    fields.put("input_value", call_text(observation_in))
    fields.put("output_value", _text(observation_out))
    fields.put("trace_input", _json(attrs.get("langfuse.trace.input")))
    fields.put("trace_output", _json(attrs.get("langfuse.trace.output")))
    fields.put("model", label(attrs.get("langfuse.observation.model.name")))
    usage = attrs.get("langfuse.observation.usage_details")
    fields.put("prompt_tokens", _usage(usage, _INPUT_TOKENS))
    fields.put("completion_tokens", _usage(usage, _OUTPUT_TOKENS))
    cost = _json(attrs.get("langfuse.observation.cost_details"))
    if isinstance(cost, dict):
        fields.put("cost_usd", number(cost.get("total")))
    if attrs.get("langfuse.observation.level") == "ERROR":
        fields.put("error_type", "ERROR")
        fields.put("error_message", label(attrs.get("langfuse.observation.status_message")))
    fields.put("session_id", label(attrs.get("langfuse.session.id") or attrs.get("session.id")))
    fields.put("user_id", label(attrs.get("langfuse.user.id") or attrs.get("user.id")))
    fields.put("trace_name", label(attrs.get("langfuse.trace.name")))
