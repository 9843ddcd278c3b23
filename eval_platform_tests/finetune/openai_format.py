"""OpenAI's chat fine-tuning format, as its documentation states it, checked line by line.

Written from the documentation, not from the exporter, so the exporter cannot agree with itself:
- the fine-tuning guide ("Preparing your dataset", "Fine-tuning with tool calling"): each line is a JSON object
  with `messages` (a conversation in the Chat Completions format) and optionally `tools` (and
  `parallel_tool_calls`); roles `system`, `user`, `assistant`, `tool`; the assistant messages are what is learned,
  so an example ends with the assistant's answer; an assistant message may carry `weight` (0 or 1);
- OpenAI's cookbook "Data preparation and analysis for chat model fine-tuning" (its format checks: a message has a
  role and content, no unrecognized key or role, and the example has an assistant message);
- the Chat Completions reference: an assistant message has `content` or `tool_calls` ("At least one of content or
  function_call must be set"); a tool call is `{id, type: "function", function: {name, arguments}}`, `arguments`
  the JSON text of the call's arguments (an object: the function's parameters are a JSON Schema object); a function
  name is `^[a-zA-Z0-9_-]{1,64}$`; an assistant message with `tool_calls` must be followed by tool messages
  responding to each `tool_call_id` (the API refuses a conversation where one is missing), and a tool message must
  respond to a preceding call.
"""

from __future__ import annotations

import json
import re
from typing import Any

LINE_KEYS = {"messages", "tools", "parallel_tool_calls"}
ROLES = {"system", "user", "assistant", "tool"}
MESSAGE_KEYS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "tool_calls", "name", "weight"},
    "tool": {"role", "content", "tool_call_id"},
}
FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _function_name(name: Any) -> bool:
    return isinstance(name, str) and FUNCTION_NAME.fullmatch(name) is not None


def _tool_call_problems(call: Any, where: str) -> list[str]:
    if not isinstance(call, dict) or set(call) != {"id", "type", "function"}:
        return [f"{where}: a tool call is {{id, type, function}}, got {call!r}"]
    problems = []
    if not isinstance(call["id"], str) or not call["id"]:
        problems.append(f"{where}: a tool call's id is a non-empty string")
    if call["type"] != "function":
        problems.append(f"{where}: a tool call's type is 'function'")
    function = call["function"]
    if not isinstance(function, dict) or set(function) != {"name", "arguments"}:
        return [*problems, f"{where}: a tool call's function is {{name, arguments}}, got {function!r}"]
    if not _function_name(function["name"]):
        problems.append(f"{where}: function name {function['name']!r} is not ^[a-zA-Z0-9_-]{{1,64}}$")
    arguments = function["arguments"]
    if not isinstance(arguments, str):
        problems.append(f"{where}: arguments are JSON text, not {type(arguments).__name__}")
    else:
        try:
            parsed = json.loads(arguments)
        except ValueError:
            problems.append(f"{where}: arguments {arguments!r} are not JSON text")
        else:
            if not isinstance(parsed, dict):
                problems.append(f"{where}: arguments {arguments!r} are not a JSON object")
    return problems


def _message_problems(message: Any, where: str, first: bool) -> list[str]:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        return [f"{where}: a message with a role of {sorted(ROLES)}, got {message!r}"]
    role = message["role"]
    problems = [f"{where}: key {key!r} is not one of a {role} message" for key in set(message) - MESSAGE_KEYS[role]]
    if role == "system" and not first:
        problems.append(f"{where}: a system message comes first")
    content = message.get("content")
    if role == "assistant":
        if content is not None and not isinstance(content, str):
            problems.append(f"{where}: assistant content is text or null")
        calls = message.get("tool_calls")
        if calls is not None and (not isinstance(calls, list) or not calls):
            problems.append(f"{where}: tool_calls is a non-empty list")
        if not content and not calls:
            problems.append(f"{where}: an assistant message has content or tool_calls")
        if "weight" in message and message["weight"] not in (0, 1):
            problems.append(f"{where}: weight is 0 or 1")
    elif not isinstance(content, str):
        problems.append(f"{where}: {role} content is text")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        problems.append(f"{where}: a tool message names the call it answers (tool_call_id)")
    return problems


def _pairing_problems(messages: list[dict]) -> list[str]:
    """Each assistant turn's tool calls answered by the tool messages right after it, each exactly once."""
    problems, open_calls = [], []
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                problems.append(f"message {i}: tool message answers no open call of the turn before ({call_id!r})")
            else:
                open_calls.remove(call_id)
            continue
        if open_calls:
            problems.append(f"message {i}: tool call(s) {open_calls} not answered before the next {role} message")
            open_calls = []
        for call in message.get("tool_calls") or [] if role == "assistant" else []:
            open_calls.append(call.get("id") if isinstance(call, dict) else None)
    if open_calls:
        problems.append(f"the conversation ends on tool call(s) {open_calls} with no answer")
    return problems


def line_problems(text: str) -> list[str]:
    """Every way the JSONL line breaks the documented format (empty when it is a valid example)."""
    try:
        line = json.loads(text)
    except ValueError as exc:
        return [f"not JSON: {exc}"]
    if not isinstance(line, dict):
        return ["a line is a JSON object"]
    problems = [f"key {key!r} is not one of a fine-tuning line" for key in set(line) - LINE_KEYS]
    messages = line.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages is a non-empty list"]
    for i, message in enumerate(messages):
        problems += _message_problems(message, f"message {i}", i == 0)
    if problems:
        return problems
    problems += _pairing_problems(messages)
    for i, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            problems += _tool_call_problems(call, f"message {i}")
    if not any(m["role"] == "user" for m in messages):
        problems.append("the conversation has a user message")
    last = messages[-1]
    if last["role"] != "assistant" or "tool_calls" in last or not (last.get("content") or "").strip():
        problems.append("the example ends with the assistant's final answer (text, no tool call)")
    tools = line.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            problems.append("tools is a non-empty list")
        else:
            for tool in tools:
                function = tool.get("function") if isinstance(tool, dict) else None
                if not isinstance(function, dict) or tool.get("type") != "function":
                    problems.append(f"a tool is {{type: function, function: {{...}}}}, got {tool!r}")
                elif not _function_name(function.get("name")):
                    problems.append(f"tool name {function.get('name')!r} is not ^[a-zA-Z0-9_-]{{1,64}}$")
    return problems


def check_line(text: str) -> dict:
    """The line as a dict when it is a valid fine-tuning example; an AssertionError naming each problem otherwise."""
    problems = line_problems(text)
    assert not problems, f"not a valid fine-tuning line ({'; '.join(problems)}): {text[:300]}"
    return json.loads(text)
