"""The recorder runs the demo app for real under each instrumentation (real libraries, real HTTP on 127.0.0.1) and
writes what the Collector's file exporter would; the committed fixtures are checked the same way."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from tools.sample_data.agent_app import CONVENTIONS
from tools.sample_data.agent_app.app import (
    DUMMY_API_KEY,
    KNOWLEDGE_BASE,
    SCENARIOS,
    SESSION_AGENT,
    SESSION_MULTI_TURN,
)
from tools.sample_data.agent_app.langfuse_sdk import LANGFUSE_SECRET_KEY

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otel"
# How each recording is written (the committed fixtures use the same names): .json and gzip variants included.
TRACES_FILES = {"openllmetry": "traces.json", "openinference": "traces.jsonl.gz"}
SESSION_KEYS = {
    "genai": "gen_ai.conversation.id",
    "genai_events": "gen_ai.conversation.id",
    "genai_no_content": "gen_ai.conversation.id",
    "openllmetry": "traceloop.association.properties.session_id",
    "openinference": "session.id",
    "langfuse": "session.id",
}
GENAI_TOOL = ("gen_ai.operation.name", "execute_tool")
TOOL_SPANS = {
    "genai": GENAI_TOOL,
    "genai_events": GENAI_TOOL,
    "genai_no_content": GENAI_TOOL,
    "openllmetry": ("traceloop.span.kind", "tool"),
    "openinference": ("openinference.span.kind", "TOOL"),
    "langfuse": ("langfuse.observation.type", "tool"),
}
# Words of the app's conversations that must (content captured) or must not (no content) be in a recording.
USER_TEXT = "What is the capital of France?"
MODEL_TEXT = "The short answer is yes"


def traces_file(name: str) -> str:
    return TRACES_FILES.get(name, "traces.jsonl")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """All instrumentations recorded once, in the layout of the committed fixtures."""
    from tools.sample_data.agent_app.recorder import record

    out = tmp_path_factory.mktemp("recorded")
    plain = [name for name in CONVENTIONS if name not in TRACES_FILES]
    record(out, plain)
    for name, file_name in TRACES_FILES.items():
        record(out, [name], traces_file=file_name)
    return out


@pytest.fixture(params=["recorded", "committed"])
def source(request) -> Path:
    return request.getfixturevalue("recorded") if request.param == "recorded" else FIXTURES


def read_lines(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return [json.loads(line) for line in lines]  # one JSON object per line, whatever the extension


def spans_by_line(path: Path) -> list[list[dict]]:
    lines = []
    for request in read_lines(path):
        assert set(request) == {"resourceSpans"}
        spans = []
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["attrs"] = {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}
                    spans.append(span)
        lines.append(spans)
    return lines


@pytest.mark.parametrize("name", list(CONVENTIONS))
def test_every_scenario_is_recorded_as_whole_traces_spread_over_lines(source, name):
    folder = source / name
    manifest = json.loads((folder / "manifest.json").read_text())
    lines = spans_by_line(folder / traces_file(name))
    spans = [span for line in lines for span in line]
    by_trace = defaultdict(list)
    lines_of_trace = defaultdict(set)
    for number, line in enumerate(lines):
        for span in line:
            by_trace[span["traceId"]].append(span)
            lines_of_trace[span["traceId"]].add(number)

    # every scenario made the traces it should, and each is in the file
    assert {scenario: len(ids) for scenario, ids in manifest["scenarios"].items()} == {
        scenario: count for scenario, (_, count) in SCENARIOS.items()
    }
    assert set(by_trace) == {trace_id for ids in manifest["scenarios"].values() for trace_id in ids}
    # OTLP/JSON as the Collector writes it: hex ids, int enums, 64-bit ints as strings
    for span in spans:
        assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
        int(span["traceId"], 16)
        assert isinstance(span["kind"], int) and isinstance(span["startTimeUnixNano"], str)
    # spans leave in batches as they end: an agent trace lands on several lines, each of its spans once
    agent_trace = manifest["scenarios"]["agent"][0]
    assert len(lines_of_trace[agent_trace]) > 1
    assert len({span["spanId"] for span in by_trace[agent_trace]}) == len(by_trace[agent_trace]) >= 5
    # one root per trace, every parent present
    for trace_spans in by_trace.values():
        ids = {span["spanId"] for span in trace_spans}
        assert sum(1 for span in trace_spans if not span.get("parentSpanId")) == 1
        assert all(span["parentSpanId"] in ids for span in trace_spans if span.get("parentSpanId"))


@pytest.mark.parametrize("name", list(CONVENTIONS))
def test_tool_spans_sessions_and_the_http_500_are_in_the_trace(source, name):
    folder = source / name
    manifest = json.loads((folder / "manifest.json").read_text())
    spans = [span for line in spans_by_line(folder / traces_file(name)) for span in line]
    key, value = TOOL_SPANS[name]
    tools = [span for span in spans if span["attrs"].get(key) == value]
    # agent: two turns with one get_weather call each; agent_tool_error: one lookup_order that fails
    assert len(tools) == 3
    failed = [span for span in tools if span.get("status", {}).get("code") == 2]
    assert len(failed) == 1 and failed[0]["traceId"] == manifest["scenarios"]["agent_tool_error"][0]
    assert "not found" in failed[0]["status"]["message"]

    # the HTTP 500: an error span in its trace, whose message names the status
    error_trace = manifest["scenarios"]["http_500"][0]
    errors = [span for span in spans if span["traceId"] == error_trace and span.get("status", {}).get("code") == 2]
    assert errors and any("500" in span["status"]["message"] for span in errors)
    assert not [
        span
        for span in spans
        if span.get("status", {}).get("code") == 2 and span["traceId"] not in (error_trace, failed[0]["traceId"])
    ]

    # sessions: every trace of a multi-turn conversation carries its session id
    session_key = SESSION_KEYS[name]
    for scenario, session in (("multi_turn", SESSION_MULTI_TURN), ("agent", SESSION_AGENT)):
        for trace_id in manifest["scenarios"][scenario]:
            assert any(s["attrs"].get(session_key) == session for s in spans if s["traceId"] == trace_id)


@pytest.mark.parametrize("name", list(CONVENTIONS))
def test_message_text_is_there_only_when_content_is_captured(source, name):
    folder = source / name
    texts = "\n".join(json.dumps(line) for line in read_lines(folder / traces_file(name)))
    if (folder / "logs.jsonl").exists():
        logs = read_lines(folder / "logs.jsonl")
        assert all(set(line) == {"resourceLogs"} for line in logs)
        texts += "\n".join(json.dumps(line) for line in logs)
    if name == "genai_no_content":
        assert USER_TEXT not in texts and MODEL_TEXT not in texts
        assert not (folder / "logs.jsonl").exists()
    else:
        assert USER_TEXT in texts and MODEL_TEXT in texts
    if name == "genai_events":  # content only in the events, not on the spans
        spans = json.dumps(read_lines(folder / traces_file(name)))
        assert USER_TEXT not in spans and USER_TEXT in json.dumps(read_lines(folder / "logs.jsonl"))


def test_no_secret_reaches_a_recording(source):
    texts = ""
    for path in source.rglob("*"):
        if path.is_file() and path.suffix != ".md":
            texts += gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    for secret in (DUMMY_API_KEY, LANGFUSE_SECRET_KEY):
        pieces = {secret[i : i + 8] for i in range(len(secret) - 7)}
        assert not [piece for piece in pieces if piece in texts], secret


def test_openllmetry_is_recorded_by_traceloops_own_sdk(source):
    """The app's workflow/agent/tool/task spans come from traceloop-sdk's decorators and span processor, not from a
    hand-written imitation: what only the SDK writes is there (the agent's name on the spans inside it, the tool's
    GenAI name, the decorated call's positional arguments), and the manifest names the SDK's version."""
    folder = source / "openllmetry"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["packages"]["traceloop-sdk"] == "0.62.4"
    spans = [span for line in spans_by_line(folder / traces_file("openllmetry")) for span in line]
    agent_trace = manifest["scenarios"]["agent"][0]
    trace = {span["name"]: span["attrs"] for span in spans if span["traceId"] == agent_trace}
    assert set(trace) == {"agent_turn.workflow", "weather-assistant.agent", "openai.chat", "get_weather.tool"}
    workflow, tool = trace["agent_turn.workflow"], trace["get_weather.tool"]
    assert json.loads(workflow["traceloop.entity.input"]) == {
        "args": ["What's the weather in Paris today?"],
        "kwargs": {},
    }
    assert workflow["traceloop.association.properties.session_id"] == SESSION_AGENT
    assert (tool["traceloop.span.kind"], tool["gen_ai.tool.name"]) == ("tool", "get_weather")
    assert json.loads(tool["traceloop.entity.input"]) == {"args": [], "kwargs": {"city": "Paris"}}
    inside_agent = [
        s for s in spans if s["traceId"] == agent_trace and s["name"] in ("openai.chat", "get_weather.tool")
    ]
    assert len(inside_agent) == 3 and all(s["attrs"]["gen_ai.agent.name"] == "weather-assistant" for s in inside_agent)
    # association properties stay with their request: the retrieval request after the sessions carries none
    rag_trace = manifest["scenarios"]["rag"][0]
    assert not [key for s in spans if s["traceId"] == rag_trace for key in s["attrs"] if "association" in key]


def test_langfuse_tools_and_retrievals_are_recorded_as_its_users_send_them(source):
    """A Langfuse tool is an `@observe(as_type="tool")` function (input: its call's args/kwargs), a retriever's
    output is its documents, not the app's internal (id, text, score) tuples."""
    folder = source / "langfuse"
    spans = [span for line in spans_by_line(folder / traces_file("langfuse")) for span in line]
    by_type = defaultdict(list)
    for span in spans:
        by_type[span["attrs"].get("langfuse.observation.type")].append(span["attrs"])
    weather = [a for a in by_type["tool"] if "city" in a["langfuse.observation.input"]]
    assert [json.loads(a["langfuse.observation.input"]) for a in weather] == [
        {"args": [], "kwargs": {"city": "Paris"}},
        {"args": [], "kwargs": {"city": "Rome"}},
    ]
    [retriever] = by_type["retriever"]
    documents = json.loads(retriever["langfuse.observation.output"])
    assert [d["content"] for d in documents] == [text for _, text, _ in KNOWLEDGE_BASE]


def test_the_recording_process_reaches_loopback_only():
    """Every recording runs under `LoopbackOnly`: a connection or name lookup beyond loopback is refused and noted
    (the run then fails), loopback passes."""
    from tools.sample_data.agent_app.recorder import LoopbackOnly

    guard = LoopbackOnly()
    guard("socket.connect", (None, ("127.0.0.1", 4318)))
    guard("socket.connect", (None, ("::1", 4318, 0, 0)))
    guard("socket.getaddrinfo", ("localhost", 4318, 0, 0, 0, 0))
    guard("socket.connect", (None, "/tmp/a.sock"))
    guard("open", ("/etc/hosts", "r", 0))
    assert guard.refused == []
    with pytest.raises(OSError, match="loopback addresses only, not 'api.traceloop.com'"):
        guard("socket.getaddrinfo", ("api.traceloop.com", 443, 0, 0, 0, 0))
    with pytest.raises(OSError, match="93.184.216.34"):
        guard("socket.connect", (None, ("93.184.216.34", 443)))
    assert guard.refused == ["socket.getaddrinfo api.traceloop.com", "socket.connect 93.184.216.34"]
