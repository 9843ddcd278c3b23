"""Walking one OTLP/JSON request: `resourceSpans` -> `Span`s, `resourceLogs` -> `LogEvent`s, plus error rows.

Input: an `ExportTraceServiceRequest` (`{"resourceSpans": [{"resource": {...}, "scopeSpans": [{"scope": {...},
"spans": [...]}]}]}`) or an `ExportLogsServiceRequest` (`{"resourceLogs": [{"resource": {...}, "scopeLogs":
[{"logRecords": [...]}]}]}`), as the Collector's file exporter writes one per line. Ids are hex strings, times
`*UnixNano` integers or decimal strings, attribute values OTLP `AnyValue`s (`values.py`). Old field names
(`instrumentationLibrarySpans`, `instrumentationLibraryLogs`) are read too.

Nothing here knows a GenAI convention: a `Span` carries its ids, times, kind, status, attributes, span events
and resource; the conventions (`conventions.py`) read it later. A span whose own fields are broken keeps its
`errors` (its whole trace is rejected at assembly, never silently cut); a span without a usable `traceId`, or a
broken envelope, is an error row right away (`invalid_otlp:<what>`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eval_platform.ingest.common import Candidate, RowError, dumps, preview
from eval_platform.ingest.otel.values import decode_attributes, decode_value

_HEX = re.compile(r"^[0-9a-fA-F]+$")
_ZERO_SPAN = "0" * 16
KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
STATUS = {0: "unset", 1: "ok", 2: "error"}
# SpanFlags (OTLP 1.1+): bit 8 says whether bit 9 is known; bit 9 says the parent span lives in another process.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200


def is_otlp_document(value: Any) -> bool:
    return isinstance(value, dict) and ("resourceSpans" in value or "resourceLogs" in value)


@dataclass
class Event:
    """A GenAI event: a span event or a log record, with its name, attributes and body (already decoded)."""

    name: str
    attrs: dict[str, Any]
    body: Any = None
    time_ns: int | None = None


@dataclass
class Span:
    """One span as read (envelope fields) plus what the conventions read from it (`fields`)."""

    file: str
    line: int | None  # the JSONL line, else the span's 1-based position in the document
    unit: str  # what `line` counts: line | span
    raw: dict[str, Any]
    resource: dict[str, Any]
    trace_id: str
    span_id: str | None = None
    parent_span_id: str | None = None
    parent_is_remote: bool = False
    name: str = ""
    kind: str = "unspecified"
    start_ns: int | None = None
    end_ns: int | None = None
    status: str = "unset"
    status_message: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    carried: bool = False  # read from the previous day's folder (see assembly.py)
    fields: Any = None  # a `SpanFields` once the conventions have read the span
    at: tuple[int, int] = (0, 0)  # (the request's place in the day's reading order, the span's place in it)

    @property
    def where(self) -> str:
        return f"{self.file} {self.unit} {self.line}" if self.line is not None else self.file

    @property
    def sort_key(self) -> tuple[int, str, int]:
        return (self.start_ns or 0, self.file, self.line or 0)


@dataclass
class LogEvent:
    """A log record carrying a trace and span id: a GenAI event of that span (the `events` form)."""

    file: str
    line: int | None
    unit: str
    raw: dict[str, Any]
    trace_id: str | None
    span_id: str | None
    event: Event
    carried: bool = False
    at: tuple[int, int] = (0, 0)  # (the request's place in the day's reading order, the record's place in it)

    @property
    def where(self) -> str:
        return f"{self.file} {self.unit} {self.line}" if self.line is not None else self.file


def hex_id(value: Any, length: int) -> str | None:
    if isinstance(value, str) and len(value) == length and _HEX.match(value):
        return value.lower()
    return None


def nanos(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _enum(value: Any, names: dict[int, str], prefix: str) -> str | None:
    """An OTLP enum written as its number or its name (`SPAN_KIND_CLIENT`, `STATUS_CODE_ERROR`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value)
    if isinstance(value, str):
        name = value.upper().removeprefix(prefix).lower()
        return name if name in names.values() else None
    return None


def is_parentless(span: dict[str, Any]) -> bool:
    """Whether a span (its raw OTLP object) names no parent: the root of its trace (or a span of a trace with
    several roots); a span whose parent is remote is not counted."""
    return span.get("parentSpanId") in (None, "", _ZERO_SPAN)


def _parse_span(span: dict[str, Any], trace_id: str, base: Span) -> Span:
    parsed = base
    where = f"span #{base.line}" if base.unit == "span" else "a span"
    parsed.span_id = hex_id(span.get("spanId"), 16)
    if parsed.span_id is None:
        parsed.errors.append(
            RowError("invalid_otlp:spanId", f"{where} has spanId {preview(span.get('spanId'))}, not 16 hex digits")
        )
    where = f"span {parsed.span_id or where}"
    parent = span.get("parentSpanId")
    if not is_parentless(span):
        parsed.parent_span_id = hex_id(parent, 16)
        if parsed.parent_span_id is None:
            parsed.errors.append(
                RowError("invalid_otlp:parentSpanId", f"{where} has parentSpanId {preview(parent)}, not 16 hex digits")
            )
        flags = span.get("flags")
        if isinstance(flags, int) and flags & _HAS_IS_REMOTE:
            parsed.parent_is_remote = bool(flags & _IS_REMOTE)
    name = span.get("name", "")
    parsed.name = name if isinstance(name, str) else str(name)
    parsed.kind = _enum(span.get("kind", 0), KINDS, "SPAN_KIND_") or "unspecified"
    parsed.start_ns = nanos(span.get("startTimeUnixNano"))
    if not parsed.start_ns:
        parsed.errors.append(
            RowError(
                "invalid_otlp:startTimeUnixNano",
                f"{where} has startTimeUnixNano {preview(span.get('startTimeUnixNano'))}, not a positive integer",
            )
        )
    end = span.get("endTimeUnixNano")
    if end not in (None, "", 0, "0"):
        parsed.end_ns = nanos(end)
        if parsed.end_ns is None or (parsed.start_ns and parsed.end_ns < parsed.start_ns):
            parsed.errors.append(
                RowError(
                    "invalid_otlp:endTimeUnixNano",
                    f"{where} has endTimeUnixNano {preview(end)}, not an integer at or after its start",
                )
            )
            parsed.end_ns = None
    status = span.get("status") or {}
    if isinstance(status, dict):
        parsed.status = _enum(status.get("code", 0), STATUS, "STATUS_CODE_") or "unset"
        message = status.get("message")
        parsed.status_message = message if isinstance(message, str) and message else None
    try:
        parsed.attrs = decode_attributes(span.get("attributes"), where)
        for event in span.get("events") or []:
            if isinstance(event, dict):
                parsed.events.append(
                    Event(
                        name=str(event.get("name") or ""),
                        attrs=decode_attributes(event.get("attributes"), f"{where} event"),
                        time_ns=nanos(event.get("timeUnixNano")),
                    )
                )
    except RowError as error:
        parsed.errors.append(error)
    return parsed


def _log_event(record: dict[str, Any], where: str) -> Event:
    attrs = decode_attributes(record.get("attributes"), where)
    name = record.get("eventName") or attrs.get("event.name") or ""
    return Event(
        name=str(name),
        attrs=attrs,
        body=decode_value(record.get("body"), f"{where} body"),
        time_ns=nanos(record.get("timeUnixNano")) or nanos(record.get("observedTimeUnixNano")),
    )


def walk(
    document: dict[str, Any], file: str, line: int | None, *, ids_only: bool = False
) -> tuple[list[Span], list[LogEvent], list[Candidate]]:
    """Every span and log record of one request, plus error rows for what cannot belong to any trace.

    `line` (a JSONL line) is every item's line; without it (a whole `.json` document) an item's line is its
    1-based position among the document's spans (or log records). `ids_only`: the spans carry only their trace
    id (their own fields are not read): which traces a request holds, for the day's first pass (`day.py`).
    """
    spans: list[Span] = []
    events: list[LogEvent] = []
    errors: list[Candidate] = []
    unit = "line" if line is not None else "span"

    def fail(raw: Any, reason: str, message: str, at: int | None = None) -> None:
        errors.append(Candidate(line=line if line is not None else at, raw=dumps(raw), error=RowError(reason, message)))

    for key, scope_key, old_scope_key, items_key in (
        ("resourceSpans", "scopeSpans", "instrumentationLibrarySpans", "spans"),
        ("resourceLogs", "scopeLogs", "instrumentationLibraryLogs", "logRecords"),
    ):
        if key not in document:
            continue
        position = 0
        resources = document.get(key)
        if not isinstance(resources, list):
            fail(document, f"invalid_otlp:{key}", f"'{key}' is {preview(resources)}, not a list")
            continue
        for r_index, entry in enumerate(resources):
            where = f"{key}[{r_index}]"
            if not isinstance(entry, dict):
                fail(entry, f"invalid_otlp:{key}", f"{where} is not an object")
                continue
            try:
                resource = decode_attributes((entry.get("resource") or {}).get("attributes"), f"{where}.resource")
            except (RowError, AttributeError) as error:
                fail(entry, "invalid_otlp:attributes", getattr(error, "message", f"{where}.resource is not an object"))
                continue
            scopes = entry.get(scope_key, entry.get(old_scope_key, []))
            if not isinstance(scopes, list):
                fail(entry, f"invalid_otlp:{scope_key}", f"{where}.{scope_key} is not a list")
                continue
            for s_index, scope in enumerate(scopes):
                items = scope.get(items_key, []) if isinstance(scope, dict) else None
                if not isinstance(items, list):
                    reason = f"invalid_otlp:{items_key if isinstance(scope, dict) else scope_key}"
                    fail(scope, reason, f"{where}.{scope_key}[{s_index}] has no list of {items_key}")
                    continue
                for item in items:
                    position += 1
                    at = line if line is not None else position
                    noun = "span" if items_key == "spans" else "log record"
                    if not isinstance(item, dict):
                        fail(item, f"invalid_otlp:{noun.replace(' ', '_')}", f"{noun} #{position} is not an object", at)
                        continue
                    if items_key == "spans":
                        trace_id = hex_id(item.get("traceId"), 32)
                        if trace_id is None:
                            message = f"span #{position} has traceId {preview(item.get('traceId'))}, not 32 hex digits"
                            fail(item, "invalid_otlp:traceId", message, at)
                            continue
                        base = Span(file=file, line=at, unit=unit, raw=item, resource=resource, trace_id=trace_id)
                        spans.append(base if ids_only else _parse_span(item, trace_id, base))
                        continue
                    try:
                        event = _log_event(item, f"log record #{position}")
                    except RowError as error:
                        fail(item, error.reason, error.message, at)
                        continue
                    trace_id, span_id = hex_id(item.get("traceId"), 32), hex_id(item.get("spanId"), 16)
                    events.append(LogEvent(file, at, unit, item, trace_id, span_id, event))
    return spans, events, errors
