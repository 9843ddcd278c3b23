"""Chat messages of every convention -> one shape, the contract's conversation message.

`{"role": "system"|"user"|"assistant"|"tool", "content": str|None, "tool_calls": [{"id", "name", "arguments"}]
(optional), "tool_call_id": str (optional), "name": str (optional)}`; `arguments` is text (JSON text when the
source held an object).

Read: OTel GenAI messages (`{"role", "parts": [{"type": "text"|"tool_call"|"tool_call_response"|...}]}`),
OpenAI-style messages (`content` as text or parts, `tool_calls` with `function`), the openai-v2 `gen_ai.choice`
event body (`{"index", "finish_reason", "message": {...}}`), and flattened indexed attributes
(`gen_ai.prompt.0.role`, `llm.input_messages.0.message.role`, `...tool_calls.0.tool_call.function.name`,
`...message.contents.0.message_content.text`), and the deprecated `gen_ai.prompt` / `gen_ai.completion` text
(`prompt_messages`).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from eval_platform.ingest.common import dumps
from eval_platform.ingest.messages import maybe_json, part_text
from eval_platform.schemas import HIDDEN_CONTENT

ROLES = {
    "human": "user",
    "ai": "assistant",
    "model": "assistant",
    "function": "tool",
    "developer": "system",
    "tool-call": "assistant",  # smolagents
    "tool-response": "tool",  # smolagents
}
# smolagents' wrappers around the text of its messages (`_framework_text`)
SMOLAGENTS_TASK, SMOLAGENTS_CALLS, SMOLAGENTS_RESULT, SMOLAGENTS_CALL_ID = (
    "New task:\n",
    "Calling tools:\n",
    "Observation:\n",
    "Call id: ",
)
# The opening words of agent frameworks' own system prompts (their boilerplate, not the app's instructions): such
# a message is marked `framework_prompt` and {{conversation}} leaves it out unless the evaluator asks for it.
FRAMEWORK_PROMPTS = (
    "You are an expert assistant who can solve any task using tool calls.",  # smolagents ToolCallingAgent
    "You are an expert assistant who can solve any task using code blobs.",  # smolagents CodeAgent
)
_CALL_PARTS = {"tool_call", "function_call"}
_RESULT_PARTS = {"tool_call_response", "function_call_output", "tool_result"}


def as_text(value: Any) -> str | None:
    """Text as is; anything else as JSON text; None stays None."""
    return value if value is None or isinstance(value, str) else dumps(value)


def _call(call: Any) -> dict[str, Any] | None:
    if not isinstance(call, dict):
        return None
    nested = call.get("function")
    function = nested if isinstance(nested, dict) else call
    return {
        "id": as_text(call.get("id")),
        "name": as_text(function.get("name")),
        "arguments": as_text(function.get("arguments")),
    }


def normalize_message(message: Any, default_role: str) -> dict[str, Any]:
    """One message of any shape above -> the conversation message."""
    if isinstance(message, str):
        return {"role": default_role, "content": message}
    if not isinstance(message, dict):
        return {"role": default_role, "content": as_text(message)}
    if isinstance(message.get("message"), dict) and "role" not in message:  # gen_ai.choice body
        message = message["message"]
    role = str(message.get("role") or default_role).lower()
    role = ROLES.get(role, role)
    content = message.get("content") if "content" in message else message.get("parts")
    if isinstance(content, str) and content.strip().startswith("[{"):
        content = maybe_json(content)  # OpenLLMetry writes multimodal content as JSON text
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    tool_call_id = message.get("tool_call_id") or (message.get("id") if role == "tool" else None)
    for part in content if isinstance(content, list) else [content]:
        if part is None:
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _CALL_PARTS:
            calls.append(_call(part) or {})
        elif kind in _RESULT_PARTS:
            tool_call_id = tool_call_id or part.get("id") or part.get("call_id")
            role = "tool"
            result = part.get("response", part.get("result", part.get("output", part.get("content"))))
            texts.append(as_text(result) or "")
        else:
            piece = part_text(part)
            if piece and piece != HIDDEN_CONTENT:  # hidden content is no content
                texts.append(piece)
    calls += [c for c in map(_call, message.get("tool_calls") or []) if c]
    function_call = message.get("function_call")
    if isinstance(function_call, dict):
        calls.append(
            {
                "id": None,
                "name": as_text(function_call.get("name")),
                "arguments": as_text(function_call.get("arguments")),
            }
        )
    source_role = str(message.get("role") or "").lower()
    text = "\n".join(texts) if texts else None
    if text is not None and source_role == "tool-call" and text.startswith(SMOLAGENTS_CALLS) and not calls:
        calls, text = _smolagents_calls(text.removeprefix(SMOLAGENTS_CALLS)), None
    elif text is not None and source_role == "tool-response":
        if text.startswith(SMOLAGENTS_CALL_ID):
            call_id, _, text = text.removeprefix(SMOLAGENTS_CALL_ID).partition("\n")
            tool_call_id = tool_call_id or call_id.strip()
        text = text.removeprefix(SMOLAGENTS_RESULT)
    elif text is not None and role == "user":
        text = text.removeprefix(SMOLAGENTS_TASK)
    normalized: dict[str, Any] = {"role": role, "content": text}
    if role == "system" and text is not None and text.startswith(FRAMEWORK_PROMPTS):
        normalized["framework_prompt"] = True
    if calls:
        normalized["tool_calls"] = calls
    if tool_call_id:
        normalized["tool_call_id"] = str(tool_call_id)
    if message.get("name"):
        normalized["name"] = str(message["name"])
    return normalized


def _smolagents_calls(text: str) -> list[dict[str, Any]]:
    """smolagents' `tool-call` message text after `Calling tools:` (a Python literal list of OpenAI-style calls,
    arguments as a dict) -> tool calls with JSON arguments."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return [c for c in map(_call, value if isinstance(value, list) else []) if c]


def link_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tool result without a call id (smolagents') answers the assistant's call before it, when it made one."""
    calls: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant":
            calls = message.get("tool_calls") or []
        elif message.get("role") == "tool" and "tool_call_id" not in message and len(calls) == 1 and calls[0]["id"]:
            message["tool_call_id"] = calls[0]["id"]
    return messages


def normalize_messages(value: Any, default_role: str) -> list[dict[str, Any]] | None:
    """A messages value (JSON text, a list, a `{"messages": [...]}` object, one message, plain text) -> messages."""
    if isinstance(value, str):
        value = maybe_json(value)
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            value = value["messages"]
        elif not any(key in value for key in ("role", "parts", "content", "message", "tool_calls")):
            return None
        else:
            value = [value]
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if not isinstance(value, list):
        return None
    items = [part for item in value if item is not None for part in _one_result_each(item)]
    return link_results([normalize_message(item, default_role) for item in items])


def _one_result_each(message: Any) -> list[Any]:
    """A message holding several tool results (GenAI `tool_call_response` parts: parallel calls answered in one
    request message, as pydantic-ai writes them) -> one tool message per result, each under its own call id."""
    parts = message.get("parts", message.get("content")) if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return [message]
    results = [p for p in parts if isinstance(p, dict) and p.get("type") in _RESULT_PARTS]
    if len(results) < 2:
        return [message]
    key = "parts" if "parts" in message else "content"
    others = [p for p in parts if p not in results]
    base = {k: v for k, v in message.items() if k not in (key, "tool_call_id", "id")}
    split = [{**base, key: others}] if others else []
    return split + [{**base, "role": "tool", key: [result]} for result in results]


def indexed(attrs: dict[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """`{prefix}{N}.{rest}` attributes -> `{N: {rest: value}}` (N in numeric order)."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix) :].partition(".")
        if index.isdigit() and rest:
            found.setdefault(int(index), {})[rest] = value
    return dict(sorted(found.items()))


def _flat_message(fields: dict[str, Any]) -> dict[str, Any]:
    """The subkeys of one flattened message (OpenLLMetry or OpenInference spelling) -> a message dict."""
    message: dict[str, Any] = {}
    calls: dict[int, dict[str, Any]] = {}
    parts: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        key = key.removeprefix("message.")
        head, _, rest = key.partition(".")
        if head in ("tool_calls", "contents") and rest:
            index, _, sub = rest.partition(".")
            if not index.isdigit():
                continue
            sub = sub.removeprefix("tool_call.").removeprefix("function.").removeprefix("message_content.")
            (calls if head == "tool_calls" else parts).setdefault(int(index), {})[sub] = value
        elif key in ("function_call_name", "function_call.name"):
            message.setdefault("function_call", {})["name"] = value
        elif key in ("function_call_arguments_json", "function_call.arguments"):
            message.setdefault("function_call", {})["arguments"] = value
        else:
            message[key] = value
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    if parts and "content" not in message:
        message["content"] = [
            {"type": p.get("type") or "text", "text": p.get("text")} for _, p in sorted(parts.items())
        ]
    return message


def indexed_messages(attrs: dict[str, Any], prefix: str, default_role: str) -> list[dict[str, Any]] | None:
    """Messages flattened into `{prefix}{N}.*` attributes, or None when there are none."""
    found = indexed(attrs, prefix)
    if not found:
        return None
    return link_results([normalize_message(_flat_message(fields), default_role) for fields in found.values()])


# OpenLIT's `gen_ai.prompt`: one `role: content` line per message (content may run over several lines)
_ROLE_LINE = re.compile(r"^(system|user|assistant|tool|developer|function): ", re.MULTILINE)


def _message_list(text: str) -> list[dict[str, Any]] | None:
    """A Python literal list of messages (`str(messages)`, as the v1.26 conventions' example and OpenLIT write
    it), or None."""
    if not text.lstrip().startswith("[{"):
        return None
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value):
        return value
    return None


def prompt_messages(value: Any, default_role: str) -> list[dict[str, Any]] | None:
    """The deprecated `gen_ai.prompt` / `gen_ai.completion` (GenAI conventions v1.26-1.27, attribute or the
    `gen_ai.content.prompt` / `.completion` event's): JSON or a Python literal list of messages; OpenLIT's
    `role: content` lines, where a message it could not format (an assistant's tool calls) is `str(messages)`,
    the request's whole list, which then is the input; else plain text, one message of `default_role`. A content
    line that itself starts with `user: ` (or another role) is read as a new message."""
    if not isinstance(value, str):
        return normalize_messages(value, default_role)
    decoded = maybe_json(value)
    if not isinstance(decoded, str):
        return normalize_messages(decoded, default_role)
    listed = _message_list(value)
    if listed is not None:
        return normalize_messages(listed, default_role)
    starts = list(_ROLE_LINE.finditer(value))
    if not starts or starts[0].start() != 0:
        return normalize_messages(value, default_role)
    messages: list[dict[str, Any]] = []
    for match, following in zip(starts, [*starts[1:], None], strict=True):
        content = value[match.end() : following.start() - 1 if following else len(value)]
        whole = _message_list(content)
        if whole is not None:
            return normalize_messages(whole, default_role)
        messages.append({"role": match.group(1), "content": content})
    return normalize_messages(messages, default_role)
