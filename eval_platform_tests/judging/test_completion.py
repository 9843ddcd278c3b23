"""The completion rule's clock (`judging.completion`), on real files read by the real ingest: the trace's own span
times, capped at its file's arrival (modification time), and a day long past complete whatever its times say."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import polars as pl

from eval_platform.ingest import read_trace_day
from eval_platform.judging.completion import Completion, Waiting
from eval_platform.judging.config import EvaluatorConfig
from eval_platform_tests.defs.test_completion import TRACE, _agent_run, _write_spans

EVALUATOR = EvaluatorConfig(name="q", mode="score", model="openai/mock", prompt="{{output}}")  # quiet 60 s


def _held(root, day: str, now: datetime) -> tuple[list[str], Waiting]:
    traces = read_trace_day(root, day).traces
    assert traces.height == 1, traces
    waiting = Waiting()
    kept = pl.concat(list(Completion(root, EVALUATOR, day, now).hold_back([traces], None, waiting)))
    return kept["trace_id"].to_list(), waiting


def test_an_application_clock_running_ahead_delays_a_trace_by_the_quiet_period_after_its_file_arrived(tmp_path):
    now = datetime.now(UTC)
    day = now.date().isoformat()
    # the spans say the run ends in an hour (a clock an hour fast); the file arrived two minutes ago
    _write_spans(tmp_path, day, "a.jsonl", _agent_run(now + timedelta(hours=1)), arrived=now - timedelta(minutes=2))
    assert _held(tmp_path, day, now)[0] == [TRACE]
    # arrived 30 s ago: it waits for the rest of its 60 s, not for the hour its clock says
    _write_spans(tmp_path, day, "a.jsonl", _agent_run(now + timedelta(hours=1)), arrived=now - timedelta(seconds=30))
    kept, waiting = _held(tmp_path, day, now)
    assert kept == [] and waiting.traces == 1
    assert waiting.complete_at is not None
    assert abs(waiting.complete_at - (now + timedelta(seconds=30))) < timedelta(milliseconds=1)


def test_a_backfilled_old_day_waits_for_nothing_though_its_files_were_just_written(tmp_path):
    now = datetime.now(UTC)
    _write_spans(tmp_path, "2026-11-10", "a.jsonl", _agent_run(datetime(2026, 11, 10, 9, 30, tzinfo=UTC)))
    assert _held(tmp_path, "2026-11-10", now) == ([TRACE], Waiting())


def test_a_root_that_has_not_ended_waits_until_its_day_is_long_past(tmp_path):
    now = datetime.now(UTC)
    day = (now - timedelta(days=1)).date().isoformat()
    spans = _agent_run(now - timedelta(hours=1))
    spans[0]["endTimeUnixNano"] = "0"  # the root span exported while still running
    _write_spans(tmp_path, day, "a.jsonl", spans, arrived=now - timedelta(hours=1))
    kept, waiting = _held(tmp_path, day, now)
    assert kept == [] and waiting.complete_at == datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(days=2)
    assert _held(tmp_path, day, waiting.complete_at)[0] == [TRACE]


def test_a_row_read_whole_is_complete_when_read(tmp_path):
    now = datetime.now(UTC)
    day = now.date().isoformat()
    (tmp_path / "traces" / day).mkdir(parents=True)
    row = {"trace_id": "t1", "timestamp": now.isoformat(), "input": "q", "output": "a"}
    (tmp_path / "traces" / day / "rows.jsonl").write_text(json.dumps(row) + "\n")
    assert _held(tmp_path, day, now) == (["t1"], Waiting())


def test_a_pair_waits_whole_while_one_of_its_candidates_is_not_finished(tmp_path):
    from eval_platform.record_fields import field_text

    now = datetime.now(UTC)
    day = now.date().isoformat()
    spans = []
    hour_ago = now - timedelta(hours=1)
    for trace_id, item, ended in (("a" * 32, "x", hour_ago), ("b" * 32, "x", now), ("c" * 32, "y", hour_ago)):
        for span in _agent_run(ended):
            span["traceId"] = trace_id
            if not span["parentSpanId"]:  # the root names the item the pair is made on
                span["attributes"].append({"key": "eval.metadata.item", "value": {"stringValue": item}})
            spans.append(span)
    _write_spans(tmp_path, day, "a.jsonl", spans, arrived=now)
    traces = read_trace_day(tmp_path, day).traces
    assert traces.height == 3
    waiting = Waiting()
    completion = Completion(tmp_path, EVALUATOR, day, now)
    kept = pl.concat(list(completion.hold_back([traces], lambda t: field_text(t, "metadata.item"), waiting)))
    assert kept["trace_id"].to_list() == ["c" * 32]  # not "a" alone, to be skipped no_pair
    assert waiting.traces == 2
