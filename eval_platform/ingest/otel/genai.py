"""OpenTelemetry GenAI semantic conventions (`opentelemetry-instrumentation-openai-v2` and any `gen_ai.*` emitter).

- `gen_ai.operation.name` -> operation (`generate_content` -> chat, `create_agent` -> other)
- `gen_ai.response.model`, else `gen_ai.request.model` -> model
- `gen_ai.usage.input_tokens` / `output_tokens` (old: `prompt_tokens` / `completion_tokens`) -> tokens
- `gen_ai.system_instructions` + `gen_ai.input.messages`; `gen_ai.output.messages` -> input / output messages
- deprecated `gen_ai.prompt` / `gen_ai.completion` (attribute, or `gen_ai.content.prompt` / `.completion` event;
  JSON or Python literal messages, OpenLIT's `role: content` lines: `transcript.prompt_messages`) -> input / output;
  OpenLIT's tool calls of a chat span (`gen_ai.tool.name` / `.call.id` / `gen_ai.tool.args`) -> output message
- events `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message` (body
  `content`, `tool_calls`, `id`) -> input messages, in order
- event `gen_ai.choice` (body `message`) -> output messages
- event `gen_ai.client.inference.operation.details` (attributes as on the span) -> input / output messages
- `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result` -> tool fields
- `gen_ai.retrieval.query.text`; `gen_ai.retrieval.documents` (`content`/`text`/`page_content` of each) -> input;
  documents
- `gen_ai.conversation.id` -> session_id
- `error.type` -> error_type

Events are span events or log records of the span (the Collector writes those as `resourceLogs` lines).
"""

from __future__ import annotations

from typing import Any

from eval_platform.ingest.messages import document_text, maybe_json
from eval_platform.ingest.otel.envelope import Span
from eval_platform.ingest.otel.fields import SpanFields, integer, label
from eval_platform.ingest.otel.transcript import as_text, normalize_messages, prompt_messages
from eval_platform.schemas import SPAN_OPERATIONS

NAME = "genai"
PREFIX = "gen_ai."
_OPERATIONS = {"generate_content": "chat", "create_agent": "other", "invoke_workflow": "workflow"}
_INPUT_EVENTS = {f"gen_ai.{role}.message": role for role in ("system", "user", "assistant", "tool")}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"


def matches(span: Span) -> bool:
    return any(key.startswith(PREFIX) for key in span.attrs) or any(e.name.startswith(PREFIX) for e in span.events)


def operation(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    value = _OPERATIONS.get(value, value)
    return value if value in SPAN_OPERATIONS else "other"


def _messages_value(value: Any) -> Any:
    return maybe_json(value) if isinstance(value, str) else value


def _input(attrs: dict[str, Any]) -> tuple[Any, list[dict[str, Any]] | None]:
    if "gen_ai.input.messages" in attrs:
        raw = _messages_value(attrs["gen_ai.input.messages"])
        messages = normalize_messages(raw, "user")
    else:
        raw = _messages_value(attrs.get("gen_ai.prompt"))
        messages = prompt_messages(raw, "user")
    instructions = _messages_value(attrs.get("gen_ai.system_instructions"))
    if instructions in (None, "", []):
        return raw, messages
    parts = (
        instructions if isinstance(instructions, list) else [{"type": "text", "content": document_text(instructions)}]
    )
    system = {"role": "system", "parts": parts}
    raw_list = raw if isinstance(raw, list) else [] if raw is None else [{"role": "user", "content": as_text(raw)}]
    return [system, *raw_list], (normalize_messages([system], "system") or []) + (messages or [])


def _response_tool_calls(attrs: dict[str, Any]) -> list[dict[str, Any]] | None:
    """OpenLIT's model call that answered with tool calls: an empty completion, the calls as `gen_ai.tool.name` /
    `gen_ai.tool.call.id` / `gen_ai.tool.args` on the chat span, several joined by ", " (arguments only for one)."""
    names = label(attrs.get("gen_ai.tool.name"))
    if names is None or "gen_ai.tool.args" not in attrs:
        return None
    names_list = names.split(", ")
    ids = (label(attrs.get("gen_ai.tool.call.id")) or "").split(", ")
    arguments = as_text(attrs.get("gen_ai.tool.args")) if len(names_list) == 1 else None
    calls = [
        {"id": ids[i] if i < len(ids) and ids[i] else None, "name": name, "arguments": arguments}
        for i, name in enumerate(names_list)
    ]
    return [{"role": "assistant", "content": None, "tool_calls": calls}]


def _event_body(event: Any) -> Any:
    body = event.body if event.body is not None else {k: v for k, v in event.attrs.items() if k != "event.name"}
    return body


def _read_events(span: Span, fields: SpanFields) -> None:
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for event in span.events:
        name = event.name
        if name in _INPUT_EVENTS:
            body = _event_body(event) or {}
            message = {"role": _INPUT_EVENTS[name], **(body if isinstance(body, dict) else {"content": body})}
            inputs += normalize_messages([message], _INPUT_EVENTS[name]) or []
        elif name == "gen_ai.choice":
            body = _event_body(event) or {}
            choice = body.get("message") if isinstance(body, dict) and isinstance(body.get("message"), dict) else body
            if isinstance(choice, dict):
                choice = {"role": "assistant", **choice}
            outputs += normalize_messages([choice], "assistant") or []
        elif name == "gen_ai.content.prompt":
            fields.put("input_messages", prompt_messages(event.attrs.get("gen_ai.prompt"), "user"))
        elif name == "gen_ai.content.completion":
            fields.put("output_messages", prompt_messages(event.attrs.get("gen_ai.completion"), "assistant"))
        elif name == _DETAILS_EVENT:
            raw, messages = _input(event.attrs)
            fields.put("input_raw", raw)
            fields.put("input_messages", messages)
            out = _messages_value(event.attrs.get("gen_ai.output.messages"))
            fields.put("output_raw", out)
            fields.put("output_messages", normalize_messages(out, "assistant"))
    # only messages whose content was captured: without capture the instrumentation (openai-v2 2.0b0-2.3b0) still
    # sends every event, with the role only, and an assistant's tool calls with their id and name but no arguments
    if any(_captured(m) for m in inputs):
        fields.put("input_messages", inputs)
    if any(_captured(m) for m in outputs):
        fields.put("output_messages", outputs)


def _captured(message: dict[str, Any]) -> bool:
    """Whether a message carries content: text, or a tool call's arguments."""
    calls = message.get("tool_calls") or []
    return message.get("content") is not None or any(call.get("arguments") is not None for call in calls)


def read(span: Span, fields: SpanFields) -> None:
    attrs = span.attrs
    fields.put("operation", operation(attrs.get("gen_ai.operation.name")))
    if "gen_ai.retrieval.documents" in attrs:
        fields.put("operation", "retrieval")
    fields.put("model", label(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")))
    fields.put(
        "prompt_tokens", integer(attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens")))
    )
    fields.put(
        "completion_tokens",
        integer(attrs.get("gen_ai.usage.output_tokens", attrs.get("gen_ai.usage.completion_tokens"))),
    )
    if fields.operation == "execute_tool" or "gen_ai.tool.call.arguments" in attrs:
        fields.put("tool_name", label(attrs.get("gen_ai.tool.name")))
        fields.put("tool_call_id", label(attrs.get("gen_ai.tool.call.id")))
        fields.put("tool_arguments", as_text(attrs.get("gen_ai.tool.call.arguments")))
        fields.put("tool_result", as_text(attrs.get("gen_ai.tool.call.result")))
    elif fields.operation == "retrieval":
        fields.put("input_value", as_text(attrs.get("gen_ai.retrieval.query.text")))
        documents = _messages_value(attrs.get("gen_ai.retrieval.documents"))
        if documents is not None:
            documents = documents if isinstance(documents, list) else [documents]
            fields.put("documents", [document_text(d) for d in documents if d is not None] or None)
    else:
        raw, messages = _input(attrs)
        fields.put("input_raw", raw)
        fields.put("input_messages", messages)
        if "gen_ai.output.messages" in attrs:
            out = _messages_value(attrs["gen_ai.output.messages"])
            fields.put("output_messages", normalize_messages(out, "assistant"))
        else:
            out = _messages_value(attrs.get("gen_ai.completion"))
            fields.put("output_messages", prompt_messages(out, "assistant") or _response_tool_calls(attrs))
        fields.put("output_raw", out)
    if span.events:
        _read_events(span, fields)
    fields.put("session_id", label(attrs.get("gen_ai.conversation.id")))
    fields.put("error_type", label(attrs.get("error.type")))
