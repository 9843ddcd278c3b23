"""The trace model: one assembled trace -> its `traces` row (the whole run) and its `spans` rows.

What the `traces` row says about an OTLP trace (every convention read into `SpanFields` first):

- `timestamp`: the root span's start; `latency_ms`: root start to the last end of any span of the trace;
- *inference spans*: `chat` / `text_completion` spans; the *final* one is the last (by end) whose status is
  not ERROR. `conversation` = its input messages plus its first output message (the transcript as the model
  last saw it); null when no content was captured anywhere;
- `output`: the final answer, the assistant message of the final inference span (its first choice when it
  returned several), unless that message is a tool call (a `tool_call` message is never an answer: a run that
  ended on one has no output, whatever its root says); else the root's own output (an agent's, a workflow's,
  Langfuse's `langfuse.trace.output`), or, before those, the result of a framework's answer tool (operation
  `final_answer`, smolagents'); `input`: the last user message before that answer in the conversation (of the
  last model call when every call failed); else the root's input. `input_messages` / `output_messages`: the
  final inference span's messages as it held them;
- `tool_calls`: the trajectory in start order: one entry per tool span `{span_id, name, arguments, result,
  status, error}`; a trace without tool spans takes the assistant tool calls of its own turn (the conversation
  from its last user message on: earlier turns' calls are earlier traces') matched to the tool messages by
  `tool_call_id` (`span_id` null); a tool span without arguments/result (content captured
  on events only) takes them from the conversation by its `gen_ai.tool.call.id`, and one whose arguments are not
  JSON (LangGraph's bare argument) the model's call's JSON arguments; a handoff span (operation `handoff`) is an
  entry `{span_id, kind: "handoff", name, arguments, result: <agent>, status, error}`, a `final_answer` span
  none. `[]` when the trace's content
  was captured (it has a conversation) and no tool was called (a check of expected tools scores it 0); null when
  nothing is known (no tool span and no content captured);
- `prompt_tokens` / `completion_tokens`: sums over the model-call spans (chat, text_completion, embeddings),
  a model call inside another one not counted again; an agent's or workflow's own aggregate is never added.
  Without any model-call span with usage, the root's own usage;
- `cost_usd`: `app.cost_usd` of the root (or its resource), else summed over the spans carrying it; else the
  spans' `llm.cost.total` / Langfuse `cost_details.total` summed over the model-call spans;
- `error`: the root or the last inference span is an error (status ERROR, `error.type`, Langfuse level ERROR),
  with that span's `error_type` / `error_message`;
- `model`: the final inference span's model, else the root's, else the first model of the trace;
- `session_id` / `user_id`: the first found on the root, then the other spans in start order, then the resource;
- `context`: the documents of every retrieval span, in start order;
- `trace_id`: `eval.trace_id` if set (the application's own id), else the OTLP trace id;
  `project_id`: `eval.project_id`, else the resource's `service.name`; `experiment_id`, `variant`,
  `expected_output`, `metadata` (`eval.metadata` JSON plus `eval.metadata.<key>`, and `conversation_id`):
  looked up on the root, its resource, then the other spans in start order;
- `spans`: every span in start order with the keys of `SPAN_KEYS` (H3's selectors read them): the one place a span
  is stored, the `spans` view reads its columns from it;
- `span_count`, `partial_reason`, `flags` from assembly (`assembly.py`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from eval_platform.ingest.common import dumps
from eval_platform.ingest.messages import maybe_json, render_messages
from eval_platform.ingest.otel.assembly import Trace
from eval_platform.ingest.otel.envelope import Span
from eval_platform.ingest.otel.fields import INFERENCE, USAGE, label
from eval_platform.ingest.otel.transcript import as_text, normalize_messages
from eval_platform.ingest.records import EPOCH

SPAN_KEYS = (
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "operation",
    "status",
    "error_type",
    "model",
    "input",
    "output",
    "context",
    "tool_name",
    "tool_arguments",
    "tool_result",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "attributes",
    # the rest of the span's columns of the `spans` view, which reads them from here (`schemas.spans_view_sql`)
    "otel_trace_id",
    "convention",
    "error_message",
    "start_time",
    "end_time",
    "input_messages",
    "output_messages",
    "tool_call_id",
    "documents",
    "session_id",
    "user_id",
    "source_file",
    "source_line",
)
ATTR_TRACE_ID, ATTR_PROJECT, ATTR_EXPERIMENT = "eval.trace_id", "eval.project_id", "eval.experiment_id"
ATTR_VARIANT, ATTR_EXPECTED, ATTR_METADATA, ATTR_COST = (
    "eval.variant",
    "eval.expected_output",
    "eval.metadata",
    "app.cost_usd",
)


def datetime_from_nanos(nanos: int) -> datetime:
    return EPOCH + timedelta(microseconds=nanos // 1000)


def _render(messages: list[dict[str, Any]] | None, single_role: str) -> str | None:
    return render_messages(messages, single_role) if messages else None


def span_input(span: Span) -> str | None:
    f = span.fields
    if f.operation == "execute_tool":
        return f.tool_arguments
    return _render(f.input_messages, "user") or f.input_value


def span_output(span: Span) -> str | None:
    f = span.fields
    if f.operation == "execute_tool":
        return f.tool_result
    return _render(f.output_messages, "assistant") or f.output_value


def latency_ms(span: Span) -> float | None:
    return (span.end_ns - span.start_ns) / 1e6 if span.end_ns and span.start_ns else None


def span_summary(span: Span) -> dict[str, Any]:
    """The span's object in `traces.spans` (keys: SPAN_KEYS), where the span is stored: the judge reads it there,
    and the `spans` view's columns are its keys (times as ISO 8601 text, messages, documents and attributes as JSON)."""
    f = span.fields
    return {
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "kind": span.kind,
        "operation": f.operation,
        "status": "error" if f.error_type else span.status,
        "error_type": f.error_type,
        "model": f.model,
        "input": span_input(span),
        "output": span_output(span),
        "context": f.documents if f.operation == "retrieval" else None,
        "tool_name": f.tool_name,
        "tool_arguments": f.tool_arguments,
        "tool_result": f.tool_result,
        "latency_ms": latency_ms(span),
        "prompt_tokens": f.prompt_tokens,
        "completion_tokens": f.completion_tokens,
        "attributes": span.attrs,
        "otel_trace_id": span.trace_id,
        "convention": f.convention,
        "error_message": f.error_message,
        "start_time": datetime_from_nanos(span.start_ns).isoformat() if span.start_ns else None,
        "end_time": datetime_from_nanos(span.end_ns).isoformat() if span.end_ns else None,
        "input_messages": f.input_messages,
        "output_messages": f.output_messages,
        "tool_call_id": f.tool_call_id,
        "documents": f.documents,
        "session_id": f.session_id,
        "user_id": f.user_id,
        "source_file": span.file,
        "source_line": span.line,
    }


def _nested_in(span: Span, kinds: set[str], by_id: dict[str | None, Span]) -> bool:
    """Whether an ancestor of the span is a span of one of `kinds` (a model call wrapping a model call)."""
    seen, current = set(), by_id.get(span.parent_span_id)
    while current is not None and current.span_id not in seen:
        if current.fields.operation in kinds:
            return True
        seen.add(current.span_id)
        current = by_id.get(current.parent_span_id)
    return False


def _sum(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _answer(messages: list[dict[str, Any]] | None) -> str | None:
    """The answer among a model call's output messages: the first choice, unless it is a tool call."""
    first = next((m for m in messages or [] if m.get("role") == "assistant"), None)
    return first.get("content") if first is not None and not first.get("tool_calls") else None


def _user_text(messages: list[dict[str, Any]] | None) -> str | None:
    users = [m for m in messages or [] if m.get("role") == "user" and m.get("content")]
    return users[-1]["content"] if users else None


def _this_turn(conversation: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The messages from the conversation's last user message on: this run's own turn (the history before it
    holds earlier runs' tool calls, which are theirs, not this trace's)."""
    messages = conversation or []
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    return messages[users[-1] :] if users else messages


def _is_object(text: str | None) -> bool:
    return isinstance(maybe_json(text) if text else None, (dict, list))


def _complete_tool_spans(spans: list[Span], conversation: list[dict[str, Any]] | None) -> None:
    """A tool span whose arguments are not the call's JSON (LangGraph's bare argument) takes the model's call's
    arguments from the conversation, by its call id (else the turn's one call of its name)."""
    calls = [c for m in _this_turn(conversation) for c in m.get("tool_calls") or []]
    arguments = {c.get("id"): c.get("arguments") for c in calls}
    for s in spans:
        f = s.fields
        if f.operation != "execute_tool" or _is_object(f.tool_arguments):
            continue
        if f.tool_call_id in arguments:
            f.tool_arguments = arguments[f.tool_call_id] or f.tool_arguments
            continue
        named = [c for c in calls if c.get("name") == f.tool_name]
        if len(named) == 1 and f.tool_call_id is None:  # no id (a tool that raised): the one call of its name
            f.tool_arguments = named[0].get("arguments") or f.tool_arguments


def _handoff(span: Span, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A handoff's trajectory entry (kind `handoff`): named as the model called it (`transfer_to_<agent>`) when
    the conversation holds that call."""
    target = span.fields.tool_name
    call = next((c for c in calls if c.get("name") == f"transfer_to_{target}"), None)
    return {
        "span_id": span.span_id,
        "kind": "handoff",
        "name": call.get("name") if call else span.name,
        "arguments": call.get("arguments") if call else None,
        "result": target,
        "status": "error" if span.fields.error_type else "ok",
        "error": span.fields.error_message or span.fields.error_type,
    }


def _trajectory(spans: list[Span], conversation: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    tools = [s for s in spans if s.fields.operation in ("execute_tool", "handoff")]
    turn = _this_turn(conversation)
    results = {m.get("tool_call_id"): m.get("content") for m in turn if m.get("role") == "tool"}
    calls = [call for m in turn if m.get("role") == "assistant" for call in m.get("tool_calls") or []]
    if tools:  # a tool span without content (captured on events only) borrows its call's from the conversation
        arguments = {c.get("id"): c.get("arguments") for c in calls}
        return [
            _handoff(s, calls)
            if s.fields.operation == "handoff"
            else {
                "span_id": s.span_id,
                "name": s.fields.tool_name or s.name,
                "arguments": s.fields.tool_arguments or arguments.get(s.fields.tool_call_id),
                "result": s.fields.tool_result
                or (results.get(s.fields.tool_call_id) if not s.fields.error_type else None),
                "status": "error" if s.fields.error_type else "ok",
                "error": s.fields.error_message or s.fields.error_type,
            }
            for s in tools
        ]
    if any(s.fields.operation == "final_answer" for s in spans):  # the answer tool is no tool call
        calls = [c for c in calls if c.get("name") != "final_answer"]
    if not calls:  # content captured and no tool called: a known, empty trajectory; nothing captured: unknown
        return [] if conversation else None
    return [
        {
            "span_id": None,
            "name": c.get("name"),
            "arguments": c.get("arguments"),
            "result": results.get(c.get("id")),
            "status": "ok",
            "error": None,
        }
        for c in calls
    ]


def _cost(root: Span, others: list[Span], calls: list[Span]) -> Any:
    cost = root.attrs.get(ATTR_COST, root.resource.get(ATTR_COST))
    if cost is not None:
        return cost
    costs = [s.attrs[ATTR_COST] for s in others if s.attrs.get(ATTR_COST) is not None]
    if costs:
        numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in costs)
        return sum(costs) if numeric else next(c for c in costs if not isinstance(c, (int, float)))
    return _sum([s.fields.cost_usd for s in calls])


def trace_record(trace: Trace) -> dict[str, Any]:
    """The trace's canonical record (validated by `records.normalize_record`) plus its `extras`: the new columns
    and its span rows, which are set after validation."""
    root, spans = trace.root, trace.spans
    by_id = {s.span_id: s for s in spans}
    inference = [s for s in spans if s.fields.operation in INFERENCE]
    ok = [s for s in inference if not s.fields.error_type]
    final = max(ok, key=lambda s: (s.end_ns or 0, s.sort_key)) if ok else None
    last = max(inference, key=lambda s: (s.end_ns or 0, s.sort_key)) if inference else None
    rf = root.fields
    conversation = None
    if final is not None and (final.fields.input_messages or final.fields.output_messages):
        conversation = [*(final.fields.input_messages or []), *(final.fields.output_messages or [])[:1]]
    output = _answer(final.fields.output_messages) if final else None
    answers = [s for s in spans if s.fields.operation == "final_answer" and not s.fields.error_type]
    if output is None and answers:  # a framework's answer tool (smolagents' final_answer): its result is the answer
        output = max(answers, key=lambda s: (s.end_ns or 0, s.sort_key)).fields.tool_result
    ended_on_call = final is not None and bool(final.fields.output_messages) and output is None
    if output is None and not ended_on_call:  # a run that ended on a tool call has no answer, under any convention
        trace_output = rf.trace_output if rf.trace_output is not None else None
        output = (
            _answer(normalize_messages(trace_output, "assistant")) or as_text(trace_output)
            if trace_output is not None
            else _answer(rf.output_messages) or rf.output_value
        )
    asked = final or last  # a run whose every model call failed: the question its last call asked
    user_input = _user_text(asked.fields.input_messages) if asked else None
    if user_input is None:
        trace_input = rf.trace_input
        user_input = (
            _user_text(normalize_messages(trace_input, "user")) or as_text(trace_input)
            if trace_input is not None
            else _user_text(rf.input_messages) or rf.input_value
        )
    calls = [s for s in spans if s.fields.operation in USAGE and not _nested_in(s, USAGE, by_id)]
    usage = {
        "prompt_tokens": _sum([s.fields.prompt_tokens for s in calls]),
        "completion_tokens": _sum([s.fields.completion_tokens for s in calls]),
    }
    if usage["prompt_tokens"] is None and usage["completion_tokens"] is None:
        usage = {"prompt_tokens": rf.prompt_tokens, "completion_tokens": rf.completion_tokens}
    failed = next((s for s in (root, last) if s is not None and s.fields.error_type), None)
    others = [s for s in spans if s is not root]
    scopes = [root.attrs, root.resource] + [s.attrs for s in others]

    def lookup(key: str) -> Any:
        return next((scope[key] for scope in scopes if scope.get(key) is not None), None)

    def first_field(name: str) -> Any:
        value = next((getattr(s.fields, name) for s in [root, *others] if getattr(s.fields, name)), None)
        return value

    metadata: Any = lookup(ATTR_METADATA)
    metadata = maybe_json(metadata) if isinstance(metadata, str) else metadata
    if metadata is None or isinstance(metadata, dict):
        merged = dict(metadata or {})
        prefix = ATTR_METADATA + "."
        for scope in reversed(scopes):  # the root's own attributes are applied last and win
            merged.update({key[len(prefix) :]: value for key, value in scope.items() if key.startswith(prefix)})
        conversation_id = lookup("gen_ai.conversation.id")
        if conversation_id is not None:
            merged.setdefault("conversation_id", conversation_id)
        metadata = merged
    documents = [d for s in spans if s.fields.operation == "retrieval" for d in (s.fields.documents or [])]
    has_retrieval = any(s.fields.operation == "retrieval" for s in spans)
    end = max((s.end_ns or s.start_ns or 0) for s in spans)
    model = (final.fields.model if final else None) or rf.model or first_field("model")
    record = {
        "trace_id": lookup(ATTR_TRACE_ID) or trace.trace_id,
        "timestamp": datetime_from_nanos(root.start_ns or 0),
        "input": user_input,
        "output": output,
        "context": documents if has_retrieval else None,
        "expected_output": lookup(ATTR_EXPECTED),
        "metadata": metadata,
        "project_id": lookup(ATTR_PROJECT) or root.resource.get("service.name"),
        "model": model,
        "experiment_id": lookup(ATTR_EXPERIMENT),
        "variant": lookup(ATTR_VARIANT),
        "latency_ms": (end - root.start_ns) / 1e6 if root.start_ns and end >= root.start_ns else None,
        "cost_usd": _cost(root, others, calls),
        **usage,
    }
    _complete_tool_spans(spans, conversation)
    summaries = [span_summary(s) for s in spans]
    source = final or root
    extras = {
        "input_messages": dumps(source.fields.input_raw or source.fields.input_messages)
        if (source.fields.input_raw or source.fields.input_messages)
        else None,
        "output_messages": dumps(source.fields.output_raw or source.fields.output_messages)
        if (source.fields.output_raw or source.fields.output_messages)
        else None,
        "spans": dumps(summaries),
        "session_id": first_field("session_id") or label(root.resource.get("session.id")),
        "user_id": first_field("user_id") or label(root.resource.get("user.id")),
        "conversation": dumps(conversation) if conversation else None,
        "tool_calls": _json_or_none(_trajectory(spans, conversation)),
        "error": failed is not None,
        "error_type": failed.fields.error_type if failed else None,
        "error_message": failed.fields.error_message if failed else None,
        "span_count": len(spans),
        "partial_reason": trace.partial_reason,
        "flags": dumps(trace.flags) if trace.flags else None,
    }
    return {"record": record, "extras": extras, "summaries": summaries}


def _json_or_none(value: Any) -> str | None:
    return None if value is None else dumps(value)
