"""OpenInference (Arize Phoenix's conventions; `openinference-instrumentation-openai` and friends).

- `openinference.span.kind`: LLM, EMBEDDING, TOOL, AGENT, CHAIN, RETRIEVER, RERANKER, GUARDRAIL, EVALUATOR ->
  operation: chat, embeddings, execute_tool, invoke_agent, chain, retrieval, retrieval, guardrail, other
- `llm.input_messages.N.message.{role,content,name,tool_call_id}`, `.message.contents.K.message_content.text`,
  `.message.tool_calls.M.tool_call.{id,function.name,function.arguments}` -> input messages
- `llm.output_messages.N.message.*` (same keys) -> output messages
- `input.value` / `output.value` -> input / output text; tool arguments / result on TOOL spans
- `tool.name`, `tool_call.id` (also `tool.id`) -> tool name, tool call id
- `retrieval.documents.N.document.content` -> documents
- `llm.model_name` (else `llm.response.model_name`, `llm.request.model_name`, `embedding.model_name`, the
  `model` of `llm.invocation_parameters`: the requested model, all a failed call has) -> model
- `llm.token_count.prompt` / `.completion` -> tokens
- `llm.cost.total` -> cost_usd
- `session.id`, `user.id` -> session_id, user_id
"""

from __future__ import annotations

from eval_platform.ingest.messages import maybe_json
from eval_platform.ingest.otel.envelope import Span
from eval_platform.ingest.otel.fields import Reading, SpanFields, integer, label, number
from eval_platform.ingest.otel.openllmetry import call_text
from eval_platform.ingest.otel.transcript import as_text, indexed, indexed_messages

NAME = "openinference"
KIND = "openinference.span.kind"
_KINDS = {
    "LLM": "chat",
    "EMBEDDING": "embeddings",
    "TOOL": "execute_tool",
    "AGENT": "invoke_agent",
    "CHAIN": "chain",
    "RETRIEVER": "retrieval",
    "RERANKER": "retrieval",
    "GUARDRAIL": "guardrail",
    "EVALUATOR": "other",
    "UNKNOWN": "other",
}


def matches(span: Span) -> bool:
    return KIND in span.attrs or any(
        key.startswith(("llm.input_messages.", "llm.output_messages.")) for key in span.attrs
    )


_MODELS = ("llm.model_name", "llm.response.model_name", "llm.request.model_name", "embedding.model_name")
# Values read from more than one attribute, added to the attributes `SpanFields.fill` reads under keys no span has.
_PARAMETERS_MODEL = "\x00model of llm.invocation_parameters"
_TOOL_CALL_ID = "\x00tool_call.id or tool.id"
_READINGS: tuple[Reading, ...] = (
    ("model", label, (*_MODELS, _PARAMETERS_MODEL)),
    ("prompt_tokens", integer, ("llm.token_count.prompt",)),
    ("completion_tokens", integer, ("llm.token_count.completion",)),
    ("cost_usd", number, ("llm.cost.total",)),
    ("session_id", label, ("session.id",)),
    ("user_id", label, ("user.id",)),
)
_TOOL_READINGS: tuple[Reading, ...] = (
    ("tool_name", label, ("tool.name",)),
    ("tool_call_id", label, (_TOOL_CALL_ID,)),
)


def read(span: Span, fields: SpanFields) -> None:
    attrs = span.attrs
    kind = attrs.get(KIND)
    fields.put_all(
        {
            "operation": _KINDS.get(kind.upper(), "other") if isinstance(kind, str) else None,
            "input_messages": indexed_messages(attrs, "llm.input_messages.", "user"),
            "output_messages": indexed_messages(attrs, "llm.output_messages.", "assistant"),
        }
    )
    if fields.operation is None and fields.input_messages:
        fields.operation = "chat"
    tool = fields.operation == "execute_tool"
    documents = indexed(attrs, "retrieval.documents.")
    texts = [as_text(doc.get("document.content")) for doc in documents.values()] if documents else None
    input_value, output_value = attrs.get("input.value"), attrs.get("output.value")
    parameters = attrs.get("llm.invocation_parameters")
    parameters = maybe_json(parameters) if isinstance(parameters, str) else parameters
    attrs = {**attrs, _PARAMETERS_MODEL: parameters.get("model") if isinstance(parameters, dict) else None}
    if tool:
        attrs[_TOOL_CALL_ID] = attrs.get("tool_call.id") or attrs.get("tool.id")
    fields.fill(attrs, (*_READINGS, *_TOOL_READINGS) if tool else _READINGS)
    fields.put_all(
        {
            "tool_arguments": call_text(input_value),
            "tool_result": as_text(output_value),
            "documents": texts and [text for text in texts if text is not None],
        }
        if tool
        else {
            "input_value": as_text(input_value),
            "output_value": as_text(output_value),
            "documents": texts and [text for text in texts if text is not None],
        }
    )
