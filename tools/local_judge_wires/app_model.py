"""`app/<name>`: the local judge playing an application's own chat model, so instrumented demo apps (and the
tests that record their traces) run real agent loops against 127.0.0.1 instead of a paid provider.

What it answers, deterministically (same request, same reply):
- a plain chat: a short answer that quotes the last user message (and follows a system message's persona);
- a request with `tools` whose conversation has no tool result after the last user message: an assistant
  `tool_calls` message calling the first tool with plausible JSON arguments (finish_reason `tool_calls`); one
  call per place when the question names several joined by "and" ("in Paris and Rome?": parallel calls); a user
  message that asks nothing (no `?`: "Thanks, that's all.") is answered in text, tools or not;
- after a tool result: a final text answer that uses it; when a tool named `final_answer` is offered (smolagents'
  agents answer through it), that answer is a `final_answer` call (`{"answer": ...}`) instead. A user message
  starting `Observation:`, `Call id:` or `Error:` is a tool result (smolagents sends them so, merged with the
  next `New task:` when one follows), not a question;
- `n` > 1: that many choices, each worded a little differently; `usage` with token counts;
- `stream: true`: Server-Sent Events chunks as OpenAI sends them, with a last usage-only chunk when
  `stream_options.include_usage` is set;
- `app/error` (or any `app/...` request with the header `X-App-Error: <status>`): that HTTP status (500 by default)
  with an OpenAI-style error body, the way a provider's outage reaches an application.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

from aiohttp import web

from eval_platform.local_judge.answers import JudgeRequestError, approx_tokens, message_text
from eval_platform.local_judge.server import Wire

APP_MODEL_PREFIX = "app/"
APP_ERROR_MODEL = "app/error"
APP_ERROR_HEADER = "X-App-Error"
APP_ERROR_MESSAGE = "The server had an error while processing your request. (app/error)"

_WORD = re.compile(r"\S+\s*")


def is_app_model(body: Any) -> bool:
    """True when the request asks for an `app/...` model (the application's model, not a judge)."""
    return isinstance(body, dict) and isinstance(body.get("model"), str) and body["model"].startswith(APP_MODEL_PREFIX)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


# smolagents sends a tool's result (or error) as a user message, merged with the next task ("New task:") when one
# follows: such a message is read as the question and the tool results it holds
_TOOL_RESULT_MARKERS = ("Observation:", "Call id:", "Error:")
_NEW_TASK = "New task:"
FINAL_ANSWER_TOOL = "final_answer"


def _smolagents_parts(text: str) -> list[dict[str, Any]]:
    """A smolagents user message as the messages it stands for: its last task's question, then its tool results."""
    question = text.rsplit(_NEW_TASK, 1)[1] if _NEW_TASK in text else None
    rest = question if question is not None else text
    starts = [
        i for marker in _TOOL_RESULT_MARKERS for i in [rest.find(marker)] if i >= 0 and (i == 0 or rest[i - 1] == "\n")
    ]
    cut = min(starts) if starts else len(rest)
    parts = [{"role": "user", "content": rest[:cut].strip()}] if question is not None or cut > 0 else []
    return parts + ([{"role": "tool", "content": rest[cut:].strip()}] if cut < len(rest) else [])


def _standard(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's messages with smolagents' tool results as tool messages (others unchanged)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        text = message_text(message) if message.get("role") == "user" else ""
        if _NEW_TASK in text or text.lstrip().startswith(_TOOL_RESULT_MARKERS):
            out += _smolagents_parts(text.lstrip())
        else:
            out.append(message)
    return out


def _last_user_index(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return -1


def _places(text: str) -> list[str]:
    """The capitalised words a question joins with "and" ("in Paris and Rome?"): one tool call each."""
    match = re.search(r"\b([A-Z][\w-]*) and ([A-Z][\w-]*)\b", text)
    return [match.group(1), match.group(2)] if match else []


def _capitalised_word(text: str) -> str | None:
    """The last capitalised word of the text that does not start it (a place or a name in a short question)."""
    words = re.findall(r"[A-Za-z][\w-]*", text)
    for word in reversed(words[1:]):
        if word[0].isupper():
            return word
    return None


def plausible_arguments(parameters: Any, user_text: str) -> dict[str, Any]:
    """Arguments for a function tool's JSON Schema, taken from the user's words where a string is asked for."""
    properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    arguments: dict[str, Any] = {}
    for name, schema in properties.items():
        schema = schema if isinstance(schema, dict) else {}
        if schema.get("enum"):
            arguments[name] = schema["enum"][0]
        elif schema.get("type") == "integer":
            arguments[name] = 3
        elif schema.get("type") == "number":
            arguments[name] = 1.5
        elif schema.get("type") == "boolean":
            arguments[name] = True
        elif schema.get("type") == "array":
            arguments[name] = [_capitalised_word(user_text) or user_text.strip()[:40]]
        else:
            arguments[name] = _capitalised_word(user_text) or user_text.strip()[:80]
    return arguments


def _tool_name_for(messages: list[dict[str, Any]], tool_call_id: str | None) -> str:
    for message in messages:
        for call in message.get("tool_calls") or []:
            if call.get("id") == tool_call_id:
                return call.get("function", {}).get("name", "the tool")
    return "the tool"


def _answer_text(messages: list[dict[str, Any]], choice: int) -> str:
    last_user = _last_user_index(messages)
    question = message_text(messages[last_user]).strip() if last_user >= 0 else ""
    tool_results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
    if tool_results:
        facts = "; ".join(
            f"{_tool_name_for(messages, m.get('tool_call_id'))} returned {message_text(m).strip()}"
            for m in tool_results
        )
        text = f'Based on what I looked up ({facts}), here is the answer to "{question}".'
    else:
        turn = sum(1 for m in messages if m.get("role") == "user")
        opening = "Sure." if turn == 1 else f"Following up (turn {turn}):"
        text = f'{opening} You asked: "{question}". The short answer is yes, with the details above in mind.'
        system = next((message_text(m) for m in messages if m.get("role") in ("system", "developer")), "")
        if "pirate" in system.lower():
            text = "Arr! " + text
    return text if choice == 0 else f"{text} (alternative {choice + 1})"


def _call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _tool_calls(messages: list[dict[str, Any]], tools: list[dict[str, Any]], choice: int) -> list[dict[str, Any]]:
    function = tools[0].get("function", {}) if isinstance(tools[0], dict) else {}
    last_user = _last_user_index(messages)
    user_text = message_text(messages[last_user]) if last_user >= 0 else ""
    name, parameters = function.get("name", "tool"), function.get("parameters")
    call_id = f"call_{_digest(messages, choice)[:24]}"
    properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    places = _places(user_text)
    if len(places) > 1 and len(properties) == 1:
        return [
            _call(name, plausible_arguments(parameters, f"in {place}"), f"{call_id[:-2]}{k:02d}")
            for k, place in enumerate(places)
        ]
    return [_call(name, plausible_arguments(parameters, user_text), call_id)]


def _tool_names(body: dict[str, Any]) -> list[str]:
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    return [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)]


def _wants_tool_call(body: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools or body.get("tool_choice") == "none":
        return False
    last_user = _last_user_index(messages)
    if last_user >= 0 and "?" not in message_text(messages[last_user]):
        return False  # nothing asked ("Thanks, that's all."): nothing to look up
    return not any(m.get("role") == "tool" for m in messages[last_user + 1 :])


def app_completion(body: dict[str, Any], error_status: str | None = None) -> dict[str, Any]:
    """The non-streamed `chat.completion` for an `app/...` request; raises JudgeRequestError for an error reply."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise JudgeRequestError(400, "'messages' must be a non-empty list of objects", code="invalid_messages")
    if body["model"] == APP_ERROR_MODEL or error_status:
        status = int(error_status) if error_status and error_status.isdigit() else 500
        raise JudgeRequestError(status, APP_ERROR_MESSAGE, error_type="server_error", code="internal_error")
    n = body.get("n") or 1
    if not isinstance(n, int) or not 1 <= n <= 8:
        raise JudgeRequestError(400, "'n' must be an integer from 1 to 8", code="invalid_n")
    turn = _standard(messages)  # smolagents' tool results as tool messages
    tool_turn = _wants_tool_call(body, turn)
    choices = []
    for index in range(n):
        if tool_turn:
            message = {"role": "assistant", "content": None, "tool_calls": _tool_calls(turn, body["tools"], index)}
            finish_reason = "tool_calls"
        elif FINAL_ANSWER_TOOL in _tool_names(body):
            answer = {"answer": _answer_text(turn, index)}
            call = _call(FINAL_ANSWER_TOOL, answer, f"call_{_digest(turn, index)[:24]}")
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish_reason = "tool_calls"
        else:
            message = {"role": "assistant", "content": _answer_text(turn, index)}
            finish_reason = "stop"
        choices.append({"index": index, "message": message, "finish_reason": finish_reason, "logprobs": None})
    prompt_tokens = sum(approx_tokens(message_text(m)) for m in messages)
    prompt_tokens += approx_tokens(json.dumps(body.get("tools"))) if body.get("tools") else 0
    completion_tokens = sum(
        approx_tokens(c["message"]["content"] or json.dumps(c["message"].get("tool_calls"))) for c in choices
    )
    return {
        "id": f"chatcmpl-app{_digest(body)[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "system_fingerprint": "fp_local_app",
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def stream_chunks(completion: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The completion as OpenAI streams it: a role chunk, content (or tool-call argument) pieces, a finish chunk
    per choice, then, with `include_usage`, a chunk with no choices carrying the usage."""
    head = {key: completion[key] for key in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"

    def chunk(index: int, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**head, "choices": [choice], **({"usage": None} if include_usage else {})}

    chunks = []
    for choice in completion["choices"]:
        index, message = choice["index"], choice["message"]
        if message.get("tool_calls"):
            for position, call in enumerate(message["tool_calls"]):
                start = {"index": position, "id": call["id"], "type": "function"}
                start["function"] = {"name": call["function"]["name"], "arguments": ""}
                delta = {"role": "assistant", "content": None, "tool_calls": [start]} if position == 0 else {}
                chunks.append(chunk(index, delta or {"tool_calls": [start]}))
                for piece in _WORD.findall(call["function"]["arguments"]):
                    chunks.append(chunk(index, {"tool_calls": [{"index": position, "function": {"arguments": piece}}]}))
        else:
            chunks.append(chunk(index, {"role": "assistant", "content": ""}))
            for piece in _WORD.findall(message["content"]):
                chunks.append(chunk(index, {"content": piece}))
        chunks.append(chunk(index, {}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": completion["usage"]})
    return chunks


async def app_model_response(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
    """Answer an `app/...` chat-completions request, streamed or not."""
    try:
        completion = app_completion(body, request.headers.get(APP_ERROR_HEADER))
    except JudgeRequestError as error:
        return web.json_response(error.body(), status=error.status, headers=error.headers)
    if not body.get("stream"):
        return web.json_response(completion)
    options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for piece in stream_chunks(completion, bool(options.get("include_usage"))):
        await response.write(f"data: {json.dumps(piece)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


class AppModel(Wire):
    """The `app/<name>` models on `/v1/chat/completions`, counted in `/v1/stats` like any call."""

    models = (f"{APP_MODEL_PREFIX}<name>",)

    async def chat(self, request: web.Request, body: Any) -> web.StreamResponse | None:
        if not is_app_model(body):
            return None
        self.server.count(body["model"])
        return await app_model_response(request, body)
