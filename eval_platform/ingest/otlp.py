"""OTLP/JSON trace exports with OpenTelemetry GenAI spans -> canonical trace records.

Input: an `ExportTraceServiceRequest` in OTLP/JSON (`{"resourceSpans": [{"resource": {...}, "scopeSpans":
[{"spans": [...]}]}]}`): ids are hex strings, times are `startTimeUnixNano`/`endTimeUnixNano` (integers or
decimal strings), attribute values are `{stringValue|intValue|doubleValue|boolValue|bytesValue|arrayValue|
kvlistValue}`. A `.json` file holding such an object, a JSON array of them, or a `.jsonl` file with one per
line (the collector's file exporter) are all read.

Spans are grouped by `traceId`; each group becomes one canonical trace (one candidate row). A *GenAI span* is
a span with at least one `gen_ai.*` attribute; the trace's *root GenAI span* is the GenAI span with no GenAI
ancestor (if several, e.g. a retrieval span and a chat span under one HTTP span, the earliest one that is not
a retrieval, tool or embeddings span).

Each canonical field, and where it comes from:

- `trace_id`: attribute `eval.trace_id` (the application's own id for the trace) if set, else `traceId`
  (lower-cased hex)
- `timestamp`, `latency_ms`: root GenAI span start; its end minus start
- `input` / `output`: root's `gen_ai.input.messages` / `gen_ai.output.messages` (JSON strings or structured
  values; `gen_ai.system_instructions` become a leading system message). If the root has none (e.g. an
  `invoke_agent` span without content), the first / last GenAI span below it that has them. Deprecated
  `gen_ai.prompt` / `gen_ai.completion` are read as plain text
- `model`: root's `gen_ai.response.model`, else `gen_ai.request.model`, else the first model below the root
- `prompt_tokens` / `completion_tokens`: root's `gen_ai.usage.input_tokens` / `output_tokens`, else the sum
  over the inference spans below it
- `context`: documents of every retrieval span (`gen_ai.operation.name` = `retrieval`, or any span with
  `gen_ai.retrieval.documents`), in start order; a document's text is its `content` / `text` / `page_content`
  field, else the document as JSON
- `spans`: every GenAI span: `{span_id, parent_span_id, name, operation, model, input, output, context,
  latency_ms, prompt_tokens, completion_tokens}`, in start order. For `execute_tool` spans input/output are
  the tool call's arguments/result; for retrieval spans the input is `gen_ai.retrieval.query.text`
- `project_id`: `eval.project_id`, else the resource's `service.name`
- `experiment_id`, `variant`, `expected_output`, `cost_usd`: attributes `eval.experiment_id`, `eval.variant`,
  `eval.expected_output`, `app.cost_usd`
- `metadata`: `eval.metadata` (a JSON object string) plus one key per `eval.metadata.<key>` attribute;
  `gen_ai.conversation.id` is added as `conversation_id`

The trace-level attributes without a GenAI convention (`eval.*`, `app.cost_usd`) are looked up on the root
span, then on its resource, then on the other spans of the trace in start order (`app.cost_usd` not found on
the root or resource is summed over the spans that carry it).

Invalid OTLP becomes quarantine rows with reason `invalid_otlp:<what>`: `resourceSpans`, `scopeSpans`,
`spans`, `span` (not an object), `traceId`, `spanId`, `parentSpanId`, `startTimeUnixNano`, `endTimeUnixNano`,
`attributes`. A span without a usable `traceId` is a row of its own; any other broken span rejects its whole
trace (never a silently partial one). A trace with no GenAI span is rejected as `no_genai_span`. The row's
line is the 1-based position of the trace's root span among all spans of the document (or the JSONL line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from eval_platform.ingest.common import Candidate, RowError, dumps, preview
from eval_platform.ingest.messages import document_text, maybe_json
from eval_platform.ingest.otlp_values import decode_attributes
from eval_platform.ingest.records import EPOCH, text_and_messages

GENAI_PREFIX = "gen_ai."
INFERENCE_OPERATIONS = {"chat", "text_completion", "generate_content"}
RETRIEVAL_OPERATIONS = {"retrieval"}
AUXILIARY_OPERATIONS = {"retrieval", "execute_tool", "embeddings"}  # never preferred as the root
ATTR_TRACE_ID = "eval.trace_id"
ATTR_PROJECT = "eval.project_id"
ATTR_EXPERIMENT = "eval.experiment_id"
ATTR_VARIANT = "eval.variant"
ATTR_EXPECTED = "eval.expected_output"
ATTR_METADATA = "eval.metadata"
ATTR_COST = "app.cost_usd"
_HEX = re.compile(r"^[0-9a-fA-F]+$")


def is_otlp_document(value: Any) -> bool:
    return isinstance(value, dict) and "resourceSpans" in value


# --- spans --------------------------------------------------------------------------------------------


@dataclass
class Span:
    position: int
    trace_id: str
    raw: dict[str, Any]
    resource: dict[str, Any]
    span_id: str | None = None
    parent_span_id: str | None = None
    name: str = ""
    start_ns: int | None = None
    end_ns: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    errors: list[RowError] = field(default_factory=list)

    @property
    def is_genai(self) -> bool:
        return any(key.startswith(GENAI_PREFIX) for key in self.attrs)

    @property
    def operation(self) -> str | None:
        value = self.attrs.get("gen_ai.operation.name")
        return value if isinstance(value, str) else None

    @property
    def is_retrieval(self) -> bool:
        return self.operation in RETRIEVAL_OPERATIONS or "gen_ai.retrieval.documents" in self.attrs

    @property
    def model(self) -> str | None:
        value = self.attrs.get("gen_ai.response.model") or self.attrs.get("gen_ai.request.model")
        return value if isinstance(value, str) else None

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.start_ns or 0, self.position)


def _hex_id(value: Any, length: int) -> str | None:
    if isinstance(value, str) and len(value) == length and _HEX.match(value):
        return value.lower()
    return None


def _nanos(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _parse_span(span: dict[str, Any], trace_id: str, position: int, resource: dict[str, Any]) -> Span:
    parsed = Span(position=position, trace_id=trace_id, raw=span, resource=resource)
    where = f"span #{position}"
    parsed.span_id = _hex_id(span.get("spanId"), 16)
    if parsed.span_id is None:
        parsed.errors.append(
            RowError("invalid_otlp:spanId", f"{where} has spanId {preview(span.get('spanId'))}, not 16 hex digits")
        )
    where = f"span {parsed.span_id or '#' + str(position)}"
    parent = span.get("parentSpanId")
    if parent not in (None, ""):
        parsed.parent_span_id = _hex_id(parent, 16)
        if parsed.parent_span_id is None:
            parsed.errors.append(
                RowError("invalid_otlp:parentSpanId", f"{where} has parentSpanId {preview(parent)}, not 16 hex digits")
            )
    name = span.get("name", "")
    parsed.name = name if isinstance(name, str) else str(name)
    parsed.start_ns = _nanos(span.get("startTimeUnixNano"))
    if not parsed.start_ns:
        parsed.errors.append(
            RowError(
                "invalid_otlp:startTimeUnixNano",
                f"{where} has startTimeUnixNano {preview(span.get('startTimeUnixNano'))}, not a positive integer",
            )
        )
    end = span.get("endTimeUnixNano")
    if end not in (None, "", 0, "0"):
        parsed.end_ns = _nanos(end)
        if parsed.end_ns is None or (parsed.start_ns and parsed.end_ns < parsed.start_ns):
            parsed.errors.append(
                RowError(
                    "invalid_otlp:endTimeUnixNano",
                    f"{where} has endTimeUnixNano {preview(end)}, not an integer at or after its start",
                )
            )
            parsed.end_ns = None
    try:
        parsed.attrs = decode_attributes(span.get("attributes"), where)
    except RowError as error:
        parsed.errors.append(error)
    return parsed


def _walk(document: dict[str, Any], line: int | None) -> tuple[list[Span], list[Candidate]]:
    """Every span of the document (with its resource attributes) plus rows for envelope-level errors."""
    spans: list[Span] = []
    errors: list[Candidate] = []
    position = 0

    def fail(raw: Any, reason: str, message: str) -> None:
        errors.append(Candidate(line=line, raw=dumps(raw), error=RowError(reason, message)))

    resource_spans = document.get("resourceSpans")
    if not isinstance(resource_spans, list):
        fail(document, "invalid_otlp:resourceSpans", f"'resourceSpans' is {preview(resource_spans)}, not a list")
        return spans, errors
    for rs_index, rs in enumerate(resource_spans):
        where = f"resourceSpans[{rs_index}]"
        if not isinstance(rs, dict):
            fail(rs, "invalid_otlp:resourceSpans", f"{where} is not an object")
            continue
        try:
            resource = decode_attributes((rs.get("resource") or {}).get("attributes"), f"{where}.resource")
        except (RowError, AttributeError) as error:
            fail(rs, "invalid_otlp:attributes", getattr(error, "message", f"{where}.resource is not an object"))
            continue
        scope_spans = rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", []))
        if not isinstance(scope_spans, list):
            fail(rs, "invalid_otlp:scopeSpans", f"{where}.scopeSpans is not a list")
            continue
        for ss_index, ss in enumerate(scope_spans):
            ss_where = f"{where}.scopeSpans[{ss_index}]"
            raw_spans = ss.get("spans", []) if isinstance(ss, dict) else None
            if not isinstance(raw_spans, list):
                fail(
                    ss,
                    "invalid_otlp:spans" if isinstance(ss, dict) else "invalid_otlp:scopeSpans",
                    f"{ss_where} has no list of spans",
                )
                continue
            for span in raw_spans:
                position += 1
                if not isinstance(span, dict):
                    errors.append(
                        Candidate(
                            line=line or position,
                            raw=dumps(span),
                            error=RowError("invalid_otlp:span", f"span #{position} is not an object"),
                        )
                    )
                    continue
                trace_id = _hex_id(span.get("traceId"), 32)
                if trace_id is None:
                    errors.append(
                        Candidate(
                            line=line or position,
                            raw=dumps(span),
                            error=RowError(
                                "invalid_otlp:traceId",
                                f"span #{position} has traceId {preview(span.get('traceId'))}, not 32 hex digits",
                            ),
                        )
                    )
                    continue
                spans.append(_parse_span(span, trace_id, position, resource))
    return spans, errors


# --- one trace ----------------------------------------------------------------------------------------


def _messages_value(value: Any) -> Any:
    """A messages attribute: a JSON string is decoded; text that is not JSON stays text."""
    return maybe_json(value) if isinstance(value, str) else value


def _span_input(span: Span) -> Any:
    attrs = span.attrs
    if span.operation == "execute_tool":
        return _as_text(attrs.get("gen_ai.tool.call.arguments"))
    if span.is_retrieval:
        return attrs.get("gen_ai.retrieval.query.text")
    messages = _messages_value(attrs.get("gen_ai.input.messages", attrs.get("gen_ai.prompt")))
    instructions = _messages_value(attrs.get("gen_ai.system_instructions"))
    if instructions in (None, "", []):
        return messages
    parts = (
        instructions if isinstance(instructions, list) else [{"type": "text", "content": document_text(instructions)}]
    )
    if messages is None:
        messages = []
    elif not isinstance(messages, list):
        messages = [{"role": "user", "parts": [{"type": "text", "content": _as_text(messages)}]}]
    return [{"role": "system", "parts": parts}, *messages]


def _span_output(span: Span) -> Any:
    if span.operation == "execute_tool":
        return _as_text(span.attrs.get("gen_ai.tool.call.result"))
    return _messages_value(span.attrs.get("gen_ai.output.messages", span.attrs.get("gen_ai.completion")))


def _span_context(span: Span) -> list[str] | None:
    if not span.is_retrieval:
        return None
    documents = _messages_value(span.attrs.get("gen_ai.retrieval.documents"))
    if documents is None:
        return []
    if not isinstance(documents, list):
        documents = [documents]
    return [document_text(document) for document in documents if document is not None]


def _as_text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else dumps(value)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _span_summary(span: Span) -> dict[str, Any]:
    input_text, _ = text_and_messages(_span_input(span), "user")
    output_text, _ = text_and_messages(_span_output(span), "assistant")
    latency = (span.end_ns - span.start_ns) / 1e6 if span.end_ns and span.start_ns else None
    return {
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "operation": span.operation,
        "model": span.model,
        "input": input_text,
        "output": output_text,
        "context": _span_context(span),
        "latency_ms": latency,
        "prompt_tokens": _int_or_none(span.attrs.get("gen_ai.usage.input_tokens")),
        "completion_tokens": _int_or_none(span.attrs.get("gen_ai.usage.output_tokens")),
    }


def _sum_usage(spans: list[Span], key: str) -> Any:
    values = [span.attrs[key] for span in spans if span.attrs.get(key) is not None]
    if not values:
        return None
    if all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        return sum(values)
    return next(value for value in values if not isinstance(value, int) or isinstance(value, bool))


def _trace_record(spans: list[Span]) -> tuple[dict[str, Any], Span]:
    by_id = {span.span_id: span for span in spans}
    genai = sorted((span for span in spans if span.is_genai), key=lambda span: span.sort_key)
    trace_id = spans[0].trace_id
    if not genai:
        raise RowError("no_genai_span", f"trace {trace_id} has {len(spans)} span(s), none with gen_ai.* attributes")

    def ancestors(span: Span) -> list[Span]:
        chain, seen, current = [], {span.span_id}, span
        while current.parent_span_id in by_id and current.parent_span_id not in seen:
            current = by_id[current.parent_span_id]
            seen.add(current.span_id)
            chain.append(current)
        return chain

    roots = [span for span in genai if not any(parent.is_genai for parent in ancestors(span))]
    root = next(
        (span for span in roots if span.operation not in AUXILIARY_OPERATIONS and not span.is_retrieval), roots[0]
    )
    below = [span for span in genai if span is not root and root in ancestors(span)]
    talkers = [span for span in below if not span.is_retrieval and span.operation != "execute_tool"]

    record_input = _span_input(root)
    if record_input is None:
        record_input = next((value for value in map(_span_input, talkers) if value is not None), None)
    record_output = _span_output(root)
    if record_output is None:
        record_output = next((value for value in map(_span_output, reversed(talkers)) if value is not None), None)
    model = root.model or next((span.model for span in talkers if span.model), None)
    inference = [span for span in below if span.operation in INFERENCE_OPERATIONS]
    usage = {}
    for canonical, key in (
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("completion_tokens", "gen_ai.usage.output_tokens"),
    ):
        usage[canonical] = root.attrs[key] if root.attrs.get(key) is not None else _sum_usage(inference, key)

    others = sorted((span for span in spans if span is not root), key=lambda span: span.sort_key)
    scopes = [root.attrs, root.resource] + [span.attrs for span in others]

    def lookup(key: str) -> Any:
        return next((scope[key] for scope in scopes if scope.get(key) is not None), None)

    cost = root.attrs.get(ATTR_COST, root.resource.get(ATTR_COST))
    if cost is None:
        costs = [span.attrs[ATTR_COST] for span in others if span.attrs.get(ATTR_COST) is not None]
        numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in costs)
        cost = (sum(costs) if numeric else next(c for c in costs if not isinstance(c, (int, float)))) if costs else None

    metadata: Any = lookup(ATTR_METADATA)
    metadata = maybe_json(metadata) if isinstance(metadata, str) else metadata
    if metadata is None or isinstance(metadata, dict):
        merged = dict(metadata or {})
        prefix = ATTR_METADATA + "."
        for scope in reversed(scopes):  # the root's own attributes are applied last and win
            merged.update({key[len(prefix) :]: value for key, value in scope.items() if key.startswith(prefix)})
        conversation = lookup("gen_ai.conversation.id")
        if conversation is not None:
            merged.setdefault("conversation_id", conversation)
        metadata = merged

    contexts = [span for span in genai if span.is_retrieval]
    latency = (root.end_ns - root.start_ns) / 1e6 if root.end_ns and root.start_ns else None
    record = {
        "trace_id": lookup(ATTR_TRACE_ID) or trace_id,
        "timestamp": datetime_from_nanos(root.start_ns or 0),
        "input": record_input,
        "output": record_output,
        "context": [text for span in contexts for text in (_span_context(span) or [])] if contexts else None,
        "expected_output": lookup(ATTR_EXPECTED),
        "metadata": metadata,
        "project_id": lookup(ATTR_PROJECT) or root.resource.get("service.name"),
        "model": model,
        "experiment_id": lookup(ATTR_EXPERIMENT),
        "variant": lookup(ATTR_VARIANT),
        "latency_ms": latency,
        "cost_usd": cost,
        "spans": [_span_summary(span) for span in genai],
        **usage,
    }
    return record, root


def otlp_candidates(document: dict[str, Any], line: int | None = None) -> list[Candidate]:
    """One candidate per trace (and per envelope-level error) of an OTLP/JSON export.

    `line` (a JSONL line number) replaces the span positions as the rows' line numbers.
    """
    spans, candidates = _walk(document, line)
    unit = "line" if line is not None else "span"
    groups: dict[str, list[Span]] = {}
    for span in spans:
        groups.setdefault(span.trace_id, []).append(span)
    for trace_id, group in groups.items():
        raw = dumps([span.raw for span in group])
        errors = [error for span in group for error in span.errors]
        first_line = line or min(span.position for span in group)
        if errors:
            message = f"trace {trace_id}: " + "; ".join(error.message for error in errors)
            candidates.append(Candidate(line=first_line, raw=raw, error=RowError(errors[0].reason, message)))
            continue
        try:
            record, root = _trace_record(group)
        except RowError as error:
            candidates.append(Candidate(line=first_line, raw=raw, error=error))
            continue
        candidates.append(Candidate(line=line or root.position, raw=raw, record=record))
    for candidate in candidates:
        candidate.unit = unit
    return sorted(candidates, key=lambda candidate: candidate.line or 0)


def datetime_from_nanos(nanos: int) -> datetime:
    return EPOCH + timedelta(microseconds=nanos // 1000)
