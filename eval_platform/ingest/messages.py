"""Chat messages and retrieved documents rendered as the plain text a judge prompt shows.

Messages come in two common shapes and both are understood:

* OpenAI style: `{"role": "user", "content": "text"}` or `content` as a list of parts
  (`{"type": "text", "text": ...}`), with optional `tool_calls`;
* OpenTelemetry GenAI style: `{"role": "user", "parts": [{"type": "text", "content": ...}]}`.

A list of messages renders as one `role: content` line per message. A lone user message (for an input) or
a lone assistant message (for an output) renders as just its content, so a single-turn trace reads like
plain text. Text parts are kept verbatim; tool calls and tool results render as short bracketed notes;
reasoning parts are left out of the text (they stay in the `*_messages` JSON); media parts render as a
placeholder such as `[image]`.
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

from eval_platform.ingest.common import dumps

_TEXT_PART_TYPES = {None, "text", "input_text", "output_text"}
_HIDDEN_PART_TYPES = {"reasoning", "thinking", "redacted_thinking"}
_DOCUMENT_TEXT_KEYS = ("content", "text", "page_content", "pageContent", "document")


def is_message_list(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    """A non-empty list whose every element is an object with a `role`."""
    return (
        isinstance(value, list) and len(value) > 0 and all(isinstance(item, dict) and "role" in item for item in value)
    )


def _tool_call_text(name: Any, arguments: Any) -> str:
    if isinstance(arguments, str):
        args = arguments
    elif arguments is None:
        args = ""
    else:
        args = dumps(arguments)
    return f"[tool_call {name or ''}({args})]"


def part_text(part: Any) -> str:
    """The text of one content part (see the module docstring for non-text parts)."""
    if part is None:
        return ""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return str(part)
    kind = part.get("type")
    if kind in _TEXT_PART_TYPES:
        text = part.get("content", part.get("text"))
        if isinstance(text, str):
            return text
        return "" if text is None else dumps(text)
    if kind in _HIDDEN_PART_TYPES:
        return ""
    if kind in ("tool_call", "function_call"):
        return _tool_call_text(part.get("name"), part.get("arguments"))
    if kind in ("tool_call_response", "function_call_output", "tool_result"):
        result = part.get("response", part.get("result", part.get("output", part.get("content"))))
        return f"[tool_result {result if isinstance(result, str) else dumps(result)}]"
    label = part.get("modality") or kind or "part"
    return f"[{label}]"


def content_text(content: Any) -> str:
    """The text of a message's `content` (a string, a list of parts, or a single part)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text for text in (part_text(part) for part in content) if text)
    return part_text(content)


def message_text(message: dict[str, Any]) -> str:
    """The text of one message: its content (or OTel `parts`) plus any OpenAI-style tool calls."""
    content = message.get("content") if "content" in message else message.get("parts")
    pieces = [content_text(content)]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            inner = call.get("function")
            function = inner if isinstance(inner, dict) else call
            pieces.append(_tool_call_text(function.get("name"), function.get("arguments")))
    return "\n".join(piece for piece in pieces if piece)


def render_messages(messages: list[dict[str, Any]], single_role: str | None) -> str:
    """`role: content` lines; a lone message whose role is `single_role` renders as just its content."""
    if len(messages) == 1 and messages[0].get("role") == single_role:
        return message_text(messages[0])
    return "\n".join(f"{message.get('role') or 'unknown'}: {message_text(message)}" for message in messages)


def document_text(document: Any) -> str:
    """The text of one retrieved document: its content/text field, else the whole object as JSON."""
    if isinstance(document, str):
        return document
    if isinstance(document, dict):
        for key in _DOCUMENT_TEXT_KEYS:
            if isinstance(document.get(key), str):
                return document[key]
    return dumps(document)


def maybe_json(text: str) -> Any:
    """Parse `text` as JSON if it looks like an object or array; otherwise return it unchanged."""
    stripped = text.strip()
    if stripped[:1] in ("[", "{"):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text
