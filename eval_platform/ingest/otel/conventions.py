"""The conventions an OTLP span is read with, in order of precedence (the only list of them).

Every span is offered every convention its trace carries (`read_spans`): a file, a trace, even one span may mix
them. The first convention that matches names the span's `convention`; each matching one fills the fields still
empty (see `fields.py`).
Then the OTel core fields every convention shares: `session.id` / `user.id`; a span with status ERROR (or an
`error.type` attribute, or a
Langfuse level ERROR) is an error; its type is `error.type`, else the `exception` event's `exception.type`,
else `error`; its message the status message, else the exception's message. Last, what agent frameworks write
beyond their convention (`frameworks.py`: handoffs, final-answer tools, LangChain's serialized tool messages).
"""

from __future__ import annotations

from eval_platform.ingest.otel import frameworks, genai, langfuse, openinference, openllmetry
from eval_platform.ingest.otel.envelope import Span
from eval_platform.ingest.otel.fields import Reading, SpanFields, label

CONVENTIONS = (langfuse, openinference, openllmetry, genai)
# OTel's general `session.id` / `user.id` attributes, whatever the convention (the GenAI workflow spans carry them)
_GENERAL: tuple[Reading, ...] = (("session_id", label, ("session.id",)), ("user_id", label, ("user.id",)))


def read_spans(spans: list[Span]) -> None:
    """`read_span` of each of a trace's spans, offered only the conventions the trace carries at all: a
    convention matches a span by an attribute or event it has, so one that matches none of the trace's attributes
    and events together matches none of its spans (asked once per trace, not once per span)."""
    probe = Span(file="", line=None, unit="span", raw={}, resource={}, trace_id="")
    for span in spans:
        probe.attrs.update(dict.fromkeys(span.attrs))
        probe.events += span.events
    carried = tuple(convention for convention in CONVENTIONS if convention.matches(probe))
    for span in spans:
        read_span(span, carried)


def read_span(span: Span, conventions: tuple = CONVENTIONS) -> SpanFields:
    """The span's fields under every convention it carries (also stored on `span.fields`); `conventions`: those
    to offer it (`CONVENTIONS`' order)."""
    fields = SpanFields()
    for convention in conventions:
        if convention.matches(span):
            if fields.convention == "none":
                fields.convention = convention.NAME
            convention.read(span, fields)
    fields.fill(span.attrs, _GENERAL)
    exception = next((event.attrs for event in span.events if event.name == "exception"), {})
    if span.status == "error" or fields.error_type is not None:
        fields.put("error_type", label(exception.get("exception.type")) or "error")
        fields.put("error_message", span.status_message or label(exception.get("exception.message")))
    frameworks.refine(span, fields)  # what an agent framework means beyond its convention (handoffs, ...)
    span.fields = fields
    return fields
