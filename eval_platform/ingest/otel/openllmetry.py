"""OpenLLMetry / Traceloop (`opentelemetry-instrumentation-openai` and the `traceloop-sdk` decorators).

Recent versions of the instrumentation (0.62.4, recorded in `eval_platform_tests/fixtures/otel/openllmetry`) write
the GenAI attributes (`gen_ai.input.messages`, ...; read by `genai.py`); this module reads what is Traceloop's own:

- `gen_ai.prompt.N.role` / `.content` / `.tool_call_id` / `.tool_calls.M.{id,name,arguments}` (older versions;
  `llm.prompts.N.*` older still) -> input messages
- `gen_ai.completion.N.role` / `.content` / `.tool_calls.M.*` / `.function_call.*` -> output messages
- `llm.request.type` (`chat`, `completion`, `embedding`, `rerank`) -> operation of an LLM span
- `traceloop.span.kind` (`workflow`, `task`, `agent`, `tool`) -> operation: workflow, task, invoke_agent,
  execute_tool
- `traceloop.entity.name`; `traceloop.entity.input` / `.output` (JSON of the call's args/kwargs and result) -> tool
  name; input / output (tool arguments / result): a lone argument alone (`{"args": ["What's..."], "kwargs": {}}` ->
  `What's...`), keyword arguments as their JSON object (a tool's `{"city": "Paris"}`), a returned string unquoted
- `traceloop.association.properties.session_id` / `.user_id` (also `.sessionId`, `.userId`) -> session_id / user_id
- `gen_ai.usage.prompt_tokens` / `completion_tokens`, `llm.usage.total_tokens` -> tokens (the first two)
- `traceloop.workflow.name` -> trace name
"""

from __future__ import annotations

import json
from typing import Any

from eval_platform.ingest.messages import maybe_json
from eval_platform.ingest.otel.envelope import Span
from eval_platform.ingest.otel.fields import SpanFields, integer, label
from eval_platform.ingest.otel.transcript import as_text, indexed_messages

NAME = "openllmetry"
_KINDS = {"workflow": "workflow", "task": "task", "agent": "invoke_agent", "tool": "execute_tool"}
_REQUEST_TYPES = {"chat": "chat", "completion": "text_completion", "embedding": "embeddings", "rerank": "retrieval"}
_ASSOCIATION = "traceloop.association.properties."
_MARKERS = ("traceloop.", "gen_ai.prompt.0.", "gen_ai.completion.0.", "llm.request.type", "llm.prompts.0.")


def matches(span: Span) -> bool:
    return any(key.startswith(_MARKERS) for key in span.attrs) or "gen_ai.is_streaming" in span.attrs


def call_text(value: Any) -> str | None:
    """A decorated function's recorded call, `{"args": [...], "kwargs": {...}}` JSON (Traceloop's decorators write
    `traceloop.entity.input` so, Langfuse's `@observe` its input, smolagents' OpenInference tool spans their input
    with `sanitize_inputs_outputs`): a lone argument is shown alone, keyword arguments alone as their JSON object
    (a tool's arguments); anything else as its text."""
    decoded = maybe_json(value) if isinstance(value, str) else value
    if isinstance(decoded, dict) and decoded and set(decoded) <= {"args", "kwargs", "sanitize_inputs_outputs"}:
        args, kwargs = decoded.get("args") or [], decoded.get("kwargs") or {}
        if len(args) == 1 and not kwargs:
            return as_text(args[0])
        if not args and kwargs:
            return as_text(kwargs)
    return as_text(value)


def _entity(value: Any) -> str | None:
    """`traceloop.entity.input` / `.output`: a call (`call_text`), or a function's result as JSON (text returned
    by the function is its JSON string, shown unquoted)."""
    decoded = maybe_json(value) if isinstance(value, str) else value
    if isinstance(decoded, str) and decoded.startswith('"'):
        try:
            return as_text(json.loads(decoded))
        except ValueError:
            return decoded
    return call_text(value)


def read(span: Span, fields: SpanFields) -> None:
    attrs = span.attrs
    kind = attrs.get("traceloop.span.kind")
    fields.put("operation", _KINDS.get(kind) if isinstance(kind, str) else None)
    request_type = attrs.get("llm.request.type")
    fields.put("operation", _REQUEST_TYPES.get(request_type) if isinstance(request_type, str) else None)
    if fields.operation is None and any(key.startswith(("gen_ai.prompt.0.", "llm.prompts.0.")) for key in attrs):
        fields.put("operation", "chat")
    fields.put("input_messages", indexed_messages(attrs, "gen_ai.prompt.", "user"))
    fields.put("input_messages", indexed_messages(attrs, "llm.prompts.", "user"))
    fields.put("output_messages", indexed_messages(attrs, "gen_ai.completion.", "assistant"))
    fields.put("prompt_tokens", integer(attrs.get("llm.usage.prompt_tokens")))
    fields.put("completion_tokens", integer(attrs.get("llm.usage.completion_tokens")))
    entity_input, entity_output = attrs.get("traceloop.entity.input"), attrs.get("traceloop.entity.output")
    if fields.operation == "execute_tool":
        fields.put("tool_name", label(attrs.get("traceloop.entity.name")))
        fields.put("tool_arguments", _entity(entity_input))
        fields.put("tool_result", _entity(entity_output))
    else:
        fields.put("input_value", _entity(entity_input))
        fields.put("output_value", _entity(entity_output))
    for field, keys in (("session_id", ("session_id", "sessionId")), ("user_id", ("user_id", "userId"))):
        for key in keys:
            fields.put(field, label(attrs.get(_ASSOCIATION + key)))
    fields.put("trace_name", label(attrs.get("traceloop.workflow.name")))
