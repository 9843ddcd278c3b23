"""Which of a day's traces pass an export's thresholds, and their conversations in OpenAI's fine-tuning format.

One JSONL line per passing trace: `{"messages": [...]}` with roles system / user / assistant / tool, assistant
messages carrying `tool_calls` (`{id, type: function, function: {name, arguments: <JSON text>}}`) and tool
messages their `tool_call_id`, plus `"tools": [...]` when the trace declared its tool definitions
(`metadata.tools`, a list of OpenAI tool objects). The last message is always the assistant's final answer.

Where a trace's messages come from, first found: `conversation` (the transcript with tool calls, traces table),
then `input_messages` + `output_messages`, then `input` + `output` as one user and one assistant message. When
the transcript does not end with the final answer but the trace has an `output`, the answer is appended.

A trace is left out, counted under the first reason met, in this order:
`partial_trace` (its spans did not all arrive), `app_error` (its run failed; unless include_failed_runs),
then per declared evaluator in order: `not_scored:<ev>` (no final row of that evaluator for the trace that day),
`failed:<ev>` / `skipped:<ev>` (a final row FAILED / SKIPPED: never passes), `below_threshold:<ev>`,
and then `no_final_answer` (no assistant text at the end: e.g. an agent that stopped on a tool call) or
`bad_messages` (a role OpenAI's format has no place for, a tool message answering no call).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from eval_platform.finetune.config import FinetuneExport, Threshold
from eval_platform.ingest.messages import content_text, is_message_list
from eval_platform.schemas import APP_ERROR, COMPLETED, FAILED, PARTIAL_TRACE, SKIPPED

ROLES = ("system", "user", "assistant", "tool")
_ROLE_ALIASES = {"developer": "system", "human": "user", "ai": "assistant", "model": "assistant", "function": "tool"}
NO_FINAL_ANSWER, BAD_MESSAGES = "no_final_answer", "bad_messages"


class BadMessages(ValueError):
    """The trace's messages cannot be written in the fine-tuning format (the message says which and why)."""


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
    reasons = [
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
    role = _ROLE_ALIASES.get(role, role)
    if role not in ROLES:
        raise BadMessages(f"role {message.get('role')!r} has no place in the fine-tuning format")
    return role


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps({} if arguments is None else arguments, ensure_ascii=False)


def _tool_call(call: Any, fallback_id: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise BadMessages(f"a tool call is {type(call).__name__}, not an object")
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    name = function.get("name")
    if not name:
        raise BadMessages("a tool call has no name")
    return {
        "id": str(call.get("id") or fallback_id),
        "type": "function",
        "function": {"name": str(name), "arguments": _arguments(function.get("arguments"))},
    }


def openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages (the traces table's conversation shape, OpenAI's, or OTel's `parts`) in the fine-tuning format.

    Tool calls without an id get `call_<n>`; a tool message without `tool_call_id` answers the oldest call not
    yet answered. A tool message answering no call raises `BadMessages`."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            raise BadMessages(f"a message is {type(message).__name__}, not an object")
        role = _role(message)
        content = message.get("content") if "content" in message else message.get("parts")
        text = content_text(content)
        if role == "assistant":
            calls = [_tool_call(c, f"call_{len(out)}_{i}") for i, c in enumerate(message.get("tool_calls") or [])]
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
                pending.extend(call["id"] for call in calls)
            elif not text:
                continue  # an empty assistant turn says nothing to learn from
            out.append(entry)
        elif role == "tool":
            call_id = message.get("tool_call_id") or (pending[0] if pending else None)
            if call_id is None or call_id not in pending:
                raise BadMessages(f"a tool message answers no tool call of the conversation ({call_id!r})")
            pending.remove(call_id)
            out.append({"role": "tool", "tool_call_id": str(call_id), "content": text})
        else:
            out.append({"role": role, "content": text if role == "user" else text or ""})
    return out


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
    try:
        metadata = json.loads(trace.get("metadata") or "{}")
    except ValueError:
        return None
    tools = metadata.get("tools") if isinstance(metadata, dict) else None
    return tools if isinstance(tools, list) and tools and all(isinstance(t, dict) for t in tools) else None


def example(trace: dict[str, Any], system_prompt: str | None = None) -> dict[str, Any]:
    """One trace as a fine-tuning example; `BadMessages` (reason bad_messages) or `NoFinalAnswer` otherwise."""
    messages = openai_messages(_source_messages(trace))
    output = trace.get("output")
    last = messages[-1] if messages else None
    if output and (last is None or last["role"] != "assistant" or last.get("tool_calls")):
        messages.append({"role": "assistant", "content": output})
    last = messages[-1] if messages else None
    if last is None or last["role"] != "assistant" or last.get("tool_calls") or not last.get("content"):
        raise NoFinalAnswer("the conversation does not end with the assistant's final answer")
    if not any(m["role"] == "user" for m in messages):
        raise BadMessages("the conversation has no user message")
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
        if reason is None:
            try:
                line = example(trace, export.system_prompt)
            except NoFinalAnswer:
                reason = NO_FINAL_ANSWER
            except BadMessages:
                reason = BAD_MESSAGES
            else:
                result.lines.append(json.dumps(line, ensure_ascii=False))
                result.trace_ids.append(trace["trace_id"])
                continue
        result.excluded[reason] = result.excluded.get(reason, 0) + 1
    result.excluded = dict(sorted(result.excluded.items()))
    return result
