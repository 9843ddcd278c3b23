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
from eval_platform.ingest.otel.fields import SpanFields, integer, label, number
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


def read(span: Span, fields: SpanFields) -> None:
    attrs = span.attrs
    kind = attrs.get(KIND)
    fields.put("operation", _KINDS.get(kind.upper(), "other") if isinstance(kind, str) else None)
    fields.put("input_messages", indexed_messages(attrs, "llm.input_messages.", "user"))
    fields.put("output_messages", indexed_messages(attrs, "llm.output_messages.", "assistant"))
    if fields.operation is None and fields.input_messages:
        fields.put("operation", "chat")
    for key in ("llm.model_name", "llm.response.model_name", "llm.request.model_name", "embedding.model_name"):
        fields.put("model", label(attrs.get(key)))
    parameters = attrs.get("llm.invocation_parameters")
    parameters = maybe_json(parameters) if isinstance(parameters, str) else parameters
    if isinstance(parameters, dict):
        fields.put("model", label(parameters.get("model")))
    fields.put("prompt_tokens", integer(attrs.get("llm.token_count.prompt")))
    fields.put("completion_tokens", integer(attrs.get("llm.token_count.completion")))
    fields.put("cost_usd", number(attrs.get("llm.cost.total")))
    if fields.operation == "execute_tool":
        fields.put("tool_name", label(attrs.get("tool.name")))
        fields.put("tool_call_id", label(attrs.get("tool_call.id") or attrs.get("tool.id")))
        fields.put("tool_arguments", call_text(attrs.get("input.value")))
        fields.put("tool_result", as_text(attrs.get("output.value")))
    else:
        fields.put("input_value", as_text(attrs.get("input.value")))
        fields.put("output_value", as_text(attrs.get("output.value")))
    documents = indexed(attrs, "retrieval.documents.")
    if documents:
        texts = [as_text(doc.get("document.content")) for doc in documents.values()]
        fields.put("documents", [text for text in texts if text is not None])
    fields.put("session_id", label(attrs.get("session.id")))
    fields.put("user_id", label(attrs.get("user.id")))
