"""Pass 1's index of an OTLP day as it was before it went to disk (commit 17d69d4, `ingest/otel/day.py`): a Python
object per trace id, every one in memory. Kept as the oracle the on-disk index (`ingest/otel/day_index.py`) is
compared with: `trace_day_reference.py` reads a day with it. Not product code: only the tests import it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from eval_platform.ingest.common import Candidate
from eval_platform.ingest.otel.assembly import place_event
from eval_platform.ingest.otel.day import (
    ENVELOPE,
    EVENT,
    ModelledTrace,
    OtelDay,
    _changed,
    _rejected_candidate,
    otel_line,
    reject,
)
from eval_platform.ingest.otel.envelope import LogEvent, Span, walk
from eval_platform.ingest.readers import iter_candidates


class _Seen:
    """Pass 1's knowledge of one trace id."""

    __slots__ = ("index", "today", "last")

    def __init__(self) -> None:
        self.index: int | None = None  # its place in reading order; None: log records only, no span
        self.today = False  # a span of it is in the day's own folder
        self.last = 0  # the last request holding a span or log record of it


@dataclass
class _Source:
    file: str
    path: Path
    kind: str
    carried: bool
    first: int = 0
    end: int = 0
    trace_ids: set[str] = field(default_factory=set)
    requests: list[tuple[int | None, list[str], list[str | None], list[Candidate]]] = field(default_factory=list)


class InMemoryOtelDay(OtelDay):
    """`OtelDay` with the day's index in memory (the product's `_trace`, `items_at` and `file_of`)."""

    def __init__(self, day: str, next_day: str) -> None:
        self.day, self.next_day = day, next_day
        self.rejected = []
        self._seen: dict[str, _Seen] = {}
        self._sources = []
        self._firsts = []
        self._checks: list[int] = []
        self._traces = 0

    def source(self, file: str, path: Path, kind: str, *, carried: bool = False) -> _Source:  # type: ignore[override]
        return _Source(file, path, kind, carried)

    def index(self, source: _Source, candidate: Candidate) -> None:  # type: ignore[override]
        assert candidate.otel is not None
        line = otel_line(candidate)
        spans, events, errors = walk(candidate.otel, source.file, line, ids_only=True)
        source.requests.append((line, [s.trace_id for s in spans], [e.trace_id for e in events], errors))

    def commit(self, source: _Source) -> None:  # type: ignore[override]
        if not source.requests:
            return
        source.first = len(self._checks)
        unit = "span"
        for number, (line, span_ids, event_ids, errors) in enumerate(source.requests, start=source.first):
            for trace_id in span_ids:
                seen = self._seen.get(trace_id) or self._seen.setdefault(trace_id, _Seen())
                if seen.index is None:
                    seen.index, self._traces = self._traces, self._traces + 1
                seen.today = seen.today or not source.carried
                seen.last = number
            for event_trace in event_ids:
                if event_trace is not None:
                    (self._seen.get(event_trace) or self._seen.setdefault(event_trace, _Seen())).last = number
            self._checks.append(hash((tuple(span_ids), tuple(event_ids))))
            if source.carried:
                source.trace_ids.update(span_ids)
                source.trace_ids.update(t for t in event_ids if t is not None)
            if not source.carried:
                unit = "line" if line is not None else "span"
                self.rejected += [
                    _rejected_candidate(c, source.file, unit, (ENVELOPE, number, k)) for k, c in enumerate(errors)
                ]
        source.requests, source.end = [], len(self._checks)
        self._sources.append(source)  # type: ignore[arg-type]
        self._firsts.append(source.first)

    def finish(self) -> Iterator[ModelledTrace]:
        ends: dict[int, list[str]] = {}
        for trace_id, seen in self._seen.items():
            if seen.today:
                ends.setdefault(seen.last, []).append(trace_id)
        held: dict[str, tuple[list[Span], list[LogEvent]]] = {}
        for source in self._sources:
            assert isinstance(source, _Source)
            if source.carried and not any(self._seen[t].today for t in source.trace_ids):
                continue
            source.trace_ids = set()
            number = source.first
            for candidate in iter_candidates(source.path, source.kind):
                if number == source.end:
                    break
                if candidate.otel is None:
                    continue
                spans, events, _ = walk(candidate.otel, source.file, otel_line(candidate))
                if hash((tuple(s.trace_id for s in spans), tuple(e.trace_id for e in events))) != self._checks[number]:
                    raise _changed(source, candidate)  # type: ignore[arg-type]
                for position, span in enumerate(spans):
                    if self._seen[span.trace_id].today:
                        span.carried, span.at = source.carried, (number, position)
                        held.setdefault(span.trace_id, ([], []))[0].append(span)
                for position, event in enumerate(events):
                    event.carried, event.at = source.carried, (number, position)
                    known = self._seen.get(event.trace_id or "")
                    if known is not None and known.today:
                        held.setdefault(event.trace_id, ([], []))[1].append(event)  # type: ignore[arg-type]
                        continue
                    _, error = place_event(event, None)
                    if error is not None:
                        self.rejected.append(reject(event, error, (EVENT, *event.at)))
                for trace_id in ends.pop(number, []):
                    spans, events = held.pop(trace_id)
                    modelled = self._trace(trace_id, self._seen[trace_id].index or 0, spans, events)
                    if modelled is not None:
                        yield modelled
                number += 1
            if number != source.end:
                raise _changed(source, None)  # type: ignore[arg-type]
        assert not held and not ends

    def close(self) -> None:
        pass
