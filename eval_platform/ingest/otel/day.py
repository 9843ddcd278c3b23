"""One day's OTLP input: collect the requests of every file (and the previous day's), then assemble and model.

`OtelDay.add` walks one OTLP/JSON request as a reader found it (a JSONL line, a `.json` document or array
element); `finish` assembles the day's whole traces (`assembly.py`) and turns each into its `traces` record
and `spans` rows (`model.py`). Rows that fail are returned as `Rejected` with their file, line, raw and reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eval_platform.ingest.common import Candidate, RowError, dumps
from eval_platform.ingest.otel.assembly import Trace, assemble
from eval_platform.ingest.otel.envelope import LogEvent, Span, walk
from eval_platform.ingest.otel.model import span_row, trace_record


@dataclass
class Rejected:
    file: str
    line: int | None
    unit: str
    error: RowError
    raw: str


@dataclass
class ModelledTrace:
    """An assembled trace: its record (to validate), the columns set after validation, its span rows and rows."""

    record: dict[str, Any]
    extras: dict[str, Any]
    span_rows: list[dict[str, Any]]
    items: list[Span | LogEvent]  # its rows, each counted in its own file
    file: str  # the root span's file and line (the trace row's source)
    line: int | None
    unit: str


@dataclass
class OtelDay:
    day: str
    next_day: str
    spans: list[Span] = field(default_factory=list)
    events: list[LogEvent] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    def add(self, document: dict[str, Any], file: str, line: int | None, *, carried: bool = False) -> None:
        spans, events, errors = walk(document, file, line)
        for item in [*spans, *events]:
            item.carried = carried
        self.spans += spans
        self.events += events
        if not carried:
            unit = "line" if line is not None else "span"
            self.rejected += [_rejected_candidate(c, file, unit) for c in errors]

    def finish(self) -> list[ModelledTrace]:
        assembly = assemble(self.spans, self.events, self.day, self.next_day)
        self.rejected += [reject(item, error) for item, error in assembly.rejected]
        modelled = []
        for trace in assembly.traces:
            try:
                modelled.append(model_trace(trace))
            except Exception as exc:  # an ingest bug must not crash the day nor lose the trace's rows
                error = RowError(
                    "unexpected_error", f"trace {trace.trace_id} could not be modelled ({type(exc).__name__}: {exc})"
                )
                self.rejected += [reject(item, error) for item in trace_items(trace)]
        return modelled


def trace_items(trace: Trace) -> list[Span | LogEvent]:
    return [*trace.spans, *trace.events]


def model_trace(trace: Trace) -> ModelledTrace:
    built = trace_record(trace)
    trace_id = built["record"]["trace_id"]
    rows = [span_row(s, str(trace_id), summary) for s, summary in zip(trace.spans, built["summaries"], strict=True)]
    root = trace.root
    return ModelledTrace(built["record"], built["extras"], rows, trace_items(trace), root.file, root.line, root.unit)


def reject(item: Span | LogEvent, error: RowError) -> Rejected:
    return Rejected(item.file, item.line, item.unit, error, dumps(item.raw))


def _rejected_candidate(candidate: Candidate, file: str, unit: str) -> Rejected:
    assert candidate.error is not None
    return Rejected(file, candidate.line, unit, candidate.error, candidate.raw)
