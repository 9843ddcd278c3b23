"""One day's OTLP input in two passes, so that a day holds one trace at a time, not every span of the day.

Pass 1 (`OtelDay.index`, while `traces.py` reads each file): which traces each request (JSONL line, `.json`
document or array element) holds, from the ids alone, written to disk as it is read (`day_index.py`: nothing per
trace is held in memory). From it, for every trace id: its place in reading order (its first span read), the
first and the last request holding one of its spans or log records, and whether it is of the day (a span in the
day's own folder, or the previous day's spans of a trace whose root never arrived: `assembly.py`); the trace ids
of the day two days back are indexed too, to tell a trace an earlier ingest took. DuckDB works these out of core
once the files are read. The envelope's errors are rows
of their own (`invalid_otlp:<what>`) once their file is read whole.

Pass 2 (`OtelDay.finish`): the files are read again, request by request, beside the day's traces sorted by
their first request; each span and log record of a trace of the day is parsed whole and kept with its
trace until the request where its trace ends, which is then assembled (`assembly.py`) and turned into its
`traces` record and `spans` rows (`model.py`), and dropped. Only the traces open at a request (first <= request
<= last) are known and held: in exporter output (a span is written when it ends, a trace's spans within seconds)
a handful. A trace whose spans are spread over the whole day is held for the whole day. A file must not change
between the passes: pass 2 reads the requests pass 1 counted (an exporter appending lines meanwhile changes
nothing) and checks each holds the same trace ids (a hash per request, on disk too), or raises. A file of the
previous day is read again only if it holds a span or log record of a trace of the day; a file of two days back
never is.

Every row keeps the place it had when the whole day was read at once (`key`), so the caller can put the
quarantine and the trace rows in the same order: rows that fail are returned as `Rejected` with their file, line,
raw and reason.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_platform.ingest.common import Candidate, RowError, dumps
from eval_platform.ingest.otel.assembly import Trace, assemble_trace, place_event
from eval_platform.ingest.otel.day_index import DayIndex
from eval_platform.ingest.otel.envelope import LogEvent, Span, is_parentless, walk
from eval_platform.ingest.otel.model import trace_record
from eval_platform.ingest.readers import iter_candidates

# The order rows were quarantined in when the whole day was read at once (the first field of `Rejected.key`):
# the caller's invalid records, then traces failing validation, envelope errors, assembly, log records, no
# GenAI span, modelling errors; the caller's duplicate trace ids last.
INVALID_RECORD, ENVELOPE, ASSEMBLY, EVENT, NO_GENAI, MODEL = 1, 2, 3, 4, 5, 6
_STAGES = {"span": ASSEMBLY, "genai": NO_GENAI}


@dataclass
class Rejected:
    file: str
    line: int | None
    unit: str
    error: RowError
    raw: str
    key: tuple[int, ...] = ()  # its place among the day's rejected rows (see INVALID_RECORD ...)


@dataclass
class ModelledTrace:
    """An assembled trace: its record (to validate), the columns set after validation (its spans among them) and
    its rows."""

    record: dict[str, Any]
    extras: dict[str, Any]
    items: list[Span | LogEvent]  # its rows, each counted in its own file
    file: str  # the root span's file and line (the trace row's source)
    line: int | None
    unit: str
    index: int = 0  # the trace's place in reading order (its first span read): it orders, it does not count


@dataclass
class _Source:
    """A file holding OTLP requests: its requests are numbered `first`, `first + 1`, ... in reading order."""

    file: str
    path: Path
    kind: str
    carried: bool
    number: int  # its place among the files read
    early: bool = False  # a file of two days before: only its ids are read (pass 1), never its spans
    first: int = 0
    end: int = 0  # the number after its last request
    errors: list[tuple[int, str, list[Candidate]]] = field(default_factory=list)  # (its request, unit, errors)


def otel_line(candidate: Candidate) -> int | None:
    """The line an OTLP request's items get: its JSONL line or array element; None for a lone document."""
    return candidate.line if candidate.unit in ("line", "element") else None


class OtelDay:
    """One day's OTLP requests, read in two passes (module docstring); pass 1's index is kept in `folder`
    (`day_index.py`), a folder of the caller's that `close` leaves to it to remove."""

    def __init__(self, day: str, next_day: str, folder: Path, traces: set[str] | None = None) -> None:
        self.day, self.next_day = day, next_day
        # only these traces (`ingest/otlp_increments.py`): the other trace ids read are left out of the index, so
        # no span of another trace is held nor assembled (their files' other rows are the caller's to leave out)
        self.wanted = traces
        self.rejected: list[Rejected] = []
        self._index = DayIndex(folder)
        self._sources: list[_Source] = []  # the files holding OTLP requests, in reading order
        self._firsts: list[int] = []  # each one's first request
        self._files = 0  # the files handed to `source` so far
        self._requests = 0  # the requests indexed so far (a file whose reading failed keeps its numbers)

    @property
    def indexed(self) -> int:
        """The OTLP requests indexed so far."""
        return self._requests

    # pass 1
    def source(self, file: str, path: Path, kind: str, *, carried: bool = False, early: bool = False) -> _Source:
        """A file about to be read (`carried`: of the previous day; `early`: of the day before that, its ids only);
        hand its OTLP requests to `index`, then `commit` it once read whole."""
        self._files += 1
        number = self._files - 1
        return _Source(file, path, kind, carried or early, number, early, first=self._requests, end=self._requests)

    def index(self, source: _Source, candidate: Candidate) -> None:
        assert candidate.otel is not None and source.end == self._requests, "a file's requests are read in turn"
        line = otel_line(candidate)
        spans, events, errors = walk(candidate.otel, source.file, line, ids_only=True)
        number = self._requests
        check = None
        if self.wanted is not None:
            check = hash((tuple(s.trace_id for s in spans), tuple(e.trace_id for e in events)))
            spans = [s for s in spans if s.trace_id in self.wanted]
            events = [e for e in events if e.trace_id in self.wanted]
        self._index.add(
            number,
            source.number,
            source.carried,
            [s.trace_id for s in spans],
            [e.trace_id for e in events],
            [is_parentless(s.raw) for s in spans],
            source.early,
            check,
        )
        if errors and not source.carried:
            source.errors.append((number, "line" if line is not None else "span", errors))
        self._requests = source.end = number + 1

    def commit(self, source: _Source) -> None:
        """The file was read whole: its requests count (a file whose reading failed is not read in pass 2)."""
        if source.end == source.first:
            return  # no OTLP request: not read again
        for number, unit, errors in source.errors:
            self.rejected += [
                _rejected_candidate(c, source.file, unit, (ENVELOPE, number, k)) for k, c in enumerate(errors)
            ]
        source.errors = []
        self._sources.append(source)
        self._firsts.append(source.first)

    def _dead(self) -> list[tuple[int, int]]:
        """The requests indexed but never committed (their file failed part-way), as [start, end) ranges."""
        dead, at = [], 0
        for source in [*self._sources, None]:
            start = self._requests if source is None else source.first
            if start > at:
                dead.append((at, start))
            at = source.end if source is not None else at
        return dead

    # pass 2
    def finish(self) -> Iterator[ModelledTrace]:
        """The day's traces, each as soon as its last request is read (in that order, not in reading order);
        their rejected rows are added to `rejected`."""
        self._index.seal()
        if not self._sources:
            return
        dead = self._dead()
        carried = self._index.carried_needed(dead) if any(s.carried for s in self._sources) else set()
        upcoming = self._index.traces(dead)  # the day's traces, by their first span or log record
        coming = next(upcoming, None)
        places: dict[str, int] = {}  # the traces open at the request read: their place in reading order
        ends: dict[int, list[str]] = {}  # the open traces by their last request
        held: dict[str, tuple[list[Span], list[LogEvent]]] = {}
        earlier: set[str] = set()  # the open traces with a span or log record two days back
        for source in self._sources:
            if source.carried and source.number not in carried:
                continue  # a file of the previous day without a span of a trace of the day: nothing to take
            checks = self._index.checks(source.first, source.end)
            number = source.first
            for candidate in iter_candidates(source.path, source.kind):
                if number == source.end:
                    break
                if candidate.otel is None:
                    continue
                while coming is not None and coming[0] <= number:  # the traces whose first item is in this request
                    _, last, place, trace_id, early = coming
                    places[trace_id] = place
                    if early:
                        earlier.add(trace_id)
                    ends.setdefault(last, []).append(trace_id)
                    coming = next(upcoming, None)
                spans, events, _ = walk(candidate.otel, source.file, otel_line(candidate))
                if hash((tuple(s.trace_id for s in spans), tuple(e.trace_id for e in events))) != next(checks):
                    raise _changed(source, candidate)
                for position, span in enumerate(spans):
                    if span.trace_id in places:
                        span.carried, span.at = source.carried, (number, position)
                        held.setdefault(span.trace_id, ([], []))[0].append(span)
                for position, event in enumerate(events):
                    event.carried, event.at = source.carried, (number, position)
                    if event.trace_id in places:
                        held.setdefault(event.trace_id, ([], []))[1].append(event)  # type: ignore[index]
                        continue
                    _, error = place_event(event, None)  # no trace of the day has its id
                    if error is not None:
                        self.rejected.append(reject(event, error, (EVENT, *event.at)))
                for trace_id in ends.pop(number, []):
                    spans, events = held.pop(trace_id)
                    modelled = self._trace(trace_id, places.pop(trace_id), spans, events, trace_id in earlier)
                    earlier.discard(trace_id)
                    if modelled is not None:
                        yield modelled
                number += 1
            if number != source.end:
                raise _changed(source, None)
        assert coming is None and not held and not ends, "every trace of the day ends at a request read in pass 2"
        self._index.close()

    def close(self) -> None:
        """Release the index (also when the day's reading stopped early)."""
        self._index.close()

    def _trace(
        self, trace_id: str, index: int, spans: list[Span], events: list[LogEvent], earlier: bool = False
    ) -> ModelledTrace | None:
        assembly = assemble_trace(trace_id, spans, events, self.day, self.next_day, earlier=earlier)
        for k, (stage, item, error) in enumerate(assembly.rejected):
            key = (EVENT, *item.at) if stage == "event" else (_STAGES[stage], index, k)
            self.rejected.append(reject(item, error, key))
        if assembly.trace is None:
            return None
        try:
            return model_trace(assembly.trace, index)
        except Exception as exc:  # an ingest bug must not crash the day nor lose the trace's rows
            trace = assembly.trace
            error = RowError(
                "unexpected_error", f"trace {trace.trace_id} could not be modelled ({type(exc).__name__}: {exc})"
            )
            self.rejected += [reject(item, error, (MODEL, index, k)) for k, item in enumerate(trace_items(trace))]
            return None

    def ids_by_file(self) -> dict[str, list[str]]:
        """The trace ids each file read names in a span or log record (pass 1's index; after `finish`)."""
        files = {source.number: source.file for source in self._sources}
        return {files[number]: ids for number, ids in self._index.ids_by_source().items() if number in files}

    def file_of(self, number: int) -> str:
        """The file of request `number`."""
        return self._sources[bisect_right(self._firsts, number) - 1].file

    def items_at(self, places: set[tuple[int, str, int]]) -> dict[tuple[int, str, int], Span | LogEvent]:
        """The spans and log records at `places` ((request, "span" | "event", position)), read again (pass 3:
        the rows of a trace found a duplicate only once the day is read)."""
        requests = {number for number, _, _ in places}
        found: dict[tuple[int, str, int], Span | LogEvent] = {}
        for source in self._sources:
            if not any(source.first <= number < source.end for number in requests):
                continue
            number = source.first
            for candidate in iter_candidates(source.path, source.kind):
                if number == source.end:
                    break
                if candidate.otel is None:
                    continue
                if number in requests:
                    spans, events, _ = walk(candidate.otel, source.file, otel_line(candidate))
                    items: list[tuple[str, int, Span | LogEvent]] = [("span", i, s) for i, s in enumerate(spans)]
                    items += [("event", i, e) for i, e in enumerate(events)]
                    for kind, position, item in items:
                        if (number, kind, position) in places:
                            found[(number, kind, position)] = item
                number += 1
        return found


def _changed(source: _Source, candidate: Candidate | None) -> RuntimeError:
    where = f"{source.file} line {candidate.line}" if candidate is not None else source.file
    return RuntimeError(
        f"{where} changed while the day was being read (its OTLP requests differ between the two passes of the "
        "ingest); nothing was written: read the day again once the file is complete"
    )


def trace_items(trace: Trace) -> list[Span | LogEvent]:
    return [*trace.spans, *trace.events]


def model_trace(trace: Trace, index: int = 0) -> ModelledTrace:
    built = trace_record(trace)
    root = trace.root
    return ModelledTrace(built["record"], built["extras"], trace_items(trace), root.file, root.line, root.unit, index)


def reject(item: Span | LogEvent, error: RowError, key: tuple[int, ...] = ()) -> Rejected:
    return Rejected(item.file, item.line, item.unit, error, dumps(item.raw), key)


def _rejected_candidate(candidate: Candidate, file: str, unit: str, key: tuple[int, ...]) -> Rejected:
    assert candidate.error is not None
    return Rejected(file, candidate.line, unit, candidate.error, candidate.raw, key)
