"""The demo's agent traces generator: a named run of the agent app under real instrumentations, recorded against
the local judge and moved onto a sample day by one constant offset, ingests whole on that day."""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from eval_platform.ingest.traces import read_trace_day
from tools.sample_data import agent_traces
from tools.sample_data.agent_traces import build_agent_traces, earliest_start_ns, shift_timestamps

FIXTURES = Path(__file__).parents[1] / "fixtures" / "otel"
DAY = "2026-11-20"
TIME_FIELD = re.compile(rb'("(?:start|end|observed)?(?:Time|time)UnixNano":")\d+"')
ISO = re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.(\d+)Z")


def test_a_shift_moves_every_timestamp_by_the_offset_and_nothing_else():
    recorded = (FIXTURES / "langfuse" / "traces.jsonl").read_bytes()
    target = int(datetime(2026, 11, 20, 9, tzinfo=UTC).timestamp()) * 10**9
    offset = target - earliest_start_ns(recorded)
    shifted = shift_timestamps(recorded, offset)
    assert earliest_start_ns(shifted) == target
    # with the time fields and ISO instants blanked, the files are the same bytes
    blank = lambda data: ISO.sub(b"ISO", TIME_FIELD.sub(rb"\1T", data))  # noqa: E731
    assert blank(shifted) == blank(recorded) and shifted != recorded
    # each span keeps its duration, each ISO instant (Langfuse's completion_start_time) moves by the offset
    before = [int(n) for n in re.findall(rb'"startTimeUnixNano":"(\d+)"', recorded)]
    after = [int(n) for n in re.findall(rb'"startTimeUnixNano":"(\d+)"', shifted)]
    assert [a - b for a, b in zip(after, before, strict=True)] == [offset] * len(before)
    instants = [datetime.fromisoformat(m.group(0).decode()) for m in ISO.finditer(recorded)]
    moved = [datetime.fromisoformat(m.group(0).decode()) for m in ISO.finditer(shifted)]
    # (to the instant's own precision, microseconds: less than 1 us off the offset in nanoseconds)
    assert instants and all(
        abs((m - i) / timedelta(microseconds=1) * 1000 - offset) < 1000 for i, m in zip(instants, moved, strict=True)
    )
    # shifted back, the nanosecond fields are the recording's again (the ISO instants to within their precision)
    assert ISO.sub(b"ISO", shift_timestamps(shifted, -offset)) == ISO.sub(b"ISO", recorded)


def test_a_recorded_day_lands_whole_on_its_day_with_its_own_sessions_and_ids(tmp_path, monkeypatch):
    monkeypatch.setattr(agent_traces, "INSTRUMENTATIONS", ("genai", "langfuse"))
    manifest = build_agent_traces(tmp_path, (DAY,))
    folder = tmp_path / "traces" / DAY
    names = ["agent_genai.jsonl.gz", "agent_genai_logs.jsonl.gz", "agent_langfuse.jsonl.gz"]
    assert sorted(p.name for p in folder.iterdir()) == names
    assert json.loads((tmp_path / "agent_recordings.json").read_text()) == manifest
    for name in names:  # gzip as written once: no timestamp or file name in the header
        assert gzip.decompress((folder / name).read_bytes())
        assert (folder / name).read_bytes()[4:8] == b"\x00\x00\x00\x00"
    day = read_trace_day(tmp_path, DAY)
    assert day.quarantine.height == 0
    traces = day.traces
    assert traces.height == 24 and traces["partial_reason"].is_null().all()
    for name, hour_minute in (("genai", "09:00"), ("langfuse", "16:45")):
        ids = {t for ids in manifest["days"][DAY][name]["scenarios"].values() for t in ids}
        mine = traces.filter(pl.col("trace_id").is_in(list(ids)))
        assert mine.height == 12 and mine["timestamp"].min().strftime("%Y-%m-%d %H:%M:%S") == f"{DAY} {hour_minute}:00"
        # a named run: its own trace ids (not the test recordings') and sessions no other run shares
        fixture = json.loads((FIXTURES / name / "manifest.json").read_text())["scenarios"]
        assert not ids & {t for ids in fixture.values() for t in ids}
        sessions = set(mine["session_id"].drop_nulls())
        assert sessions == {f"session-multi-turn-1-{DAY}-{name}", f"session-agent-1-{DAY}-{name}"}
