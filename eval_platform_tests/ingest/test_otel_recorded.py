"""Real instrumentation output (eval_platform_tests/fixtures/otel: recorded by running each library against the
local judge, as the Collector's file exporter writes it) becomes whole traces, whatever the convention."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from eval_platform.ingest import read_trace_day
from eval_platform.schemas import SPAN_SCHEMA

FIXTURES = Path(__file__).parents[1] / "fixtures" / "otel"
WITH_CONTENT = ["genai", "genai_events", "openllmetry", "openinference", "langfuse"]
ALL = [*WITH_CONTENT, "genai_no_content"]


def recorded_lines(folder: str, name: str) -> list[bytes]:
    data = (FIXTURES / folder / name).read_bytes()
    return (gzip.decompress(data) if name.endswith(".gz") else data).splitlines()


def export_files(folder: str) -> list[str]:
    return sorted(p.name for p in (FIXTURES / folder).iterdir() if p.name != "manifest.json")


def recording_day(folder: str) -> str:
    from datetime import UTC, datetime

    first = json.loads(recorded_lines(folder, export_files(folder)[-1])[0])
    span = first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return datetime.fromtimestamp(int(span["startTimeUnixNano"]) / 1e9, UTC).strftime("%Y-%m-%d")


def scenarios(folder: str) -> dict[str, list[str]]:
    return json.loads((FIXTURES / folder / "manifest.json").read_text())["scenarios"]


def ingest_recording(root: Path, folder: str):
    day = recording_day(folder)
    target = root / "traces" / day
    target.mkdir(parents=True)
    for name in export_files(folder):
        shutil.copy(FIXTURES / folder / name, target / name)
    return read_trace_day(root, day)


def by_scenario(day, folder: str) -> dict[str, list[dict]]:
    rows = {row["trace_id"]: row for row in day.traces.to_dicts()}
    return {name: [rows[trace_id] for trace_id in ids] for name, ids in scenarios(folder).items()}


@pytest.mark.parametrize("folder", ALL)
def test_every_recorded_trace_is_one_whole_trace(tmp_path, folder):
    day = ingest_recording(tmp_path, folder)
    assert day.quarantine.height == 0, day.quarantine.select("reason", "detail").to_dicts()
    expected = sorted(trace_id for ids in scenarios(folder).values() for trace_id in ids)
    assert sorted(day.traces["trace_id"]) == expected
    assert day.traces["partial_reason"].is_null().all() and day.traces["flags"].is_null().all()
    # rows are spans (and log records): all of them are in the day's traces, none lost
    counts = day.counts
    assert counts["read"] == counts["accepted"] and counts["quarantined"] == 0
    assert day.spans.schema == SPAN_SCHEMA
    assert day.spans.height == day.traces["span_count"].sum()
    assert set(day.spans["trace_id"]) == set(expected)
    # the exporter wrote spans in batches as they ended: some traces are spread over several lines
    lines = day.spans.group_by("trace_id").agg(pl.col("source_line").n_unique().alias("lines"))
    assert lines["lines"].max() > 1


@pytest.mark.parametrize("folder", WITH_CONTENT)
def test_an_agent_run_is_judged_on_its_final_answer_with_its_trajectory(tmp_path, folder):
    first, second = by_scenario(ingest_recording(tmp_path, folder), folder)["agent"]
    assert first["input"] == "What's the weather in Paris today?"
    assert first["output"].startswith("Based on what I looked up (get_weather returned")  # not the tool_call
    assert (first["prompt_tokens"], first["completion_tokens"]) == (188, 73)  # both chat calls, once each
    assert first["span_count"] == 5 and first["error"] is False
    [call] = json.loads(first["tool_calls"])
    assert call["name"] == "get_weather" and call["status"] == "ok"
    assert '"city": "Paris"' in call["arguments"].replace('":"', '": "')
    assert "18 C and sunny" in call["result"]
    roles = [m["role"] for m in json.loads(first["conversation"])]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert json.loads(first["conversation"])[2]["tool_calls"][0]["name"] == "get_weather"
    assert (first["session_id"], first["user_id"]) == ("session-agent-1", "user-bob")
    # the second turn of the session: its own question, the whole conversation so far
    assert second["input"] == "And what about Rome?" and second["session_id"] == "session-agent-1"
    assert len(json.loads(second["conversation"])) == 9
    spans = json.loads(first["spans"])
    assert [s["operation"] for s in spans][-3:] == ["chat", "execute_tool", "chat"]
    assert spans[-1]["output"] == first["output"] and spans[-3]["output"].startswith("[tool_call get_weather(")


@pytest.mark.parametrize("folder", WITH_CONTENT)
def test_sessions_errors_and_retrieval_as_recorded(tmp_path, folder):
    traces = by_scenario(ingest_recording(tmp_path, folder), folder)
    turns = traces["multi_turn"]
    assert {t["session_id"] for t in turns} == {"session-multi-turn-1"}
    questions = ["How long do I boil an egg?", "And for a soft yolk?", "Thanks! Any tip for peeling it?"]
    assert [t["input"] for t in turns] == questions
    [failed] = traces["http_500"]
    assert failed["error"] is True and "InternalServerError" in failed["error_type"] and failed["output"] is None
    assert "500" in failed["error_message"]
    [tool_error] = traces["agent_tool_error"]
    assert tool_error["error"] is False  # the tool failed, the run answered
    assert [c["status"] for c in json.loads(tool_error["tool_calls"])] == ["error"]
    [rag] = traces["rag"]
    # documents as each library records them: none on the span when content goes to events only; Traceloop has
    # no retrieval kind (the app's retrieval is a plain task span)
    documents = {"genai_events": 0, "openllmetry": None}.get(folder, 2)
    assert (rag["context"] and len(json.loads(rag["context"]))) == documents
    [system] = traces["system_prompt"]
    assert system["input"] == "How do I reset my password?"
    assert json.loads(system["conversation"])[0]["role"] == "system"


def test_without_content_capture_a_trace_has_no_text_but_its_numbers(tmp_path):
    traces = by_scenario(ingest_recording(tmp_path, "genai_no_content"), "genai_no_content")
    [agent, _] = traces["agent"]
    assert agent["input"] is None and agent["output"] is None and agent["conversation"] is None
    assert (agent["prompt_tokens"], agent["completion_tokens"]) == (188, 73)


def test_spans_of_one_trace_are_assembled_across_files(tmp_path):
    """The same recording split over two files (one gzip) gives the same traces as one file."""
    whole = ingest_recording(tmp_path / "whole", "openinference")
    day = recording_day("openinference")
    lines = recorded_lines("openinference", "traces.jsonl.gz")
    folder = tmp_path / "split" / "traces" / day
    folder.mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(b"\n".join(lines[::2]) + b"\n")
    (folder / "b.json.gz").write_bytes(gzip.compress(b"\n".join(lines[1::2]) + b"\n"))
    split = read_trace_day(tmp_path / "split", day)
    assert split.quarantine.height == 0
    columns = ["trace_id", "input", "output", "prompt_tokens", "completion_tokens", "span_count", "tool_calls"]
    assert split.traces.select(columns).sort("trace_id").equals(whole.traces.select(columns).sort("trace_id"))
    assert split.spans["source_file"].n_unique() == 2


def test_a_trace_over_midnight_belongs_to_the_day_of_its_root_span(tmp_path):
    """Exporters write a span when it ends, so a run over midnight has its first spans in the day before."""
    from datetime import date, timedelta

    day = recording_day("genai_no_content")
    before = (date.fromisoformat(day) - timedelta(days=1)).isoformat()
    lines = recorded_lines("genai_no_content", "traces.jsonl")
    cut = 3
    for folder, part in ((before, lines[:cut]), (day, lines[cut:])):
        (tmp_path / "traces" / folder).mkdir(parents=True)
        (tmp_path / "traces" / folder / "traces.jsonl").write_bytes(b"\n".join(part) + b"\n")
    first, second = read_trace_day(tmp_path, before), read_trace_day(tmp_path, day)
    all_ids = sorted(trace_id for ids in scenarios("genai_no_content").values() for trace_id in ids)
    assert sorted([*first.traces["trace_id"], *second.traces["trace_id"]]) == all_ids  # each once
    assert set(first.quarantine["reason"]) == {"awaiting_root"}  # the day before holds only their early spans
    assert f"traces/{day}/" in first.quarantine["detail"][0]
    straddling = set(first.quarantine["detail"].str.extract(r"trace ([0-9a-f]{32})"))
    assert straddling and straddling <= set(second.traces["trace_id"])
    assert second.quarantine.height == 0 and second.traces["partial_reason"].is_null().all()
    carried = second.spans.filter(pl.col("source_file") == f"traces/{before}/traces.jsonl")
    assert carried.height == first.quarantine.height  # every early span joined its trace the next day
    assert second.counts["read"] == second.counts["accepted"] == second.spans.height


@pytest.mark.parametrize("folder", WITH_CONTENT)
def test_tool_arguments_and_documents_have_one_shape_whatever_the_convention(tmp_path, folder):
    """A tool span's arguments are the JSON object of the tool's arguments and a retrieval's documents are the
    documents' texts, whichever library recorded them (Langfuse's `@observe` call and retriever output included)."""
    spans = ingest_recording(tmp_path, folder).spans
    tools = spans.filter(pl.col("operation") == "execute_tool").sort("start_time").to_dicts()
    assert [t["tool_name"] for t in tools] == ["get_weather", "get_weather", "lookup_order"]
    if folder != "genai_events":  # content on events only: the span itself has none
        arguments = [json.loads(t["tool_arguments"]) for t in tools]
        assert arguments == [{"city": "Paris"}, {"city": "Rome"}, {"order_id": "A-1001"}]
        assert json.loads(tools[0]["tool_result"]) == {"city": "Paris", "weather": "18 C and sunny"}
    retrievals = spans.filter(pl.col("operation") == "retrieval")["documents"].to_list()
    if folder in ("genai", "openinference", "langfuse"):  # Traceloop has no retrieval kind; events hold no documents
        assert [json.loads(documents) for documents in retrievals] == [
            [
                "Items can be returned within 30 days of delivery with the receipt.",
                "Refunds reach the original payment method within 5 business days.",
            ]
        ]


@pytest.mark.parametrize("folder", ALL)
def test_a_trace_whose_model_called_no_tool_has_an_empty_trajectory_when_its_content_is_known(tmp_path, folder):
    """`tool_calls` is "[]" for a chat that called no tool (a check of expected tools scores it 0), null when
    nothing is known: no content captured, or no model call that answered (the HTTP 500)."""
    traces = by_scenario(ingest_recording(tmp_path, folder), folder)
    no_tools = [*traces["single_turn"], *traces["multi_turn"], *traces["rag"], *traces["n2"], *traces["streaming"]]
    expected = None if folder == "genai_no_content" else "[]"
    assert [t["tool_calls"] for t in no_tools] == [expected] * len(no_tools)
    assert traces["http_500"][0]["tool_calls"] is None
    assert all(json.loads(t["tool_calls"]) for t in traces["agent"])  # the agent's calls, known with or without text


def test_a_root_delivered_again_the_next_day_is_a_duplicate_not_a_failed_day(tmp_path):
    """An exporter's retry (or a file copied twice) puts a trace's root span in the next day's folder too: that
    day's ingest quarantines the copy as a duplicate, keeps its own traces, and the trace stays the first day's."""
    from datetime import date, timedelta

    day = recording_day("genai_no_content")
    after = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    lines = recorded_lines("genai_no_content", "traces.jsonl")
    first = read_trace_day(_day_folder(tmp_path, day, lines), day)
    again = lines[1:2]  # two chat turns' root spans (and their first chat spans)
    second = read_trace_day(_day_folder(tmp_path, after, again), after)
    assert second.traces.height == 0
    assert set(second.quarantine["reason"]) == {"duplicate_span_id"}
    assert f"traces/{day}/" in second.quarantine["detail"][0]
    assert second.counts["read"] == second.counts["quarantined"] > 0
    assert first.traces.height == sum(len(ids) for ids in scenarios("genai_no_content").values())


def _day_folder(root: Path, day: str, lines: list[bytes]) -> Path:
    (root / "traces" / day).mkdir(parents=True, exist_ok=True)
    (root / "traces" / day / "traces.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return root


@pytest.mark.parametrize("folder", ALL)
def test_a_failed_call_keeps_its_requested_model(tmp_path, folder):
    """The HTTP 500 answered nothing, so no response model: the trace's model is the one the app asked for."""
    [failed] = by_scenario(ingest_recording(tmp_path, folder), folder)["http_500"]
    assert failed["error"] is True and failed["model"] == "app/error"


@pytest.mark.parametrize("folder", ["genai", "openllmetry", "openinference", "langfuse"])
def test_a_trace_ending_on_a_tool_call_has_no_output(tmp_path, folder):
    """A bare completion whose answer is a tool call (`record --scenario tool_call_only`): no final answer under
    any convention, never the completion object (OpenInference) nor the assistant message (Langfuse)."""
    recording = f"tool_call_only/{folder}"
    [row] = by_scenario(ingest_recording(tmp_path, recording), recording)["tool_call_only"]
    assert row["input"] == "What's the weather in Paris today?"
    assert row["output"] is None
    [call] = json.loads(row["tool_calls"])
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Paris"}
