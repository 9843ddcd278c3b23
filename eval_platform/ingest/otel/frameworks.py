"""What agent frameworks write beyond their convention, read after the conventions (`conventions.read_span`).

Recorded in eval_platform_tests/fixtures/otel/<framework> (`sample_data/agent_app/frameworks.py`):

- **OpenAI Agents SDK** (`openinference-instrumentation-openai-agents`): a handoff is a TOOL span named
  `handoff to <agent>` (`input.value` the agent handing off, `output.value` the agent taking over) -> operation
  `handoff`, never `execute_tool`: the trajectory holds it as an entry of kind `handoff`, not a tool call (its
  name the model's handoff call, `transfer_to_<agent>`, when the conversation holds it).
- **smolagents** (`openinference-instrumentation-smolagents`): tool spans' `input.value` is the call
  `{"args", "kwargs", "sanitize_inputs_outputs"}` (read as the arguments, `openllmetry.call_text`); the
  `final_answer` tool is the run's answer -> operation `final_answer` (not a tool call; its result the trace's
  output). Messages: `tool-call` / `tool-response` roles, the task wrapped as `New task:\n<question>`, results
  as `Observation:\n<text>` (`transcript.py` reads them).
- **pydantic-ai** (its own GenAI spans): the agent run span (`invoke_agent <name>`) holds the run's messages as
  `pydantic_ai.all_messages` (GenAI message JSON) beside `gen_ai.system_instructions`: they are its input messages,
  so a run whose model call failed (no message recorded on that call's span) keeps its question.
- **LangGraph** (`openinference-instrumentation-langchain`): a tool span's `output.value` is LangChain's
  serialized `ToolMessage` (`{"type": "tool", "data": {"content", "tool_call_id", ...}}`) -> its content is the
  result, its `tool_call_id` the call; `input.value` is the bare argument when the tool takes one (the call's
  JSON arguments are then taken from the conversation by that id, `model.py`).
"""

from __future__ import annotations

from typing import Any

from eval_platform.ingest.messages import maybe_json
from eval_platform.ingest.otel.envelope import Span
from eval_platform.ingest.otel.fields import SpanFields, label
from eval_platform.ingest.otel.transcript import as_text, normalize_messages

HANDOFF_PREFIX = "handoff to "
PYDANTIC_AI_MESSAGES = "pydantic_ai.all_messages"
FINAL_ANSWER_TOOL = "final_answer"


def _langchain_message(value: Any) -> dict[str, Any] | None:
    """LangChain's serialized message (`{"type": ..., "data": {...}}`) as its data, or None."""
    decoded = maybe_json(value) if isinstance(value, str) else value
    if isinstance(decoded, dict) and isinstance(decoded.get("data"), dict) and decoded.get("type") in ("tool",):
        return decoded["data"]
    return None


def refine(span: Span, fields: SpanFields) -> None:
    """Set what the span's framework means beyond its convention (module docstring)."""
    if fields.operation == "invoke_agent" and span.attrs.get(PYDANTIC_AI_MESSAGES) is not None:
        messages = normalize_messages(span.attrs[PYDANTIC_AI_MESSAGES], "user") or []
        system = [m for m in fields.input_messages or [] if m.get("role") == "system"]
        if any(m.get("role") != "system" for m in messages):
            fields.input_messages = [*system, *messages]
    if fields.operation != "execute_tool":
        return
    if span.name.startswith(HANDOFF_PREFIX) and fields.tool_name is None:
        fields.operation = "handoff"
        fields.tool_name = label(span.attrs.get("output.value")) or span.name.removeprefix(HANDOFF_PREFIX)
        return
    if fields.tool_name == FINAL_ANSWER_TOOL:
        fields.operation = "final_answer"
        return
    message = _langchain_message(fields.tool_result)
    if message is not None:
        fields.tool_result = as_text(message.get("content"))
        fields.tool_call_id = fields.tool_call_id or label(message.get("tool_call_id"))
        if message.get("status") == "error" and fields.error_type is None:
            fields.error_type = "tool_error"
