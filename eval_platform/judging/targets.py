"""What an evaluator judges (`target`), what feeds its `{{context}}` (`context_from`), and what is never sent.

- `trace` (the default): the user's input and the trace's final answer, with `{{conversation}}` (the last
  `conversation_last_n` messages, tool calls and results) and `{{tool_calls}}` (the trajectory); one row per trace.
- `span`: every span a `SpanSelector` matches (name, operation, attribute values; first, last or all), one row
  per span with its `span_id`. Two spans of a trace never share a row, nor a cached verdict (the cache key is
  scoped to the span).
- `session`: partition (evaluator, D) judges, once each, the sessions that have a trace on D, over all their
  traces from D - `session_lookback_days` through D in timestamp order; the row's trace_id is the session's last
  trace so far, with its `session_id`. A session that continues on a later day is judged again on that day, with
  every turn so far (see README "What an evaluator judges").

Never paid for nothing: a partial trace is SKIPPED `partial_trace` (never judged as whole), a trace (span) whose
model call failed `app_error` unless `judge_errors: true`, one with no text to judge `empty_text`. The skips are
decided here, before a prompt is built; nothing is sent, spent or reserved for them.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import Field, ValidationError, model_validator

from eval_platform.judging.units import Day, Skip, Unit, add_flag, one_call
from eval_platform.record_fields import METADATA_PREFIX, as_text, field_text
from eval_platform.schemas import (
    APP_ERROR,
    EMPTY_TEXT,
    HIDDEN_CONTENT,
    NO_FINAL_ANSWER,
    NO_SESSION,
    PARTIAL_TRACE,
    SPAN_NOT_FOUND,
    SpanOperation,
    missing_field,
)
from eval_platform.strict import Strict

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig
    from eval_platform.judging.prompts import PromptMessages

Target = Literal["trace", "span", "session"]
# What a span prompt can name about the span it judges (`span_values`; empty for a trace or a session).
SPAN_VARIABLES = ("tool_name", "span_name", "span_operation")
CONTEXT_SOURCES = ("retrieval", "tool_results")  # besides metadata.<key> and a span selector
DEFAULT_CONVERSATION_LAST_N = 20
DEFAULT_SESSION_LOOKBACK_DAYS = 7
LOOKBACK_EDGE = "session_at_lookback_edge"  # flag: the session has a trace on the window's first day


class SpanSelector(Strict):
    """Which spans of a trace: all criteria given must hold; `pick` keeps the first, the last or all of them
    (in start order). The old form `span: <name>` is `{name: <name>, pick: first}`."""

    name: str | None = Field(None, description="The span's name, exactly.")
    operation: SpanOperation | None = Field(None, description="The span's normalized GenAI operation.")
    attribute: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Raw span attributes and the values they must have."
    )
    pick: Literal["first", "last", "all"] = "all"

    @model_validator(mode="after")
    def _selects_something(self) -> SpanSelector:
        if self.name is None and self.operation is None and not self.attribute:
            raise ValueError("a span selector needs `name`, `operation` or `attribute` (or several)")
        return self

    def matches(self, span: dict[str, Any]) -> bool:
        if self.name is not None and span.get("name") != self.name:
            return False
        if self.operation is not None and span.get("operation") != self.operation:
            return False
        attributes = _json(span.get("attributes"), None) or {}
        return all(as_text(attributes.get(key)) == as_text(value) for key, value in self.attribute.items())

    def select(self, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        matching = [span for span in spans if self.matches(span)]
        return {"first": matching[:1], "last": matching[-1:], "all": matching}[self.pick]

    def describe(self) -> str:
        parts = [f"name '{self.name}'"] if self.name is not None else []
        parts += [f"operation '{self.operation}'"] if self.operation is not None else []
        parts += [f"{key}={as_text(value)}" for key, value in self.attribute.items()]
        return "span with " + " and ".join(parts)


ContextSource = str | SpanSelector  # retrieval | tool_results | metadata.<key> | a span selector


def as_selector(value: Any) -> Any:
    """A span selector written as a mapping, validated on its own so an error names the selector's field (not
    every member of the `str | SpanSelector` union); anything else is left to the field's own validation."""
    if not isinstance(value, dict):
        return value
    try:
        return SpanSelector.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(f"'{'.'.join(map(str, e['loc'])) or 'selector'}': {e['msg']}" for e in exc.errors())
        raise ValueError(f"span selector {problems}") from None


def span_selector(span: str | SpanSelector | None) -> SpanSelector | None:
    """The evaluator's `span` option as a selector (a bare name keeps its old meaning: the first such span)."""
    return SpanSelector(name=span, pick="first") if isinstance(span, str) else span


def check_context_source(source: ContextSource) -> None:
    if isinstance(source, SpanSelector) or source in CONTEXT_SOURCES:
        return
    if source.startswith(METADATA_PREFIX) and len(source) > len(METADATA_PREFIX):
        return
    raise ValueError(
        f"context_from: unknown source '{source}'; use retrieval, tool_results, metadata.<key> or a span selector "
        "({name, operation, attribute, pick})"
    )


# ------------------------------------------------------------------------------------------ reading a trace


def _json(text: Any, default: Any) -> Any:
    if not isinstance(text, str) or not text:
        return default if text is None or text == "" else text
    try:
        return json.loads(text)
    except ValueError:
        return default


def spans_of(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in _json(trace.get("spans"), []) if isinstance(s, dict)]


def _has_text(*values: Any) -> bool:
    """Whether any value is a string with a non-whitespace character (without copying it, as `strip` would);
    hidden content (`__REDACTED__`) is no text."""
    for value in values:
        if isinstance(value, str) and value and not value.isspace() and value != HIDDEN_CONTENT:
            return True
    return False


def _documents(context: Any) -> list[str]:
    """A context value (a JSON list of documents, or text) as its documents."""
    parsed = _json(context, None)
    if isinstance(parsed, list):
        return [text for d in parsed if (text := as_text(d)) is not None and text.strip()]
    return [context] if _has_text(context) else []


def _joined(parts: list[str]) -> str | None:
    return "\n\n".join(parts) if parts else None


def conversation_messages(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The trace's transcript: its `conversation`, else its input and output messages, else its input and output."""
    conversation = _json(trace.get("conversation"), None)
    if isinstance(conversation, list) and conversation:
        return [m for m in conversation if isinstance(m, dict)]
    messages = [*_json(trace.get("input_messages"), []), *_json(trace.get("output_messages"), [])]
    messages = [m for m in messages if isinstance(m, dict)]
    if messages:
        return messages
    pairs = (("user", trace.get("input")), ("assistant", trace.get("output")))
    return [{"role": role, "content": text} for role, text in pairs if _has_text(text)]


def current_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages from the last user message on: this trace's own turn of a conversation."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    return messages[users[-1] :] if users else messages


def _arguments_text(arguments: Any) -> str:
    parsed = _json(arguments, arguments)
    return as_text(parsed) or ""  # as_text(None) is None


def render_conversation(messages: list[dict[str, Any]], last_n: int, framework_prompt: bool = False) -> str | None:
    """The last `last_n` messages, one block each: role, content, tool calls and which call a result answers; an
    agent framework's own system prompt (`framework_prompt`, ingest/otel/transcript.py) only when asked for."""
    if not framework_prompt:
        messages = [m for m in messages if not m.get("framework_prompt")]
    if not messages:
        return None
    shown = messages[-last_n:]
    lines = [f"({len(messages) - len(shown)} earlier messages not shown)"] if len(shown) < len(messages) else []
    for message in shown:
        role = message.get("role") or "unknown"
        content = as_text(message.get("content"))
        if role == "tool":
            about = ", ".join(filter(None, (message.get("name"), message.get("tool_call_id"))))
            lines.append(f"tool result{f' ({about})' if about else ''}: {content or ''}")
            continue
        if _has_text(content) or not message.get("tool_calls"):
            lines.append(f"{role}: {content or ''}")
        for call in message.get("tool_calls") or []:
            called = f"{call.get('name')}({_arguments_text(call.get('arguments'))})"
            call_id = f" [id {call['id']}]" if call.get("id") else ""
            lines.append(f"{role} calls tool {called}{call_id}")
    return "\n".join(lines)


def render_tool_calls(calls: list[dict[str, Any]]) -> str | None:
    """The trajectory: each tool call with its arguments and its result (or error), in order."""
    if not calls:
        return None
    lines = []
    for i, call in enumerate(calls, start=1):
        if call.get("kind") == "handoff":  # an agent handing over the conversation, not a tool call
            lines.append(f"{i}. handoff {call.get('name')}: to {as_text(call.get('result')) or 'another agent'}")
            continue
        head = f"{i}. {call.get('name')}({_arguments_text(call.get('arguments'))})"
        if call.get("status") == "error" or call.get("error"):
            lines.append(f"{head} -> ERROR: {as_text(call.get('error')) or 'failed'}")
        else:
            lines.append(f"{head} -> {as_text(call.get('result')) or '(no result)'}")
    return "\n".join(lines)


def _tool_calls(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in _json(trace.get("tool_calls"), []) if isinstance(c, dict)]


def context_text(trace: dict[str, Any], sources: list[ContextSource] | None) -> str | None:
    """`{{context}}`: the trace's own context, or what `context_from` names, in the order named."""
    if sources is None:
        return _joined(_documents(trace.get("context")))
    parts: list[str] = []
    for source in sources:
        if isinstance(source, SpanSelector):
            for span in source.select(spans_of(trace)):
                docs = _documents(span.get("context"))
                parts += docs or [
                    t for t in (span.get("output"), span.get("tool_result")) if isinstance(t, str) and _has_text(t)
                ]
        elif source == "retrieval":
            for span in spans_of(trace):
                if span.get("operation") == "retrieval":
                    output = [span["output"]] if _has_text(span.get("output")) else []
                    parts += _documents(span.get("context")) or output
        elif source == "tool_results":
            for call in _tool_calls(trace):
                result = as_text(call.get("result"))
                if _has_text(result):
                    parts.append(f"{call.get('name')}: {result}")
        else:
            value = field_text(trace, source)
            if value is not None and _has_text(value):
                parts.append(value)
    return _joined(parts)


# ------------------------------------------------------------------------------------------ template values


def trace_values(
    trace: dict[str, Any],
    span: str | SpanSelector | None = None,
    conversation_last_n: int = DEFAULT_CONVERSATION_LAST_N,
    context_from: list[ContextSource] | None = None,
    framework_prompt: bool = False,
) -> dict[str, str | None]:
    """Template values of a trace; with `span`, input/output/context come from the first span it selects
    (the pair and group modes' `span` option; target span judges each selected span, see `span_values`)."""
    selector = span_selector(span)
    if selector is not None:
        matching = selector.select(spans_of(trace))
        if not matching:
            raise LookupError(f"{selector.describe()} not found in trace {trace.get('trace_id')}")
        return span_values(trace, matching[0], conversation_last_n, context_from, framework_prompt)
    metadata = trace.get("metadata")
    return {
        "input": trace.get("input"),
        "output": trace.get("output"),
        "context": context_text(trace, context_from),
        "expected": trace.get("expected_output"),
        "metadata": None if metadata in (None, "{}") else metadata,
        "conversation": render_conversation(conversation_messages(trace), conversation_last_n, framework_prompt),
        "tool_calls": render_tool_calls(_tool_calls(trace)),
        **dict.fromkeys(SPAN_VARIABLES),
    }


def span_values(
    trace: dict[str, Any],
    span: dict[str, Any],
    conversation_last_n: int = DEFAULT_CONVERSATION_LAST_N,
    context_from: list[ContextSource] | None = None,
    framework_prompt: bool = False,
) -> dict[str, str | None]:
    """A span's input and output (a tool span's arguments and result), its context or `context_from`'s; the
    conversation and trajectory are its trace's (what the span ran within)."""
    values = trace_values(trace, None, conversation_last_n, context_from, framework_prompt)
    values["input"] = span.get("input") if _has_text(span.get("input")) else as_text(span.get("tool_arguments"))
    values["output"] = span.get("output") if _has_text(span.get("output")) else as_text(span.get("tool_result"))
    values["tool_name"] = span.get("tool_name") if span.get("operation") == "execute_tool" else None
    values["span_name"] = span.get("name")
    values["span_operation"] = span.get("operation")
    if context_from is None:
        values["context"] = _joined(_documents(span.get("context")))
    return values


def session_values(
    traces: list[dict[str, Any]],
    conversation_last_n: int = DEFAULT_CONVERSATION_LAST_N,
    context_from: list[ContextSource] | None = None,
    framework_prompt: bool = False,
) -> dict[str, str | None]:
    """A session's values: its first input, its last answer, every turn of every trace in order (system
    messages of the first trace, then each trace's own turn), the tool calls of all its traces."""
    first, last = traces[0], traces[-1]
    opening = [m for m in conversation_messages(first) if m.get("role") == "system"]
    messages = opening + [m for trace in traces for m in current_turn(conversation_messages(trace))]
    calls = [call for trace in traces for call in _tool_calls(trace)]
    contexts = [text for trace in traces if (text := context_text(trace, context_from))]
    metadata = last.get("metadata")
    return {
        "input": first.get("input"),
        "output": last.get("output"),
        "context": _joined(contexts),
        "expected": last.get("expected_output"),
        "metadata": None if metadata in (None, "{}") else metadata,
        "conversation": render_conversation(messages, conversation_last_n, framework_prompt),
        "tool_calls": render_tool_calls(calls),
        **dict.fromkeys(SPAN_VARIABLES),
    }


# ------------------------------------------------------------------------------------------ skips


def _failure(record: dict[str, Any]) -> str | None:
    """Why a trace's (span's) model call failed, or None when it did not."""
    failed = record.get("error") is True or str(record.get("status") or "").lower() == "error"
    if not failed and not record.get("error_type"):
        return None
    kind = record.get("error_type") or "error"
    message = record.get("error_message")
    return f"{kind}: {message}" if message else str(kind)


def trace_skip(config: EvaluatorConfig, trace: dict[str, Any]) -> Skip | None:
    """Why a trace is not sent to the judge (target trace), or None."""
    trace_id = trace.get("trace_id")
    if trace.get("partial_reason"):
        return PARTIAL_TRACE, f"trace {trace_id} is partial ({trace['partial_reason']}): never judged as whole"
    failure = _failure(trace)
    if failure is not None and not config.judge_errors:
        return APP_ERROR, f"the traced call failed ({failure}); set judge_errors: true to judge failed traces"
    if not _has_text(trace.get("input"), trace.get("output")) and not conversation_messages(trace):
        return EMPTY_TEXT, f"trace {trace_id} has no input and no output text (was message content captured?)"
    return missing_text(config, {"input": trace.get("input"), "output": trace.get("output")}, f"trace {trace_id}")


def shown_fields(config: EvaluatorConfig) -> set[str]:
    """The fields the evaluator's prompt shows unconditionally (outside an `{{#if}}` on that same field)."""
    from eval_platform.judging.templates import parse_template, required_names

    return required_names(parse_template(config.prompt, allowed=config.judge_mode.template_variables()))


def missing_text(config: EvaluatorConfig, values: dict[str, Any], what: str) -> Skip | None:
    """A prompt showing `{{output}}` or `{{input}}` for a row where it is empty is not sent (a judge paid to grade
    an empty answer, or an answer to an unknown question): SKIPPED no_final_answer / missing_field:input, unless
    the evaluator sets judge_missing_fields."""
    if config.judge_missing_fields:
        return None
    shown = shown_fields(config)
    opt_in = "set judge_missing_fields: true to judge it all the same"
    if "output" in shown and not _has_text(values.get("output")):
        return NO_FINAL_ANSWER, f"{what} has no final answer (output) and the prompt shows {{{{output}}}}; {opt_in}"
    if "input" in shown and not _has_text(values.get("input")):
        detail = f"{what} has no input (not recorded by its instrumentation?) and the prompt shows {{{{input}}}}"
        return missing_field("input"), f"{detail}; {opt_in}"
    return None


def span_skip(config: EvaluatorConfig, trace: dict[str, Any], span: dict[str, Any]) -> Skip | None:
    span_id = span.get("span_id")
    failure = _failure(span)
    if failure is not None and not config.judge_errors:
        return APP_ERROR, f"span {span_id} failed ({failure}); set judge_errors: true to judge failed spans"
    tool_text = (as_text(span.get("tool_arguments")), as_text(span.get("tool_result")))
    if not _has_text(span.get("input"), span.get("output"), *tool_text):
        return EMPTY_TEXT, f"span {span_id} of trace {trace.get('trace_id')} has no text"
    values = span_values(trace, span)
    return missing_text(config, values, f"span {span_id} of trace {trace.get('trace_id')}")


def session_skip(config: EvaluatorConfig, session_id: str, traces: list[dict[str, Any]]) -> Skip | None:
    partial = [t["trace_id"] for t in traces if t.get("partial_reason")]
    if partial:
        return PARTIAL_TRACE, f"session {session_id} holds partial trace(s) {', '.join(partial)}: never judged whole"
    failure = _failure(traces[-1])
    if failure is not None and not config.judge_errors:
        detail = f"the session's last trace {traces[-1]['trace_id']} failed ({failure})"
        return APP_ERROR, f"{detail}; set judge_errors: true to judge it"
    if not any(_has_text(t.get("input"), t.get("output")) or conversation_messages(t) for t in traces):
        return EMPTY_TEXT, f"no trace of session {session_id} has input or output text"
    values = {"input": traces[0].get("input"), "output": traces[-1].get("output")}
    return missing_text(config, values, f"session {session_id}")


# ------------------------------------------------------------------------------------------ planning


def plan_units(day: Day) -> list[Unit]:
    """The day's units for the evaluator's target: its mode's own planning for traces, else spans or sessions."""
    target = day.config.judged_target
    if target == "span":
        return span_units(day)
    if target == "session":
        return session_units(day)
    return day.config.judge_mode.units(day)


def _values_kwargs(config: EvaluatorConfig) -> dict[str, Any]:
    return {
        "conversation_last_n": config.conversation_last_n,
        "context_from": config.context_from,
        "framework_prompt": config.framework_prompt,
    }


def span_units(day: Day) -> list[Unit]:
    """One unit per selected span (sampling and manual selection by its trace); a trace with none: span_not_found."""
    config = day.config
    selector = span_selector(config.span)
    assert selector is not None  # `judged_target` 'span': the evaluator has its `span`
    units = []
    for trace in day.records:
        spans = selector.select(spans_of(trace))
        if not spans:
            detail = f"{selector.describe()} not found in trace {trace['trace_id']}"
            units.append(Unit(trace["trace_id"], [day.base_row(trace)], skip=(SPAN_NOT_FOUND, detail)))
            continue
        for span in spans:
            slot = {**day.base_row(trace), "span_id": span.get("span_id")}
            unit = Unit(trace["trace_id"], [slot], skip=span_skip(config, trace, span))
            if unit.skip is None:
                # the runner's `Day.messages` is the evaluator's PromptBuilder, whose messages carry a cache scope
                messages = cast("PromptMessages", day.messages(span_values(trace, span, **_values_kwargs(config))))
                # Two spans of one trace never share a verdict, even with the same text: the cache key holds the span.
                messages.cache_scope = f"span:{trace['trace_id']}/{span.get('span_id')}"
                unit.judge = one_call(day, slot, messages)
            units.append(unit)
    return units


def session_window(day: str, lookback_days: int) -> list[str]:
    """The days a session partition reads, oldest first: `day` - lookback_days through `day`."""
    end = date.fromisoformat(day)
    return [(end - timedelta(days=n)).isoformat() for n in range(lookback_days, -1, -1)]


def _trace_day(trace: dict[str, Any]) -> str | None:
    if trace.get("date"):
        return trace["date"]
    stamp = trace.get("timestamp")
    return stamp.date().isoformat() if stamp is not None else None


def session_units(day: Day) -> list[Unit]:
    """One unit per session with a trace on the day, over its traces of the window; a trace without a session:
    SKIPPED no_session."""
    config = day.config
    window = session_window(day.day, config.session_lookback_days)
    in_window = [t for t in day.records if _trace_day(t) in window]
    sessions: dict[str, list[dict]] = {}
    units = []
    for trace in in_window:
        if trace.get("session_id"):
            sessions.setdefault(trace["session_id"], []).append(trace)
        elif _trace_day(trace) == day.day:
            skip = (NO_SESSION, f"trace {trace['trace_id']} has no session_id (target session)")
            units.append(Unit(trace["trace_id"], [day.base_row(trace)], skip=skip))
    for session_id, traces in sorted(sessions.items()):
        if not any(_trace_day(t) == day.day for t in traces):
            continue  # judged on its own last day
        traces.sort(key=lambda t: (t.get("timestamp") is None, t.get("timestamp"), t["trace_id"]))
        last = traces[-1]
        slot = {**day.base_row(last), "session_id": session_id}
        if _trace_day(traces[0]) == window[0]:
            add_flag(slot, LOOKBACK_EDGE)  # it may have begun before the window: earlier turns are not shown
        unit = Unit(last["trace_id"], [slot], skip=session_skip(config, session_id, traces))
        if unit.skip is None:
            unit.judge = one_call(day, slot, day.messages(session_values(traces, **_values_kwargs(config))))
        units.append(unit)
    return units
