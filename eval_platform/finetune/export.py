"""Which of a day's traces pass an export's thresholds, and their conversations in OpenAI's fine-tuning format.

One JSONL line per passing trace: `{"messages": [...]}` with roles system / user / assistant / tool, assistant
messages carrying `tool_calls` (`{id, type: function, function: {name, arguments: <JSON text of an object>}}`) and
tool messages their `tool_call_id`, plus `"tools": [...]` when the trace declared its tool definitions
(`metadata.tools`, a list of OpenAI tool objects). The last message is always the assistant's final answer.

Where a trace's messages come from, first found: `conversation` (the transcript with tool calls, traces table),
then `input_messages` + `output_messages`, then `input` + `output` as one user and one assistant message. When
the transcript stops before the answer (on the user's or a tool's message) and the trace has an `output`, the
answer is appended; a transcript that ends on the assistant's tool call has no final answer.

A line is never repaired into something the trace did not say (a made-up answer, a renamed function, arguments
rewritten): what OpenAI's format cannot hold is left out with its reason. A trace is left out, counted under the
first reason met, in this order:
`partial_trace` (its spans did not all arrive), `app_error` (its run failed; unless include_failed_runs),
then per declared evaluator in order: `not_scored:<ev>` (no final row of that evaluator for the trace that day),
`failed:<ev>` / `skipped:<ev>` (a final row FAILED / SKIPPED: never passes), `below_threshold:<ev>`,
and then, reading its messages: `no_final_answer` (no assistant text at the end: e.g. an agent that stopped on a
tool call), `unanswered_tool_call` (a tool call no tool message answers before the conversation goes on: the chat
API refuses it), `bad_tool_arguments` (a call's arguments are not the JSON text of an object: `"city=Lima"`),
`bad_function_name` (a called function's name outside ^[a-zA-Z0-9_-]{1,64}$: `web.search`), `bad_tools`
(`metadata.tools` not OpenAI function tools with valid names), `bad_messages` (a role the format has no place
for, a tool message answering no call, no user message).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import polars as pl

from eval_platform.finetune.config import FinetuneExport, Threshold
from eval_platform.ingest.messages import is_message_list
from eval_platform.ingest.otel.transcript import normalize_message
from eval_platform.schemas import (
    APP_ERROR,
    BAD_FUNCTION_NAME,
    BAD_MESSAGES,
    BAD_TOOL_ARGUMENTS,
    BAD_TOOLS,
    COMPLETED,
    FAILED,
    NO_FINAL_ANSWER,
    PARTIAL_TRACE,
    SKIPPED,
    UNANSWERED_TOOL_CALL,
)

ROLES = ("system", "user", "assistant", "tool")
FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # OpenAI's rule for a function's name


class BadMessages(ValueError):
    """The trace's messages cannot be written in the fine-tuning format: `reason` (schemas.py) and why."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class NoFinalAnswer(ValueError):
    """The trace has no final assistant answer to learn from."""


@dataclass
class ExportDay:
    """One export's day: the JSONL lines, the trace of each line, and the counts."""

    lines: list[str] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)
    considered: int = 0
    excluded: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        return len(self.lines)

    def jsonl(self) -> bytes:
        return "".join(line + "\n" for line in self.lines).encode()


def _passes(threshold: Threshold) -> pl.Expr:
    if threshold.min_score is not None:
        return pl.col("score") >= threshold.min_score
    return pl.col("passed")


def verdict_outcomes(export: FinetuneExport, scores: pl.DataFrame) -> pl.DataFrame:
    """Per (trace_id, evaluator) of the declared evaluators: `pass`, `failed`, `skipped` or `below_threshold`,
    from the final, whole-trace rows of judge_scores (a pair's, span's or session's row never counts)."""
    frames = []
    for threshold in export.evaluators:
        rows = scores.filter(
            (pl.col("evaluator") == threshold.evaluator)
            & pl.col("is_final")
            & pl.col("trace_id_b").is_null()
            & pl.col("span_id").is_null()
            & pl.col("session_id").is_null()
        )
        per_trace = rows.group_by("trace_id").agg(
            failed=(pl.col("status") == FAILED).any(),
            skipped=(pl.col("status") == SKIPPED).any(),
            # a missing score or verdict is not a pass
            ok=((pl.col("status") == COMPLETED) & _passes(threshold).fill_null(False)).all(),
        )
        frames.append(
            per_trace.select(
                "trace_id",
                pl.lit(threshold.evaluator).alias("evaluator"),
                pl.when("failed")
                .then(pl.lit("failed"))
                .when("skipped")
                .then(pl.lit("skipped"))
                .when(~pl.col("ok"))
                .then(pl.lit("below_threshold"))
                .otherwise(pl.lit("pass"))
                .alias("outcome"),
            )
        )
    return pl.concat(frames) if frames else pl.DataFrame(schema={"trace_id": pl.String, "evaluator": pl.String})


def exclusion_reasons(export: FinetuneExport, traces: pl.DataFrame, scores: pl.DataFrame) -> pl.Series:
    """Per trace (in `traces` order), the first reason it is left out, or null when it passes every threshold."""
    outcomes = verdict_outcomes(export, scores)
    frame = traces.select("trace_id", "partial_reason", "error").with_row_index("_row")
    reasons: list[pl.Expr] = [
        pl.when(pl.col("partial_reason").is_not_null()).then(pl.lit(PARTIAL_TRACE)),
    ]
    if not export.include_failed_runs:
        reasons.append(pl.when(pl.col("error").fill_null(False)).then(pl.lit(APP_ERROR)))
    for i, threshold in enumerate(export.evaluators):
        column = f"_outcome{i}"
        mine = outcomes.filter(pl.col("evaluator") == threshold.evaluator)
        mine = mine.select("trace_id", pl.col("outcome").alias(column))
        frame = frame.join(mine, on="trace_id", how="left")
        name = threshold.evaluator
        reasons.append(
            pl.when(pl.col(column).is_null())
            .then(pl.lit(f"not_scored:{name}"))
            .when(pl.col(column) != "pass")
            .then(pl.col(column) + f":{name}")
        )
    return frame.sort("_row").select(pl.coalesce(reasons).alias("reason"))["reason"]


def _role(message: dict[str, Any]) -> str:
    role = str(message.get("role") or "").lower()
    if role not in ROLES:
        raise BadMessages(BAD_MESSAGES, f"role {message.get('role')!r} has no place in the fine-tuning format")
    return role


def function_name_ok(name: Any) -> TypeGuard[str]:
    """A function name as OpenAI accepts it: ^[a-zA-Z0-9_-]{1,64}$ (never rewritten: a renamed call is not what
    the agent called, and its tool definition would no longer match)."""
    return isinstance(name, str) and FUNCTION_NAME.fullmatch(name) is not None


def _arguments(arguments: Any, name: str) -> str:
    """The call's arguments as the JSON text of an object, as the agent sent them (an object is written as JSON)."""
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return arguments
    raise BadMessages(
        BAD_TOOL_ARGUMENTS, f"{name}: arguments {str(arguments)[:80]!r} are not the JSON text of an object"
    )


def _tool_call(call: Any, fallback_id: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise BadMessages(BAD_MESSAGES, f"a tool call is {type(call).__name__}, not an object")
    inner = call.get("function")
    function = inner if isinstance(inner, dict) else call
    name = function.get("name")
    if not function_name_ok(name):
        raise BadMessages(BAD_FUNCTION_NAME, f"function name {name!r} is not ^[a-zA-Z0-9_-]{{1,64}}$")
    return {
        "id": str(call.get("id") or fallback_id),
        "type": "function",
        "function": {"name": name, "arguments": _arguments(function.get("arguments"), name)},
    }


def openai_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Messages (the traces table's conversation shape, OpenAI's, or OTel's `parts`, read by the ingest's
    `normalize_message`) in the fine-tuning format, and the tool calls of the last assistant turn still open.

    Tool calls without an id get `call_<n>_<i>`; a tool message without `tool_call_id` answers the oldest open call
    of the turn before it. Every call must be answered by the tool messages right after its turn (the chat API
    refuses it otherwise): a message of another role while a call is open raises `BadMessages`
    (unanswered_tool_call), as does a tool message answering no open call (bad_messages)."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for raw in messages:
        if not isinstance(raw, dict):
            raise BadMessages(BAD_MESSAGES, f"a message is {type(raw).__name__}, not an object")
        message = normalize_message(raw, default_role="user")
        role = _role(message)
        text = message.get("content") or ""
        if role == "tool":
            call_id = message.get("tool_call_id") or (pending[0] if pending else None)
            if call_id is None or call_id not in pending:
                raise BadMessages(BAD_MESSAGES, f"a tool message answers no open tool call ({call_id!r})")
            pending.remove(call_id)
            out.append({"role": "tool", "tool_call_id": str(call_id), "content": text})
            continue
        if pending:
            raise BadMessages(UNANSWERED_TOOL_CALL, f"tool call(s) {pending} answered by no tool message")
        if role == "assistant":
            calls = [_tool_call(c, f"call_{len(out)}_{i}") for i, c in enumerate(message.get("tool_calls") or [])]
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
                pending = [call["id"] for call in calls]
            elif not text:
                continue  # an empty assistant turn says nothing to learn from
            out.append(entry)
        else:
            out.append({"role": role, "content": text})
    return out, pending


def _json_list(text: str | None) -> list | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else ([value] if isinstance(value, dict) and "role" in value else None)


def _source_messages(trace: dict[str, Any]) -> list[dict[str, Any]]:
    conversation = _json_list(trace.get("conversation"))
    if is_message_list(conversation):
        return conversation
    inputs = _json_list(trace.get("input_messages"))
    outputs = _json_list(trace.get("output_messages"))
    messages = inputs if is_message_list(inputs) else []
    if not messages and trace.get("input"):
        messages = [{"role": "user", "content": trace["input"]}]
    if is_message_list(outputs):
        messages = [*messages, *outputs]
    return messages


def _tools(trace: dict[str, Any]) -> list | None:
    """The trace's declared tools (`metadata.tools`), or None; `BadMessages` (bad_tools) when they are not OpenAI
    function tools with valid names (a training line must not declare a tool the API refuses)."""
    try:
        metadata = json.loads(trace.get("metadata") or "{}")
    except ValueError:
        return None
    tools = metadata.get("tools") if isinstance(metadata, dict) else None
    if tools is None or tools == []:
        return None
    if not isinstance(tools, list):
        raise BadMessages(BAD_TOOLS, "metadata.tools is not a list")
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function":
            raise BadMessages(BAD_TOOLS, f"a tool is not {{type: function, function: {{...}}}}: {str(tool)[:80]}")
        if not function_name_ok(function.get("name")):
            raise BadMessages(BAD_TOOLS, f"tool name {function.get('name')!r} is not ^[a-zA-Z0-9_-]{{1,64}}$")
    return tools


def example(trace: dict[str, Any], system_prompt: str | None = None) -> dict[str, Any]:
    """One trace as a fine-tuning example; `BadMessages` (with its reason) or `NoFinalAnswer` otherwise.

    The trace's `output` is appended as the final answer only where the transcript stops before it (on the user's
    or a tool's message); a transcript that ends on the assistant's tool call has no final answer, whatever its
    `output` text says (for such a trace it is the rendering of the call, never an answer)."""
    messages, pending = openai_messages(_source_messages(trace))
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
        raise NoFinalAnswer("the agent stopped on a tool call: there is no final answer to learn from")
    if pending:
        raise BadMessages(UNANSWERED_TOOL_CALL, f"tool call(s) {pending} answered by no tool message")
    output = trace.get("output")
    if output and (last is None or last["role"] != "assistant"):
        messages.append({"role": "assistant", "content": output})
    last = messages[-1] if messages else None
    if last is None or last["role"] != "assistant" or not (last.get("content") or "").strip():
        raise NoFinalAnswer("the conversation does not end with the assistant's final answer")
    if not any(m["role"] == "user" for m in messages):
        raise BadMessages(BAD_MESSAGES, "the conversation has no user message")
    if system_prompt is not None and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": system_prompt})
    line: dict[str, Any] = {"messages": messages}
    tools = _tools(trace)
    if tools is not None:
        line["tools"] = tools
    return line


def export_day(export: FinetuneExport, traces: pl.DataFrame, scores: pl.DataFrame) -> ExportDay:
    """The export's JSONL lines for one day of traces and their judge_scores rows, with the counts."""
    result = ExportDay(considered=traces.height)
    reasons = exclusion_reasons(export, traces, scores)
    order = traces.with_columns(reasons.alias("_reason")).sort("timestamp", "trace_id", nulls_last=True)
    for trace in order.iter_rows(named=True):
        reason = trace["_reason"]
        # A judge skips a trace with no final answer (no_final_answer): the trace's own reason is the one to report.
        if reason is not None and reason.startswith("skipped:"):
            try:
                example(trace, export.system_prompt)
            except NoFinalAnswer:
                reason = NO_FINAL_ANSWER
            except BadMessages:
                pass
        if reason is None:
            try:
                line = example(trace, export.system_prompt)
            except NoFinalAnswer:
                reason = NO_FINAL_ANSWER
            except BadMessages as exc:
                reason = exc.reason
            else:
                result.lines.append(json.dumps(line, ensure_ascii=False))
                result.trace_ids.append(trace["trace_id"])
                continue
        result.excluded[reason] = result.excluded.get(reason, 0) + 1
    result.excluded = dict(sorted(result.excluded.items()))
    return result
