"""A day of OTLP traces is read in two passes (ingest/otel/day.py): it holds the traces still open at a request,
not every span of the day, and gives the rows a day read at once gave."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pytest

from eval_platform.ingest import day_spill, read_trace_day
from eval_platform.ingest.otel import day_index
from eval_platform.ingest.otel.day import OtelDay
from eval_platform.ingest.traces import stream_trace_day
from eval_platform_tests.ingest.test_otel_recorded import FIXTURES, recording_day
from tools.perf.otel_ingest import DAY, build_day


def test_a_day_is_read_without_holding_every_span(tmp_path):
    # 8,000 spans of the recorded instrumentations (3,200 traces, spans of a trace on several lines) in 4 files.
    # Reading the whole day before assembling it held ~9x the files' bytes in Python objects; now the day holds
    # its open traces and a chunk of rows.
    written, _ = build_day(tmp_path, 8_000, 4)
    size = sum(p.stat().st_size for p in (tmp_path / "traces" / DAY).iterdir())
    tracemalloc.start()
    try:
        day = read_trace_day(tmp_path, DAY)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (day.spans.height, day.quarantine.height) == (written, 0)
    assert day.traces["span_count"].sum() == written
    assert peak < 3 * size, f"Python heap peak {peak / 1e6:.1f} MB for {size / 1e6:.1f} MB of files"


def _python_heap_peak_of_reading(root: Path) -> int:
    """The Python heap's peak while a day is read (both passes, and the spill's whole-day work), before its rows are
    handed out."""
    tracemalloc.start()
    try:
        with stream_trace_day(root, DAY, chunk_rows=100):
            return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_index_of_a_day_does_not_grow_with_its_traces(tmp_path, monkeypatch):
    # Pass 1 kept a Python object per trace id (and pass 2 a dict of every trace id by its last request): 2.3 MB more
    # at 8,000 traces than at 800, ~250 bytes a trace, 1.22 GB at a million spans. The index is now on disk
    # (day_index.py; here in chunks of 500 observations) and pass 2 holds the traces open at a request.
    monkeypatch.setattr(day_index, "CHUNK_ROWS", 500)
    monkeypatch.setattr(day_index, "STREAM_ROWS", 500)
    warm = tmp_path / "warm"  # imports and first-use caches are not the day's
    build_day(warm, 200, 2)
    _python_heap_peak_of_reading(warm)
    peaks = []
    for spans in (2_000, 20_000):
        build_day(tmp_path / str(spans), spans, 4)
        peaks.append(_python_heap_peak_of_reading(tmp_path / str(spans)))
    assert peaks[1] - peaks[0] < 1_000_000, f"Python heap peaks {peaks[0] / 1e6:.2f} / {peaks[1] / 1e6:.2f} MB"


def _arrow_peak_of_handing_out(root: Path) -> int:
    """The most memory Arrow held while a day's trace and span rows were handed out, a frame at a time."""
    peak = 0
    with stream_trace_day(root, DAY, chunk_rows=100) as rows:
        for _ in rows.traces():  # the spans are in their trace's row
            peak = max(peak, pa.total_allocated_bytes())
    return peak


def test_the_rows_are_handed_out_without_holding_the_day(tmp_path, monkeypatch):
    # Reading the spill files back a batch at a time with pyarrow's pre-buffering kept every row group read so far
    # (~7 MB more per 10,000 trace rows, 0.3 GB at a million spans, where the step peaked).
    monkeypatch.setattr(day_spill, "BATCH_ROWS", 200)
    peaks = []
    for spans in (2_000, 20_000):
        build_day(tmp_path / str(spans), spans, 4)
        peaks.append(_arrow_peak_of_handing_out(tmp_path / str(spans)))
    assert peaks[1] < 2 * peaks[0], f"Arrow's peaks {peaks[0] / 1e6:.2f} / {peaks[1] / 1e6:.2f} MB"


def _genai_day(root: Path, logs_name: str) -> Path:
    folder = root / "traces" / recording_day("genai")
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "genai" / "traces.jsonl", folder / "traces.jsonl")
    shutil.copy(FIXTURES / "genai" / "logs.jsonl", folder / logs_name)
    return folder


def test_traces_ending_in_a_later_file_keep_the_order_of_their_root(tmp_path):
    # Log records read after the spans (a file sorted after traces.jsonl): every trace ends in the log file, in
    # the log file's order, not in its root's; the rows are still in file/line order of the root span.
    _genai_day(tmp_path / "first", "a-logs.jsonl")
    _genai_day(tmp_path / "last", "z-logs.jsonl")
    first = read_trace_day(tmp_path / "first", recording_day("genai"))
    last = read_trace_day(tmp_path / "last", recording_day("genai"))
    assert last.quarantine.height == first.quarantine.height == 0
    assert last.traces.height == 12
    assert last.traces["source_line"].to_list() == sorted(last.traces["source_line"].to_list())
    assert last.traces.equals(first.traces)
    assert last.spans.equals(first.spans)
    order = {trace_id: i for i, trace_id in enumerate(last.traces["trace_id"])}
    assert last.spans["trace_id"].to_list() == sorted(last.spans["trace_id"].to_list(), key=order.__getitem__)


def _between_passes(monkeypatch, change) -> None:
    finish = OtelDay.finish

    def changed_then_finish(self):
        change()
        yield from finish(self)

    monkeypatch.setattr(OtelDay, "finish", changed_then_finish)


def test_an_exporter_appending_while_the_day_is_read_changes_nothing(tmp_path, monkeypatch):
    folder = _genai_day(tmp_path, "logs.jsonl")
    day = recording_day("genai")
    before = read_trace_day(tmp_path, day)
    extra = json.loads((FIXTURES / "genai" / "traces.jsonl").read_text().splitlines()[0])
    extra["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "f" * 32

    def append() -> None:
        with (folder / "traces.jsonl").open("a") as handle:
            handle.write(json.dumps(extra) + "\n")

    _between_passes(monkeypatch, append)
    during = read_trace_day(tmp_path, day)
    assert during.traces.equals(before.traces)
    assert during.spans.equals(before.spans)
    assert during.counts == before.counts


def test_a_file_rewritten_while_the_day_is_read_is_an_error_not_a_wrong_day(tmp_path, monkeypatch):
    folder = _genai_day(tmp_path, "logs.jsonl")
    path = folder / "traces.jsonl"

    def rewrite() -> None:
        lines = path.read_text().splitlines()
        path.write_text("\n".join(reversed(lines)) + "\n")

    _between_passes(monkeypatch, rewrite)
    with pytest.raises(RuntimeError, match=r"traces/.*/traces\.jsonl line 1 changed while the day was being read"):
        read_trace_day(tmp_path, recording_day("genai"))
