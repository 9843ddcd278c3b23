"""The older forms users still have in their exports, which the current releases no longer write: OpenLLMetry's
indexed attributes (`gen_ai.prompt.N.*`, `gen_ai.completion.N.*`, `llm.request.functions.N.*`, written up to
opentelemetry-instrumentation-openai 0.54.0) and the GenAI v1.28 log events (`gen_ai.user.message`, ...,
`gen_ai.choice`, openai-v2 2.0b0-2.3b0). The tests cannot install those releases (the test extra holds the
current ones), so the committed recordings (eval_platform_tests/fixtures/otel/<name>/, made by the demo app under
a scratch venv: see their manifest.json) are the real output here. Each must give the whole-trace fields the
current release's recording of the same app gives."""

from __future__ import annotations

import json

import pytest

from eval_platform_tests.ingest.test_otel_recorded import (
    FIXTURES,
    by_scenario,
    ingest_recording,
    recorded_lines,
    scenarios,
)

# older form -> the current release's recording of the same app
CURRENT = {
    "openllmetry_indexed": "openllmetry",
    "genai_log_events": "genai_events",
    "genai_log_events_no_content": "genai_no_content",
}
WITH_CONTENT = ["openllmetry_indexed", "genai_log_events"]
SAME = ["input", "output", "conversation", "prompt_tokens", "completion_tokens", "session_id", "user_id", "error"]


def manifest(folder: str) -> dict:
    return json.loads((FIXTURES / folder / "manifest.json").read_text())


def attribute_keys(folder: str) -> set[str]:
    keys = set()
    for line in recorded_lines(folder, "traces.jsonl"):
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    keys |= {attribute["key"] for attribute in span.get("attributes", [])}
    return keys


def log_event_names(folder: str) -> set[str]:
    names = set()
    for line in recorded_lines(folder, "logs.jsonl"):
        for resource in json.loads(line)["resourceLogs"]:
            for scope in resource["scopeLogs"]:
                for record in scope["logRecords"]:
                    attributes = {a["key"]: a["value"].get("stringValue") for a in record.get("attributes", [])}
                    names.add(record.get("eventName") or attributes.get("event.name"))
    return names


def test_the_recordings_hold_the_old_forms_from_the_old_releases():
    """What these fixtures stand for: the old releases wrote them, in the old form, not the current one."""
    assert manifest("openllmetry_indexed")["packages"]["opentelemetry-instrumentation-openai"] == "0.54.0"
    keys = attribute_keys("openllmetry_indexed")
    assert {"gen_ai.prompt.0.role", "gen_ai.prompt.0.content", "gen_ai.completion.0.finish_reason"} <= keys
    assert {"gen_ai.prompt.3.tool_call_id", "gen_ai.completion.0.tool_calls.0.arguments"} <= keys
    assert {"llm.request.functions.0.name", "llm.request.functions.0.parameters"} <= keys
    assert not {"gen_ai.input.messages", "gen_ai.output.messages"} & keys
    for folder in ("genai_log_events", "genai_log_events_no_content"):
        assert manifest(folder)["packages"]["opentelemetry-instrumentation-openai-v2"] == "2.1b0"
        assert log_event_names(folder) == {
            "gen_ai.system.message",
            "gen_ai.user.message",
            "gen_ai.assistant.message",
            "gen_ai.tool.message",
            "gen_ai.choice",
        }
        assert not {"gen_ai.input.messages", "gen_ai.output.messages"} & attribute_keys(folder)
    for folder in CURRENT:
        assert manifest(folder)["scratch_venv"][-1].endswith(f"--python /tmp/venv-{folder}/bin/python")


@pytest.mark.parametrize("folder", list(CURRENT))
def test_an_old_form_gives_the_whole_trace_fields_of_the_current_form(tmp_path, folder):
    """Input, final answer, conversation, trajectory, tokens, session and user, error: the same, trace by trace, as
    the current release's recording of the same scenarios (what differs between the recordings is only the app's
    own retrieval span and the wording of the failed tool's status message)."""
    old_day = ingest_recording(tmp_path / "old", folder)
    assert old_day.quarantine.height == 0, old_day.quarantine.select("reason", "detail").to_dicts()
    assert old_day.counts["read"] == old_day.counts["accepted"]
    assert old_day.traces["partial_reason"].is_null().all()
    old = by_scenario(old_day, folder)
    new = by_scenario(ingest_recording(tmp_path / "new", CURRENT[folder]), CURRENT[folder])
    assert {name: len(rows) for name, rows in old.items()} == {name: len(rows) for name, rows in new.items()}
    for name in old:
        for old_trace, new_trace in zip(old[name], new[name], strict=True):
            assert {c: old_trace[c] for c in SAME} == {c: new_trace[c] for c in SAME}, name
            assert trajectory(old_trace) == trajectory(new_trace), name


def trajectory(trace: dict) -> list[tuple] | None:
    calls = json.loads(trace["tool_calls"]) if trace["tool_calls"] is not None else None
    return None if calls is None else [(c["name"], c["arguments"], c["result"], c["status"]) for c in calls]


@pytest.mark.parametrize("folder", WITH_CONTENT)
def test_an_old_form_agent_run_is_read_whole(tmp_path, folder):
    """The agent's tool loop in the old form: its answer, both model calls' tokens, the conversation with the tool
    call and the tool's result tied by the call id, the trajectory."""
    traces = by_scenario(ingest_recording(tmp_path, folder), folder)
    first, second = traces["agent"]
    assert first["input"] == "What's the weather in Paris today?"
    assert first["output"].startswith("Based on what I looked up (get_weather returned")
    assert (first["prompt_tokens"], first["completion_tokens"]) == (188, 73)
    conversation = json.loads(first["conversation"])
    assert [m["role"] for m in conversation] == ["system", "user", "assistant", "tool", "assistant"]
    [call] = conversation[2]["tool_calls"]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Paris"}
    assert conversation[3]["tool_call_id"] == call["id"] and "18 C and sunny" in conversation[3]["content"]
    [step] = json.loads(first["tool_calls"])
    assert (step["name"], json.loads(step["arguments"]), step["status"]) == ("get_weather", {"city": "Paris"}, "ok")
    assert (first["session_id"], first["user_id"]) == ("session-agent-1", "user-bob")
    assert second["input"] == "And what about Rome?" and len(json.loads(second["conversation"])) == 9
    turns = traces["multi_turn"]
    questions = ["How long do I boil an egg?", "And for a soft yolk?", "Thanks! Any tip for peeling it?"]
    assert [t["input"] for t in turns] == questions
    assert [len(json.loads(t["conversation"])) for t in turns] == [3, 5, 7]
    [single] = traces["single_turn"]
    assert single["input"] == "What is the capital of France?" and single["output"].startswith("Sure. You asked")
    [n2] = traces["n2"]
    assert n2["completion_tokens"] == 56 and n2["output"]


def test_the_requests_tools_stay_in_the_chat_spans_attributes(tmp_path):
    """`llm.request.functions.N.*` (the tools offered to the model) is no field of the trace model; the span row
    keeps it in its raw attributes for an evaluator's selector."""
    spans = ingest_recording(tmp_path, "openllmetry_indexed").spans
    agent_trace = scenarios("openllmetry_indexed")["agent"][0]
    chats = spans.filter((spans["trace_id"] == agent_trace) & (spans["operation"] == "chat")).to_dicts()
    assert len(chats) == 2
    attributes = json.loads(chats[0]["attributes"])
    assert attributes["llm.request.functions.0.name"] == "get_weather"
    assert json.loads(attributes["llm.request.functions.0.parameters"])["required"] == ["city"]


def test_without_content_capture_the_old_events_give_no_conversation(tmp_path):
    """openai-v2 2.1b0 without content capture still sends every message event, with the role only (an assistant's
    tool call with its id and name, no arguments): that is no captured content, so the trace has no conversation,
    as the current release's trace without content has none."""
    traces = by_scenario(ingest_recording(tmp_path, "genai_log_events_no_content"), "genai_log_events_no_content")
    every = [trace for rows in traces.values() for trace in rows]
    assert [t["conversation"] for t in every] == [None] * len(every)
    assert {t["input"] for t in every} == {None} and {t["output"] for t in every} == {None}
    first = traces["agent"][0]
    assert (first["prompt_tokens"], first["completion_tokens"]) == (188, 73)
    assert [c["name"] for c in json.loads(first["tool_calls"])] == ["get_weather"]  # from the app's tool span


def test_openlits_prompt_text_is_read_as_the_messages_it_holds(tmp_path):
    """OpenLIT 1.34 writes the deprecated `gen_ai.prompt` (attribute and `gen_ai.content.prompt` span event) as one
    `role: content` line per message, and `str(messages)` in place of a message it cannot format (an assistant's
    tool calls): the trace's input is still the user's question, its conversation the messages with the tool call
    and result, as the current openai-v2 release's recording of the same app gives."""
    keys = attribute_keys("openlit_prompt_events")
    assert manifest("openlit_prompt_events")["packages"]["openlit"] == "1.34.43"
    assert {"gen_ai.prompt", "gen_ai.completion"} <= keys and "gen_ai.input.messages" not in keys
    day = ingest_recording(tmp_path / "old", "openlit_prompt_events")
    rows = {row["trace_id"]: row for row in day.traces.to_dicts()}
    # what OpenLIT itself writes differently: its own token estimate for a stream, the n=2 choices joined in one
    # completion, and a failed call with no attribute at all (the next test)
    compared = ("single_turn", "system_prompt", "multi_turn", "agent", "agent_tool_error", "rag")
    old = {name: [rows[t] for t in scenarios("openlit_prompt_events")[name]] for name in compared}
    new = by_scenario(ingest_recording(tmp_path / "new", "genai_events"), "genai_events")
    for name in compared:
        for old_trace, new_trace in zip(old[name], new[name], strict=True):
            assert {c: old_trace[c] for c in SAME} == {c: new_trace[c] for c in SAME}, name
            assert trajectory(old_trace) == trajectory(new_trace), name
    first = old["agent"][0]
    assert first["input"] == "What's the weather in Paris today?"
    roles = [m["role"] for m in json.loads(first["conversation"])]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    [rag] = old["rag"]
    assert json.loads(rag["conversation"])[0]["content"].count("\n") == 2  # a message over several lines stays one
    # the model call that answered with a tool call: OpenLIT's empty completion and its gen_ai.tool.* attributes
    chats = [span for span in json.loads(first["spans"]) if span["operation"] == "chat"]
    assert chats[0]["output"].startswith("[tool_call get_weather(") and '"Paris"' in chats[0]["output"]
    assert chats[1]["output"] == first["output"]


def test_openlits_failed_call_has_nothing_to_read_and_its_trace_is_quarantined_whole(tmp_path):
    """OpenLIT's span of the HTTP 500 carries no attribute (only its name, status and exception), so nothing in the
    trace is GenAI: every span of it is quarantined `no_genai_span` with its raw JSON, none lost."""
    day = ingest_recording(tmp_path, "openlit_prompt_events")
    [failed] = scenarios("openlit_prompt_events")["http_500"]
    assert failed not in set(day.traces["trace_id"])
    rows = day.quarantine.filter(day.quarantine["detail"].str.contains(failed)).to_dicts()
    assert [row["reason"] for row in rows] == ["no_genai_span", "no_genai_span"]
    assert any("InternalServerError" in row["raw"] for row in rows)
    assert day.counts["read"] == day.counts["accepted"] + day.counts["quarantined"]
