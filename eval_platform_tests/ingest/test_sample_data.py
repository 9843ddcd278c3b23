"""The committed sample data under data/ ingests as documented (read only; nothing is written): the PandaLM traces
and the agent app's traces recorded under the real instrumentations (`sample_data.agent_traces`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from eval_platform.ingest import read_trace_day

DATA = Path(__file__).parents[2] / "data"
DAYS = [f"2026-11-{day:02d}" for day in range(9, 16)]
BAD_FILE = "traces/2026-11-12/zz_bad_rows.jsonl"
NOTES_FILE = "traces/2026-11-12/notes.txt"
OTLP_FILE = "traces/2026-11-13/otel_genai_spans.json"
AGENT_PROJECT = "agent-demo-app"  # the agent app's service.name
INSTRUMENTATIONS = ["genai", "genai_no_content", "openllmetry", "openinference", "langfuse"]
AGENT_TRACES_PER_DAY = 12 * len(INSTRUMENTATIONS)  # the app's scenarios make 12 traces per run
EXPECTED_BAD_ROWS = [
    (1, "invalid_json"),
    (2, "missing_field:trace_id"),
    (3, "missing_field:timestamp"),
    (4, "invalid_timestamp"),
    (5, "invalid_type:latency_ms"),
    (6, "negative_value:prompt_tokens"),
    (7, "duplicate_trace_id"),
    (8, "not_an_object"),
    (9, "invalid_type:metadata"),
    (10, "invalid_type:trace_id"),
]


@pytest.fixture(scope="module")
def days():
    return {day: read_trace_day(DATA, day) for day in DAYS}


@pytest.fixture(scope="module")
def all_traces(days) -> pl.DataFrame:
    return pl.concat([day.traces for day in days.values()], how="diagonal_relaxed")


@pytest.fixture(scope="module")
def traces(all_traces) -> pl.DataFrame:
    """The PandaLM traces."""
    return all_traces.filter(pl.col("project_id") == "pandalm-demo")


@pytest.fixture(scope="module")
def agent(all_traces) -> pl.DataFrame:
    """The agent app's traces."""
    return all_traces.filter(pl.col("project_id") == AGENT_PROJECT)


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((DATA / "agent_recordings.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def items() -> dict[int, dict]:
    return {
        item["idx"]: item
        for item in json.loads((DATA / "sources" / "pandalm" / "testset-v1.json").read_text(encoding="utf-8"))
    }


def test_all_1998_pandalm_traces_are_accepted(days, traces, all_traces):
    assert traces.height == 1998
    assert traces["trace_id"].n_unique() == 1998
    assert all_traces.height == 1998 + AGENT_TRACES_PER_DAY * len(DAYS)  # no third kind of trace
    for day in days.values():
        assert day.counts["read"] == day.counts["accepted"] + day.counts["quarantined"]
        assert (day.traces["date"] == day.day).all()
        assert (day.traces["timestamp"].dt.strftime("%Y-%m-%d") == day.day).all()


def test_every_item_has_exactly_its_two_traces_on_one_day(traces, items):
    rows = traces.select("trace_id", "date", "model", "variant", "metadata").to_dicts()
    per_item: dict[str, list[dict]] = {}
    for row in rows:
        per_item.setdefault(json.loads(row["metadata"])["item_id"], []).append(row)
    assert len(per_item) == 999
    for idx, item in items.items():
        pair = per_item[f"pandalm-{idx:04d}"]
        first, second = item["cmp_key"].split("_")
        assert sorted(row["trace_id"] for row in pair) == sorted(
            [f"pandalm-{idx:04d}-{first}", f"pandalm-{idx:04d}-{second}"]
        )
        assert len({row["date"] for row in pair}) == 1
        assert all(row["model"] == row["variant"] == row["trace_id"][len("pandalm-0000-") :] for row in pair)


def test_inputs_and_outputs_are_the_pandalm_texts_in_every_format(traces, items):
    formats = Counter()
    for row in traces.iter_rows(named=True):
        idx = int(row["trace_id"][len("pandalm-") : len("pandalm-0000")])
        item = items[idx]
        first, _ = item["cmp_key"].split("_")
        response = item["response1"] if row["model"] == first else item["response2"]
        expected_input = item["instruction"] if not item["input"] else item["instruction"] + "\n\n" + item["input"]
        assert row["input"] == expected_input, row["trace_id"]
        assert row["output"] == (response if isinstance(response, str) else str(response)), row["trace_id"]
        assert (row["project_id"], row["experiment_id"]) == ("pandalm-demo", "pandalm-model-comparison")
        assert (
            row["latency_ms"] > 0
            and row["prompt_tokens"] > 0
            and row["completion_tokens"] >= 0
            and 0 < row["cost_usd"] < 0.01
        )
        formats[Path(row["source_file"]).suffix] += 1
    assert set(formats) == {".jsonl", ".csv", ".parquet", ".json"}


def test_only_the_bad_rows_file_and_the_notes_are_quarantined(days):
    quarantine = pl.concat([day.quarantine for day in days.values()])
    assert set(quarantine["file"]) == {BAD_FILE, NOTES_FILE}
    bad = quarantine.filter(pl.col("file") == BAD_FILE).sort("line")
    assert list(zip(bad["line"], bad["reason"], strict=True)) == EXPECTED_BAD_ROWS
    assert all(detail.startswith(f"{BAD_FILE} line ") for detail in bad["detail"])
    notes = quarantine.filter(pl.col("file") == NOTES_FILE).row(0, named=True)
    assert (notes["line"], notes["reason"]) == (None, "unsupported_file_type")
    assert quarantine.height == len(EXPECTED_BAD_ROWS) + 1


def test_the_otlp_file_maps_with_spans_and_context(days):
    otlp = days["2026-11-13"].traces.filter(pl.col("source_file") == OTLP_FILE)
    assert otlp.height == 32
    assert otlp["spans"].is_not_null().all()
    with_context = otlp.filter(pl.col("context").is_not_null())
    assert with_context.height >= 8
    for row in with_context.iter_rows(named=True):
        assert json.loads(row["context"]) and row["input"].endswith(json.loads(row["context"])[0])
    agent_traces = 0
    for row in otlp.iter_rows(named=True):
        spans = json.loads(row["spans"])
        # the span that answers: the agent span, else the chat span (an HTTP root span has no operation)
        root = next(s for s in spans if s["operation"] in ("invoke_agent", "chat"))
        assert root["input"] == row["input"] and root["output"] == row["output"]
        assert any(s["name"] == f"chat {row['model']}" and s["operation"] == "chat" for s in spans)
        if root["operation"] == "invoke_agent":
            agent_traces += 1
            child = next(s for s in spans if s["name"] == f"chat {row['model']}")
            assert child["parent_span_id"] == root["span_id"]
            assert child["input"].startswith("system: ") and child["input"].endswith(row["input"])
    assert agent_traces >= 2


def test_annotations_and_judgments_refer_to_sample_traces(traces):
    trace_ids = set(traces["trace_id"])
    annotations = [
        json.loads(line)
        for line in (DATA / "annotations" / "pandalm_human.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(annotations) == 2997
    assert Counter(row["annotator"] for row in annotations) == {"annotator1": 999, "annotator2": 999, "annotator3": 999}
    assert {row["label"] for row in annotations} == {0, 1, 2}
    for name, source, verdicts in (
        ("pandalm_gpt-3.5-turbo.jsonl", "gpt-3.5-turbo (PandaLM study)", {"1", "2", "Tie", "garbage"}),
        ("pandalm_pandalm-7b.jsonl", "pandalm-7b (PandaLM study)", {"0", "1", "2"}),
    ):
        rows = [json.loads(line) for line in (DATA / "judgments" / name).read_text(encoding="utf-8").splitlines()]
        assert len(rows) == 999 and {row["source"] for row in rows} == {source}
        assert {row["verdict"] for row in rows} == verdicts
        annotations += rows
    for row in annotations:
        assert row["response1_trace_id"] in trace_ids and row["response2_trace_id"] in trace_ids


# ---------------------------------------------------------------------------------------------- agent traces


def test_the_agent_traces_of_every_day_ingest_whole(days, agent, manifest):
    """Each day: one recording per instrumentation, every trace the recorder started is there, whole (no
    quarantine row, no partial trace), on its day, with its spans; the spans view shows them too."""
    assert manifest["instrumentations"] == INSTRUMENTATIONS
    for day, result in days.items():
        mine = agent.filter(pl.col("date") == day)
        recorded = manifest["days"][day]
        started = {t for r in recorded.values() for ids in r["scenarios"].values() for t in ids}
        assert len(started) == mine.height == AGENT_TRACES_PER_DAY
        assert set(mine["trace_id"]) == started
        assert mine["partial_reason"].is_null().all() and mine["span_count"].min() >= 1
        assert (mine["timestamp"].dt.strftime("%Y-%m-%d") == day).all()
        files = {f"traces/{day}/{name}" for r in recorded.values() for name in r["files"].values()}
        assert all(result.counts["files"][f]["quarantined"] == 0 for f in files)
        assert not set(result.quarantine["file"]) & files
        spans = result.spans.filter(pl.col("trace_id").is_in(list(started)))
        assert spans.height == mine["span_count"].sum()
        assert set(spans["convention"]) >= {"genai", "openllmetry", "openinference", "langfuse"}


def test_the_agent_traces_hold_sessions_tool_loops_errors_and_traces_without_content(agent, manifest):
    for day in DAYS:
        mine = agent.filter(pl.col("date") == day)
        recorded = manifest["days"][day]
        # two conversations per instrumentation: the 3-turn chat and the 2-turn agent, each its own session
        sessions = mine.filter(pl.col("session_id").is_not_null()).group_by("session_id").len()
        assert sessions.height == 2 * len(INSTRUMENTATIONS)
        assert sorted(sessions["len"].to_list()) == [2] * len(INSTRUMENTATIONS) + [3] * len(INSTRUMENTATIONS)
        assert all(day in session for session in sessions["session_id"])  # never shared across days
        for name, recording in recorded.items():
            by_id = {row["trace_id"]: row for row in mine.iter_rows(named=True)}
            agent_turn = by_id[recording["scenarios"]["agent"][0]]
            failed = by_id[recording["scenarios"]["http_500"][0]]
            assert failed["error"] is True, (day, name)
            calls = json.loads(agent_turn["tool_calls"])
            assert [call["name"] for call in calls] == ["get_weather"], (day, name)
            if name == "genai_no_content":  # the instrumentation's default: no message text anywhere
                assert agent_turn["input"] is None and agent_turn["output"] is None
            else:  # the agent's final answer uses the tool's result
                assert "get_weather returned" in agent_turn["output"], (day, name)
