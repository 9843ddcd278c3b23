"""The streaming trace ingest (a day spilled a chunk at a time, ordered and deduplicated out of core) gives exactly
the rows, order, quarantine and counts of the day read at once (`trace_day_reference.py`, the reader before it
streamed), on the committed sample data, the recorded instrumentations, and generated days whose traces straddle
the chunks."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from eval_platform.ingest import traces as traces_module
from eval_platform.ingest.otel import day_index
from eval_platform.ingest.readers import iter_candidates
from eval_platform.ingest.traces import TraceDay, stream_trace_day
from eval_platform.schemas import QUARANTINE_SCHEMA, TRACE_SCHEMA, empty_frame
from eval_platform_tests.ingest import trace_day_reference
from eval_platform_tests.ingest.test_otel_recorded import ALL, FIXTURES, export_files, recording_day
from eval_platform_tests.ingest.test_sample_data import DATA, DAYS
from tools.perf.otel_ingest import DAY, build_day

NOW = datetime(2026, 12, 1, tzinfo=UTC)
PREVIOUS = "2026-11-22"  # the day before perf/otel_ingest's DAY


def streamed(root: Path, day: str, chunk_rows: int) -> TraceDay:
    with stream_trace_day(root, day, now=NOW, chunk_rows=chunk_rows) as rows:
        frames = {
            name: (pl.concat(found) if (found := list(frames)) else empty_frame(schema))
            for name, frames, schema in (
                ("traces", rows.traces(), TRACE_SCHEMA),
                ("quarantine", rows.quarantine(), QUARANTINE_SCHEMA),
            )
        }
        return TraceDay(**frames, files=rows.files, counts=rows.counts, day=day)


def assert_same_day(root: Path, day: str, chunk_rows: int) -> TraceDay:
    before = trace_day_reference.read_trace_day(root, day, now=NOW)
    now = streamed(root, day, chunk_rows)
    assert_frame_equal(now.traces, before.traces)
    assert_frame_equal(now.spans, before.spans)
    assert_frame_equal(now.quarantine, before.quarantine)
    assert (now.files, now.counts) == (before.files, before.counts)
    return now


@pytest.mark.parametrize("day", DAYS)
@pytest.mark.parametrize("chunk_rows", [3, 1_000])
def test_the_sample_days_stream_to_the_rows_of_a_day_read_at_once(day, chunk_rows):
    # every format, bad rows of every kind, a repeated trace id, a file that is not an export, OTLP over midnight
    assert_same_day(DATA, day, chunk_rows)


@pytest.mark.parametrize("folder", ALL)
def test_the_recorded_instrumentations_stream_to_the_same_rows(tmp_path, folder):
    day = recording_day(folder)
    target = tmp_path / "traces" / day
    target.mkdir(parents=True)
    for name in export_files(folder):
        shutil.copy(FIXTURES / folder / name, target / name)
    assert_same_day(tmp_path, day, 5)


def _plain(i: int, day: str, **extra: object) -> str:
    row = {"trace_id": f"t-{i}", "timestamp": f"{day}T{i % 24:02d}:00:00Z", "input": f"q{i}", "output": f"a{i}"}
    return json.dumps(row | extra)


def test_a_generated_day_whose_traces_straddle_chunks_streams_to_the_same_rows(tmp_path):
    # OTLP traces spread over lines and files, ending out of their roots' order; plain rows repeating ids (within a
    # file, across files, and an OTLP trace's id), bad rows, a file with no text, a file that is not an export.
    written, _ = build_day(tmp_path, 3_000, 3)
    folder = tmp_path / "traces" / DAY
    lines = [_plain(i, DAY) for i in range(40)] + [_plain(5, DAY), "{not json", _plain(7, DAY, latency_ms=-1)]
    (folder / "a-plain.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "b-again.jsonl").write_text("\n".join(_plain(i, DAY, output="later") for i in range(30, 45)) + "\n")
    (folder / "c-no-text.csv").write_text("trace_id,timestamp\nx1,2026-11-23T01:00:00Z\nx2,2026-11-23T02:00:00Z\n")
    (folder / "notes.txt").write_text("not an export")
    first_otel = json.loads((folder / "otel-00.jsonl").read_text().splitlines()[0])
    otel_trace = first_otel["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    (folder / "d-clash.jsonl").write_text(json.dumps({**json.loads(_plain(1, DAY)), "trace_id": otel_trace}) + "\n")
    day = assert_same_day(tmp_path, DAY, 7)
    reasons = day.quarantine["reason"].value_counts().sort("reason").rows()
    assert dict(reasons)["duplicate_trace_id"] >= 1 + 10
    assert dict(reasons)["missing_field:input_output"] == 2
    assert day.spans.height + day.quarantine.filter(pl.col("file").str.contains("otel-")).height == written


_ID = re.compile(r'"(traceId|spanId|parentSpanId)":"([0-9a-f]{16}|[0-9a-f]{32})"')


def _with_ids(line: str, replica: int) -> str:
    """A recorded line with its ids made those of `replica` (perf/otel_ingest.build_day's scheme)."""
    return _ID.sub(lambda m: f'"{m.group(1)}":"{m.group(2)[:-8]}{replica:08x}"', line)


def _rooted(line: str) -> str:
    """A line of OTLP spans with every span made a root (its parent id dropped)."""
    request = json.loads(line)
    for resource in request.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                span.pop("parentSpanId", None)
    return json.dumps(request)


def _spread_day(root: Path) -> None:
    """OTLP lines of the recorded instrumentations (build_day) and the GenAI log records of the same traces, dealt
    over 3 files of the day and 2 of the previous day, so a trace's spans and log records are in several files of
    both days (roots among them: traces rooted yesterday with late spans today, orphan log records), plus a file of
    the previous day holding none of the day's traces, a broken line and a broken envelope."""
    _, copies = build_day(root / "built", 2_000, 1)
    lines = (root / "built" / "traces" / DAY / "otel-00.jsonl").read_text().splitlines()
    logs = (FIXTURES / "genai" / "logs.jsonl").read_text().splitlines()
    lines += [_with_ids(line, replica) for replica in range(copies) for line in logs]
    shutil.rmtree(root / "built")
    today, yesterday = root / "traces" / DAY, root / "traces" / PREVIOUS
    today.mkdir(parents=True)
    yesterday.mkdir(parents=True)
    for i, line in enumerate(lines):
        target = yesterday / f"carried-{i % 2}.jsonl" if i % 9 == 4 else today / f"part-{i % 3}.jsonl"
        with target.open("a") as out:
            out.write(line + "\n")
    # no id of the day's traces, each trace rooted there (a trace of the previous day without a root is the day's:
    # a partial trace, missing_root, which the in-memory index did not know of)
    own = [_rooted(_with_ids(line, 0xFFFF0000 + i)) for i, line in enumerate(lines[:6])]
    (yesterday / "only-yesterday.jsonl").write_text("\n".join(own) + "\n")
    with (today / "part-1.jsonl").open("a") as out:  # a broken envelope, a span without its trace id
        out.write('{"resourceSpans": 5}\n{"resourceSpans": [{"scopeSpans": [{"spans": [{}]}]}]}\n')


def test_a_day_spread_over_files_and_the_previous_day_gives_the_rows_of_the_in_memory_index(tmp_path, monkeypatch):
    # The index on disk (ingest/otel/day_index.py), written in row groups of 5 observations, against the index that
    # kept every trace id in memory (otel_day_reference.py): the same traces, spans, quarantine and counts.
    monkeypatch.setattr(day_index, "CHUNK_ROWS", 5)
    monkeypatch.setattr(day_index, "STREAM_ROWS", 3)
    _spread_day(tmp_path)
    day = assert_same_day(tmp_path, DAY, 7)
    carried = day.spans.filter(pl.col("source_file").str.contains(PREVIOUS))
    assert carried.height > 50 and day.traces.height > 500
    assert not day.spans["source_file"].str.contains("only-yesterday").any()
    reasons = set(day.quarantine["reason"])
    assert {"late_span", "orphan_event", "invalid_otlp:resourceSpans", "invalid_otlp:traceId"} <= reasons, reasons
    assert day.counts["read"] == day.counts["accepted"] + day.counts["quarantined"]


def test_a_file_whose_reader_fails_part_way_leaves_no_trace_in_the_index(tmp_path, monkeypatch):
    # A reader bug part-way through a file makes the file one `unexpected_error` row: the OTLP requests read from it
    # before the failure (already written to the index) count for no trace, as with the index in memory.
    monkeypatch.setattr(day_index, "CHUNK_ROWS", 5)
    _spread_day(tmp_path)

    def failing(path: Path, kind: str):
        for number, candidate in enumerate(iter_candidates(path, kind)):
            if path.name == "part-1.jsonl" and number == 40:
                raise ValueError("a reader bug")
            yield candidate

    monkeypatch.setattr(traces_module, "iter_candidates", failing)
    monkeypatch.setattr(trace_day_reference, "iter_candidates", failing)
    day = assert_same_day(tmp_path, DAY, 7)
    failed = day.quarantine.filter(pl.col("reason") == "unexpected_error")
    assert failed["file"].to_list() == [f"traces/{DAY}/part-1.jsonl"]
    assert not day.spans["source_file"].str.contains("part-1").any()
