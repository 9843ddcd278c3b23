"""Whole traces: the day's spans (from every line and file) grouped by `traceId` into trees, and what is wrong.

**Rows.** For OTLP input a *row* is one span, one log record, or one envelope error (a line whose
`resourceSpans` is not a list, a span without a `traceId`, ...). Every row of the day ends in exactly one place:
its trace (the `spans` table, its trace in `traces`) or the quarantine (its own raw JSON, its file and line, a
reason). So `read == accepted + quarantined` counts rows, per file and per day.

**Which day a trace belongs to (midnight).** A trace belongs to the day folder that holds its *root span* (a
span without a parent, or whose parent is flagged remote, i.e. in another process). Exporters write a span when
it ends and a root ends last, so a trace running over midnight has its early spans in `traces/D-1/` and its root
in `traces/D/`: the ingest of day D reads D's files and, from `traces/D-1/`, the spans and log records of the
traces of D (nothing else of D-1 is read, counted or written). Spans of D whose trace has no root in D (nor in
D-1) are quarantined `awaiting_root`; the detail names `traces/D+1/`, whose ingest reads them again. Spans of D
whose trace's root is in D-1 (a span ending after its root: rare, async work) are quarantined `late_span`: that
trace was ingested with D-1 and is not changed by D's ingest.

**A root that never arrives (one day's wait).** Some roots never come: an SDK that exports only its own spans
(the Langfuse SDK beside an app's own root span), an instrumentation that never ends its run's span (smolagents'
on an exception). The rule: the ingest of D takes every trace with spans in `traces/D-1/` and no root there nor
in D as a **partial trace** of D, with its spans of both folders: `partial_reason = missing_root:<the parent id
its earliest top span names>` (the missing root's id when one span hung from it) and the flag `missing_root`;
that top span stands for the root (timestamp, input, output). So a trace is in exactly one day's partition,
whatever order the days are (re)ingested: D's content is a function of the folders D-2, D-1 and D only, and D-1's
ingest never takes a trace without a root in D-1. The day that took it is told from the folders, not from what
was ingested: D reads the trace ids of `traces/D-2/` too (ids and parents only, never taken nor counted), and a
trace with spans there (the ingest of D-1 took it) is not taken again: its spans of D are `late_span`, and a root
arriving in D is `late_root` (quarantined, the partial trace stays). A root arriving later than that (its trace's
first spans three or more days before) is not recognised: it makes a second trace of the same id in its own day.
The `awaiting_root` rows of D-1 are taken out of its quarantine by D's ingest (`defs/traces.py`), once D's
partition holds their trace.

**Problems, and what each costs:**
- a span with a broken field (`invalid_otlp:<field>`): its whole trace is quarantined, every span with the
  reason (never a silently cut trace);
- `duplicate_span_id`: a span id seen before in its trace (the first in reading order is kept, the later copy
  quarantined with its raw); the trace is flagged `duplicate_span_id`. A root span delivered again in a later
  day's folder is such a copy: its trace is the day before's (ingested with it), the copy quarantined, the day
  fine;
- a root that never arrived: see above (`missing_root`, `late_root`);
- a span whose parent never arrived: kept, with its subtree; the trace's `partial_reason` is
  `missing_parent:<the missing parent's id>` and it is flagged `missing_parent`;
- `parent_cycle`: spans whose parent chain loops never reach the root; they (and their subtrees) are quarantined,
  the trace's `partial_reason` is `parent_cycle:<span id>` (when no parent is missing) and it is flagged;
- `clock_skew` (flag only): a span starting more than 1 ms before its parent, or ending more than 1 ms after it;
- `multiple_roots` (flag only): several spans without a parent; the earliest is the root;
- `no_genai_span`: no span of the trace carries any GenAI convention (an HTTP-only trace): quarantined;
- log records: one without a trace/span id, or not a GenAI event (`gen_ai.*`), is quarantined
  `not_a_genai_event`; one whose span is not in the day's traces `orphan_event`; one of a quarantined trace
  shares its trace's reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, timedelta

from eval_platform.ingest.common import RowError
from eval_platform.ingest.otel.conventions import read_spans
from eval_platform.ingest.otel.envelope import LogEvent, Span

SKEW_NS = 1_000_000
AWAITING_ROOT, MISSING_ROOT, LATE_ROOT = "awaiting_root", "missing_root", "late_root"
# the trace an `awaiting_root` quarantine row waits for (its detail names it first)
AWAITING_TRACE = re.compile(r"^.*?trace ([0-9a-f]{32}) has no root span")


def _day_before(day: str, days: int) -> str:
    return (date.fromisoformat(day) - timedelta(days=days)).isoformat()


@dataclass
class Trace:
    """One trace of the day (rooted in it, or partial: `missing_root`): its spans (start order), root, partial
    reason and flags."""

    trace_id: str
    root: Span
    spans: list[Span]
    events: list[LogEvent] = field(default_factory=list)
    partial_reason: str | None = None
    flags: list[str] = field(default_factory=list)


@dataclass
class Assembly:
    """One trace's assembly: the trace (None when every row of it is quarantined) and its rejected rows, each with
    the step that rejected it: `span` (the tree), `event` (a log record), `genai` (no GenAI span)."""

    trace: Trace | None = None
    rejected: list[tuple[str, Span | LogEvent, RowError]] = field(default_factory=list)


def _roots(spans: list[Span], ids: set[str | None]) -> list[Span]:
    return [s for s in spans if s.parent_span_id is None or (s.parent_is_remote and s.parent_span_id not in ids)]


def _assemble_one(
    trace_id: str,
    group: list[Span],
    day: str,
    next_day: str,
    rejected: list[tuple[Span, RowError]],
    earlier: bool = False,
) -> Trace | None:
    today = [s for s in group if not s.carried]
    ids = {s.span_id for s in group}
    carried = {s.span_id: s for s in group if s.carried}
    roots = _roots(group, ids)
    # a root delivered again (an exporter's retry, a file copied twice) whose first copy is the day before's: the
    # trace is that day's, ingested with it
    today_roots = [s for s in roots if not s.carried and s.span_id not in carried]
    reason = message = None
    if today_roots and earlier:
        message = (
            f"trace {trace_id} already has spans in traces/{_day_before(day, 2)}/, and the ingest of the day after "
            "them took it (as a partial trace, missing_root, when its root was not in either folder): its root "
            "arrived too late; span {span} is not added to it"
        )
        reason = LATE_ROOT
    elif not today_roots and roots:
        first_root = next((s for s in roots if s.carried), None) or carried[roots[0].span_id]
        message = (
            f"span {{span}} of trace {trace_id} ended after its root span, which is in {first_root.where}: "
            "that trace belongs to the previous day and was ingested with it"
        )
        reason = "late_span"
    elif not today_roots and earlier:
        message = (
            f"trace {trace_id} has spans in traces/{_day_before(day, 2)}/ and no root span: the ingest of the day "
            "after them took it as a partial trace (missing_root); span {span} ended too late to be added to it"
        )
        reason = "late_span"
    elif not today_roots and not carried:
        message = (
            f"trace {trace_id} has no root span in traces/{day}/ (nor in the day before): span {{span}} waits "
            f"for traces/{next_day}/, whose ingest reads this folder and takes the trace, whole if the root arrives "
            "there, else as a partial trace (missing_root)"
        )
        reason = AWAITING_ROOT
    if reason is not None:
        for s in today:
            if s.span_id in carried:
                again = (
                    f"trace {trace_id} span {s.span_id} already appeared in {carried[s.span_id].where} (the day "
                    "before), whose ingest took its trace; this copy is a duplicate"
                )
                rejected.append((s, RowError("duplicate_span_id", again)))
                continue
            rejected.append((s, RowError(reason, message.format(span=s.span_id))))  # type: ignore[union-attr]
        return None
    # rooted today, or spans of the previous day with no root there nor today: the one day's wait is over, it is
    # taken as a partial trace (missing_root); either way its spans carried from the day before are its rows too
    members = group
    broken = [s for s in members if s.errors]
    if broken:
        first = broken[0]
        for s in members:
            error = s.errors[0] if s.errors else first.errors[0]
            text = "; ".join(e.message for e in s.errors) or f"its trace has a broken span: {first.errors[0].message}"
            rejected.append((s, RowError(error.reason, f"trace {trace_id}: {text}")))
        return None
    flags: list[str] = []
    by_id: dict[str, Span] = {}
    unique: list[Span] = []
    for s in members:
        if s.span_id in by_id:
            kept = by_id[s.span_id]
            message = f"trace {trace_id} span {s.span_id} already appeared in {kept.where}; the first copy is kept"
            rejected.append((s, RowError("duplicate_span_id", message)))
            if "duplicate_span_id" not in flags:
                flags.append("duplicate_span_id")
            continue
        by_id[s.span_id] = s  # type: ignore[index]
        unique.append(s)
    roots = sorted(_roots(unique, set(by_id)), key=lambda s: s.sort_key)
    missing_root = None
    if roots:
        root = min((s for s in roots if not s.carried), key=lambda s: s.sort_key)
        if len(roots) > 1:
            flags.append("multiple_roots")
    else:  # its top spans (their parent never arrived) hang from the missing root; the earliest stands for it
        roots = sorted((s for s in unique if s.parent_span_id not in by_id), key=lambda s: s.sort_key)
        if not roots:  # every span's parent is in the trace: a cycle, no top span
            roots = [min(unique, key=lambda s: s.sort_key)]
        root = roots[0]
        missing_root = f"{MISSING_ROOT}:{root.parent_span_id}"
        flags.append(MISSING_ROOT)
    children: dict[str, list[Span]] = {}
    for s in unique:
        if s.parent_span_id is not None:
            children.setdefault(s.parent_span_id, []).append(s)
    reached: set[str] = set()
    stack = [s for s in roots]
    while stack:
        s = stack.pop()
        if s.span_id in reached:
            continue
        reached.add(s.span_id)  # type: ignore[arg-type]
        stack.extend(children.get(s.span_id, []))  # type: ignore[arg-type]
    missing: list[tuple[int, str]] = []
    cycle: list[Span] = []
    for s in unique:
        if s.span_id in reached:
            continue
        current, seen = s, set()
        while current.parent_span_id in by_id and current.span_id not in seen:
            seen.add(current.span_id)
            current = by_id[current.parent_span_id]
        if current.parent_span_id not in by_id and current.span_id not in seen:
            missing.append((current.start_ns or 0, current.parent_span_id))  # type: ignore[arg-type]
        else:
            cycle.append(s)
    partial = missing_root
    if missing:
        partial = partial or f"missing_parent:{min(missing)[1]}"
        flags.append("missing_parent")
    if cycle:
        cycle_ids = {s.span_id for s in cycle}
        for s in cycle:
            message = f"trace {trace_id}: span {s.span_id}'s parent chain loops and never reaches the root span"
            rejected.append((s, RowError("parent_cycle", message)))
        partial = partial or f"parent_cycle:{min(cycle, key=lambda s: s.sort_key).span_id}"
        flags.append("parent_cycle")
        unique = [s for s in unique if s.span_id not in cycle_ids]
    for s in unique:
        parent = by_id.get(s.parent_span_id) if s.parent_span_id else None
        if parent is not None and parent.start_ns and s.start_ns:
            early = s.start_ns < parent.start_ns - SKEW_NS
            late = bool(s.end_ns and parent.end_ns and s.end_ns > parent.end_ns + SKEW_NS)
            if early or late:
                flags.append("clock_skew")
                break
    unique.sort(key=lambda s: s.sort_key)
    return Trace(trace_id=trace_id, root=root, spans=unique, partial_reason=partial, flags=flags)


def _is_genai_event(event: LogEvent) -> bool:
    return event.trace_id is not None and event.span_id is not None and event.event.name.startswith("gen_ai.")


def assemble_trace(
    trace_id: str,
    group: list[Span],
    events: list[LogEvent],
    day: str,
    next_day: str,
    *,
    earlier: bool = False,
) -> Assembly:
    """One trace of the day with its rejected rows: `group` is every span read with its trace id, `events` every
    log record naming it, both in reading order (the previous day's, `carried`, first); `earlier`: the trace also
    has spans or log records two days back. Its spans' conventions are read (`SpanFields`)."""
    out = Assembly()
    rejected: list[tuple[Span, RowError]] = []
    trace = _assemble_one(trace_id, group, day, next_day, rejected, earlier)
    out.rejected += [("span", s, error) for s, error in rejected]
    trace_error = rejected[-1][1] if rejected else None
    for event in events:
        span, error = place_event(event, trace, trace_error)
        if error is not None:
            out.rejected.append(("event", event, error))
        elif span is not None:
            span.events.append(event.event)
            trace.events.append(event)  # type: ignore[union-attr]
    if trace is None:
        return out
    read_spans(trace.spans)
    if all(s.fields.convention == "none" for s in trace.spans):
        message = f"trace {trace.trace_id} has {len(trace.spans)} span(s), none in a GenAI convention"
        items: list[Span | LogEvent] = [*trace.spans, *trace.events]
        out.rejected += [("genai", item, RowError("no_genai_span", message)) for item in items]
        return out
    out.trace = trace
    return out


def place_event(
    event: LogEvent, trace: Trace | None, trace_error: RowError | None = None
) -> tuple[Span | None, RowError | None]:
    """A log record's span in its trace (`trace`: the day's trace of its trace id, if any; `trace_error`: why that
    trace's spans were quarantined, if they were), or why the record is quarantined. (None, None): a record of
    the previous day's own traces, neither read nor counted."""
    if event.carried and trace is None:
        return None, None
    if not _is_genai_event(event):
        message = f"log record '{event.event.name}' is not a GenAI event of a span (gen_ai.* with trace and span id)"
        return None, RowError("not_a_genai_event", message)
    span = next((s for s in trace.spans if s.span_id == event.span_id), None) if trace else None
    if span is not None:
        return span, None
    message = f"event '{event.event.name}' of span {event.span_id} (trace {event.trace_id})"
    if trace_error is not None:
        return None, RowError(trace_error.reason, f"{message}: its trace is quarantined")
    return None, RowError("orphan_event", f"{message}: no such span in the day's traces")
