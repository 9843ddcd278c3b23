"""OTLP/JSON exports of OpenTelemetry GenAI spans become canonical traces (or clear quarantine rows)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from eval_platform.ingest import read_trace_day
from eval_platform.ingest.otel.model import SPAN_KEYS
from eval_platform.ingest.otel.values import decode_attributes, encode_attributes

DAY = "2026-03-04"
T0 = 1_772_618_400_000_000_000  # 2026-03-04T10:00:00Z in ns
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"  # ids as in the OTel GenAI "chat gpt-4" example


def msgs(role: str, text: str, **extra: object) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}], **extra}])


def span(
    span_id: str,
    name: str,
    attrs: dict,
    *,
    parent: str = "",
    trace: str = TRACE,
    start_ms: float = 0,
    end_ms: float = 1000,
) -> dict:
    return {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(T0 + int(start_ms * 1_000_000)),
        "endTimeUnixNano": str(T0 + int(end_ms * 1_000_000)),
        "attributes": encode_attributes(attrs),
    }


def export(*spans: dict, resource: dict | None = None) -> dict:
    attrs = encode_attributes(resource if resource is not None else {"service.name": "shop-assistant"})
    return {
        "resourceSpans": [
            {"resource": {"attributes": attrs}, "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}
        ]
    }


def chat_attrs(**extra: object) -> dict:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4",
        "gen_ai.response.model": "gpt-4-0613",
        "gen_ai.usage.input_tokens": 52,
        "gen_ai.usage.output_tokens": 47,
        "gen_ai.input.messages": json.dumps(
            [
                {"role": "system", "parts": [{"type": "text", "content": "You are a helpful bot"}]},
                {"role": "user", "parts": [{"type": "text", "content": "Tell me a joke about OpenTelemetry"}]},
            ]
        ),
        "gen_ai.output.messages": msgs(
            "assistant", "Why did the developer bring OpenTelemetry to the party?", finish_reason="stop"
        ),
        **extra,
    }


def ingest(root: Path, document: object, name: str = "otel.json"):
    path = root / "traces" / DAY / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return read_trace_day(root, DAY)


def only_trace(day) -> dict:
    assert day.quarantine.height == 0, day.quarantine.to_dicts()
    assert day.traces.height == 1
    return day.traces.row(0, named=True)


def test_a_chat_span_maps_to_a_canonical_trace(tmp_path):
    attrs = chat_attrs(
        **{
            "eval.experiment_id": "exp-7",
            "eval.variant": "B",
            "eval.expected_output": "a good joke",
            "eval.metadata.customer_tier": "gold",
            "eval.metadata.retries": 2,
            "gen_ai.conversation.id": "conv_1",
            "app.cost_usd": 0.0042,
        }
    )
    row = only_trace(ingest(tmp_path, export(span("00f067aa0ba902b7", "chat gpt-4", attrs, end_ms=1250))))
    assert row["trace_id"] == TRACE
    assert row["timestamp"] == datetime(2026, 3, 4, 10, tzinfo=UTC)
    assert row["latency_ms"] == 1250.0
    assert row["input"] == "Tell me a joke about OpenTelemetry"  # the user's input, not the system prompt
    assert row["output"] == "Why did the developer bring OpenTelemetry to the party?"
    assert [(m["role"], m["content"]) for m in json.loads(row["conversation"])] == [
        ("system", "You are a helpful bot"),
        ("user", "Tell me a joke about OpenTelemetry"),
        ("assistant", "Why did the developer bring OpenTelemetry to the party?"),
    ]
    assert (row["session_id"], row["span_count"], row["partial_reason"], row["error"]) == ("conv_1", 1, None, False)
    assert json.loads(row["input_messages"])[1]["parts"][0]["content"] == "Tell me a joke about OpenTelemetry"
    assert json.loads(row["output_messages"])[0]["finish_reason"] == "stop"
    assert row["model"] == "gpt-4-0613"  # the response model wins over the request model
    assert (row["prompt_tokens"], row["completion_tokens"]) == (52, 47)
    assert row["project_id"] == "shop-assistant"
    assert (row["experiment_id"], row["variant"], row["expected_output"], row["cost_usd"]) == (
        "exp-7",
        "B",
        "a good joke",
        0.0042,
    )
    assert json.loads(row["metadata"]) == {"customer_tier": "gold", "retries": 2, "conversation_id": "conv_1"}
    assert row["context"] is None
    spans = json.loads(row["spans"])
    # the span's other `spans` view columns, stored here (the one place a span is stored)
    stored = {key: spans[0].pop(key) for key in SPAN_KEYS[SPAN_KEYS.index("otel_trace_id") :]}
    assert (stored["otel_trace_id"], stored["convention"], stored["source_line"]) == (TRACE, "genai", 1)
    started, ended = (datetime.fromisoformat(stored[key]) for key in ("start_time", "end_time"))
    assert (ended - started).total_seconds() * 1000 == 1250.0
    assert stored["input_messages"][1] == {"role": "user", "content": "Tell me a joke about OpenTelemetry"}
    assert spans == [
        {
            "span_id": "00f067aa0ba902b7",
            "parent_span_id": None,
            "name": "chat gpt-4",
            "kind": "client",
            "operation": "chat",
            "status": "unset",
            "error_type": None,
            "model": "gpt-4-0613",
            "input": "system: You are a helpful bot\nuser: Tell me a joke about OpenTelemetry",  # all of it
            "output": row["output"],
            "context": None,
            "tool_name": None,
            "tool_arguments": None,
            "tool_result": None,
            "latency_ms": 1250.0,
            "prompt_tokens": 52,
            "completion_tokens": 47,
            "attributes": json.loads(json.dumps(attrs)),
        }
    ]
    assert row["source_line"] == 1


def test_single_user_message_and_request_model_fallback(tmp_path):
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "llama-7b",
        "gen_ai.input.messages": msgs("user", "Just the question"),
        "gen_ai.output.messages": msgs("assistant", "Just the answer"),
    }
    row = only_trace(ingest(tmp_path, export(span("00000000000000a1", "chat llama-7b", attrs))))
    assert (row["input"], row["output"], row["model"]) == ("Just the question", "Just the answer", "llama-7b")


def test_system_instructions_become_a_leading_system_message(tmp_path):
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "You must never tell jokes"}]),
        "gen_ai.input.messages": msgs("user", "Tell me a joke"),
        "gen_ai.output.messages": msgs("assistant", "I'm sorry, but I can't assist with that"),
    }
    row = only_trace(ingest(tmp_path, export(span("00000000000000a1", "chat", attrs))))
    assert row["input"] == "Tell me a joke"
    assert json.loads(row["spans"])[0]["input"] == "system: You must never tell jokes\nuser: Tell me a joke"
    assert [message["role"] for message in json.loads(row["input_messages"])] == ["system", "user"]
    assert json.loads(row["conversation"])[0] == {"role": "system", "content": "You must never tell jokes"}


def test_structured_attribute_values_are_read_like_json_strings(tmp_path):
    messages = [{"role": "user", "parts": [{"type": "text", "content": "structured"}]}]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": messages,
        "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}],
    }
    encoded = encode_attributes(attrs)
    assert "arrayValue" in encoded[1]["value"] and decode_attributes(encoded, "x") == attrs
    row = only_trace(ingest(tmp_path, export(span("00000000000000a1", "chat", attrs))))
    assert (row["input"], row["output"]) == ("structured", "ok")


def test_agent_root_with_a_named_child_chat_span(tmp_path):
    agent = span(
        "00000000000000a1",
        "invoke_agent travel-helper",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel-helper",
            "gen_ai.input.messages": msgs("user", "Weather in Paris?"),
            "gen_ai.output.messages": msgs("assistant", "Rainy, 57°F."),
            "eval.trace_id": "app-request-17",
        },
        end_ms=3000,
    )
    chat = span(
        "00000000000000b2",
        "chat gpt-4",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4",
            "gen_ai.usage.input_tokens": 30,
            "gen_ai.usage.output_tokens": 10,
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Use the weather tool."}]),
            "gen_ai.input.messages": msgs("user", "Weather in Paris?"),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"location": "Paris"}}
                        ],
                    }
                ]
            ),
        },
        parent="00000000000000a1",
        start_ms=10,
        end_ms=900,
    )
    tool = span(
        "00000000000000c3",
        "execute_tool get_weather",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.arguments": {"location": "Paris"},
            "gen_ai.tool.call.result": "rainy, 57°F",
        },
        parent="00000000000000a1",
        start_ms=950,
        end_ms=1000,
    )
    chat2 = span(
        "00000000000000d4",
        "chat gpt-4",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4",
            "gen_ai.usage.input_tokens": 60,
            "gen_ai.usage.output_tokens": 15,
        },
        parent="00000000000000a1",
        start_ms=1100,
        end_ms=2900,
    )
    row = only_trace(ingest(tmp_path, export(chat2, tool, chat, agent)))  # span order in the file does not matter
    assert row["trace_id"] == "app-request-17"
    assert (row["input"], row["output"]) == ("Weather in Paris?", "Rainy, 57°F.")
    assert row["model"] == "gpt-4"  # the agent span has none: the first model below it
    assert (row["prompt_tokens"], row["completion_tokens"]) == (90, 25)  # summed over the chat spans below
    assert row["latency_ms"] == 3000.0
    assert row["source_line"] == 4  # the root span's position in the document
    spans = json.loads(row["spans"])
    assert [(s["name"], s["parent_span_id"]) for s in spans] == [
        ("invoke_agent travel-helper", None),
        ("chat gpt-4", "00000000000000a1"),
        ("execute_tool get_weather", "00000000000000a1"),
        ("chat gpt-4", "00000000000000a1"),
    ]
    assert spans[1]["input"] == "system: Use the weather tool.\nuser: Weather in Paris?"
    assert spans[1]["output"] == '[tool_call get_weather({"location": "Paris"})]'
    assert (spans[2]["operation"], spans[2]["input"], spans[2]["output"]) == (
        "execute_tool",
        '{"location": "Paris"}',
        "rainy, 57°F",
    )


def test_an_agent_root_without_content_falls_back_to_its_chat_spans(tmp_path):
    agent = span("00000000000000a1", "invoke_agent x", {"gen_ai.operation.name": "invoke_agent"}, end_ms=2000)
    first = span(
        "00000000000000b2",
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": msgs("user", "first question"),
            "gen_ai.output.messages": msgs("assistant", "draft"),
        },
        parent="00000000000000a1",
        start_ms=1,
        end_ms=500,
    )
    last = span(
        "00000000000000c3",
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": msgs("user", "refine"),
            "gen_ai.output.messages": msgs("assistant", "final answer"),
        },
        parent="00000000000000a1",
        start_ms=600,
        end_ms=1500,
    )
    row = only_trace(ingest(tmp_path, export(agent, first, last)))
    # the final inference span's conversation: its last user message and its answer
    assert (row["input"], row["output"]) == ("refine", "final answer")


def test_retrieval_documents_become_the_context(tmp_path):
    http = span("00000000000000a1", "POST /answer", {"http.request.method": "POST"}, end_ms=2000)
    documents = [
        {"id": "doc_123", "score": 0.95, "content": "Paris is the capital of France."},
        {"id": "doc_456", "score": 0.87},
    ]
    retrieval = span(
        "00000000000000b2",
        "retrieval kb",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": "kb",
            "gen_ai.retrieval.query.text": "capital of France",
            "gen_ai.retrieval.documents": json.dumps(documents),
        },
        parent="00000000000000a1",
        start_ms=1,
        end_ms=40,
    )
    chat = span("00000000000000c3", "chat gpt-4", chat_attrs(), parent="00000000000000a1", start_ms=50, end_ms=1950)
    row = only_trace(ingest(tmp_path, export(http, retrieval, chat)))
    assert row["model"] == "gpt-4-0613"  # the chat span is the final inference span, not the earlier retrieval
    assert row["latency_ms"] == 2000.0  # the whole run: the HTTP root span
    assert json.loads(row["context"]) == ["Paris is the capital of France.", '{"id": "doc_456", "score": 0.87}']
    spans = {s["name"]: s for s in json.loads(row["spans"])}
    assert set(spans) == {"POST /answer", "retrieval kb", "chat gpt-4"}  # every span; HTTP has no operation
    assert spans["POST /answer"]["operation"] is None
    assert spans["retrieval kb"]["input"] == "capital of France"
    assert spans["retrieval kb"]["context"] == json.loads(row["context"])


def test_traces_are_grouped_by_trace_id_across_resources(tmp_path):
    other = "5b8efff798038103d269b633813fc60c"
    document = export(span("00000000000000a1", "chat", chat_attrs()))
    second = export(
        span("00000000000000b1", "chat", chat_attrs(), trace=other.upper(), start_ms=5000, end_ms=5500),
        resource={"service.name": "billing-bot", "eval.experiment_id": "from-resource"},
    )
    document["resourceSpans"] += second["resourceSpans"]
    day = ingest(tmp_path, document)
    rows = {row["trace_id"]: row for row in day.traces.to_dicts()}
    assert set(rows) == {TRACE, other}  # hex ids are lower-cased
    assert rows[other]["project_id"] == "billing-bot"
    assert rows[other]["experiment_id"] == "from-resource"
    assert rows[other]["source_line"] == 2


def test_invalid_otlp_is_quarantined_with_clear_reasons(tmp_path):
    good = span("00000000000000a1", "chat", chat_attrs())
    no_trace_id = {**span("00000000000000a2", "chat", chat_attrs()), "traceId": "xyz"}
    bad_time_child = span("00000000000000b2", "chat", chat_attrs(), trace="b" * 32, parent="00000000000000b1")
    bad_time_child["startTimeUnixNano"] = "soon"
    bad_time_root = span(
        "00000000000000b1", "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, trace="b" * 32
    )
    not_genai = span("00000000000000c1", "GET /health", {"http.request.method": "GET"}, trace="c" * 32)
    bad_attr = span("00000000000000d1", "chat", {}, trace="d" * 32)
    bad_attr["attributes"] = [{"key": "gen_ai.operation.name", "value": {"stringValue": 5}}]
    negative = span("00000000000000e1", "chat", chat_attrs(**{"gen_ai.usage.input_tokens": -5}), trace="e" * 32)
    day = ingest(
        tmp_path, export(good, no_trace_id, bad_time_root, bad_time_child, not_genai, bad_attr, "not a span", negative)
    )
    assert day.traces["trace_id"].to_list() == [TRACE]
    got = [(row["line"], row["reason"]) for row in day.quarantine.to_dicts()]
    assert got == [  # one row per span: a broken span takes its whole trace (both spans) with it
        (2, "invalid_otlp:traceId"),
        (3, "invalid_otlp:startTimeUnixNano"),
        (4, "invalid_otlp:startTimeUnixNano"),
        (5, "no_genai_span"),
        (6, "invalid_otlp:attributes"),
        (7, "invalid_otlp:span"),
        (8, "negative_value:prompt_tokens"),
    ]
    details = [row["detail"] for row in day.quarantine.to_dicts()]
    assert details[1].startswith(f"traces/{DAY}/otel.json span 3: trace {'b' * 32}")
    assert "00000000000000b2" in details[1] and "startTimeUnixNano" in details[1]
    assert [json.loads(day.quarantine["raw"][i])["spanId"] for i in (1, 2)] == ["00000000000000b1", "00000000000000b2"]
    counts = day.counts  # rows are spans (and envelope errors): 8 read, 1 in a trace, 7 quarantined
    assert counts["read"] == 8 and counts["accepted"] == 1 and counts["quarantined"] == 7


def test_a_broken_envelope_is_one_quarantine_row(tmp_path):
    day = ingest(tmp_path, {"resourceSpans": {"not": "a list"}})
    row = day.quarantine.row(0, named=True)
    assert (row["line"], row["reason"]) == (None, "invalid_otlp:resourceSpans")
    assert day.counts["read"] == 1 and day.traces.height == 0


def test_otlp_lines_in_jsonl_keep_their_line_numbers(tmp_path):
    first = export(span("00000000000000a1", "chat", chat_attrs()))
    second = export(
        span("00000000000000b1", "chat", chat_attrs(), trace="f" * 32),
        span("00000000000000b2", "GET /", {}, trace="e" * 32),
    )
    day = ingest(tmp_path, json.dumps(first) + "\n" + json.dumps(second) + "\n", name="collector.jsonl")
    assert dict(zip(day.traces["trace_id"], day.traces["source_line"], strict=True)) == {TRACE: 1, "f" * 32: 2}
    assert [(row["line"], row["reason"]) for row in day.quarantine.to_dicts()] == [(2, "no_genai_span")]
    assert day.quarantine["detail"][0].startswith(f"traces/{DAY}/collector.jsonl line 2: ")


def test_an_array_of_otlp_exports(tmp_path):
    documents = [
        export(span("00000000000000a1", "chat", chat_attrs())),
        export(span("00000000000000b1", "chat", chat_attrs(), trace="f" * 32)),
    ]
    day = ingest(tmp_path, documents)
    assert sorted(day.traces["trace_id"]) == sorted([TRACE, "f" * 32])


def test_orphans_are_kept_but_the_trace_says_it_is_partial(tmp_path):
    root = span("00000000000000a1", "invoke_agent x", {"gen_ai.operation.name": "invoke_agent"}, end_ms=3000)
    orphan = span("00000000000000b2", "chat", chat_attrs(), parent="00000000000000ff", start_ms=10, end_ms=900)
    row = only_trace(ingest(tmp_path, export(root, orphan)))
    assert row["partial_reason"] == "missing_parent:00000000000000ff"
    assert json.loads(row["flags"]) == ["missing_parent"] and row["span_count"] == 2


def test_duplicate_span_ids_cycles_and_skew_are_quarantined_or_flagged(tmp_path):
    root = span("00000000000000a1", "invoke_agent x", {"gen_ai.operation.name": "invoke_agent"}, end_ms=1000)
    chat = span("00000000000000b2", "chat", chat_attrs(), parent="00000000000000a1", start_ms=-50, end_ms=900)
    again = {**chat, "name": "chat again"}
    loop_a = span("00000000000000c3", "chat", chat_attrs(), parent="00000000000000d4", start_ms=5)
    loop_b = span("00000000000000d4", "chat", chat_attrs(), parent="00000000000000c3", start_ms=6)
    day = ingest(tmp_path, export(root, chat, again, loop_a, loop_b))
    row = day.traces.row(0, named=True)
    assert row["partial_reason"] == "parent_cycle:00000000000000c3" and row["span_count"] == 2
    assert json.loads(row["flags"]) == ["duplicate_span_id", "parent_cycle", "clock_skew"]
    assert [(q["line"], q["reason"]) for q in day.quarantine.to_dicts()] == [
        (3, "duplicate_span_id"),
        (4, "parent_cycle"),
        (5, "parent_cycle"),
    ]
    assert json.loads(day.quarantine["raw"][0])["name"] == "chat again"  # the raw span is kept
    assert day.counts["read"] == 5 and day.counts["accepted"] == 2 and day.counts["quarantined"] == 3


def test_a_trace_without_its_root_waits_for_the_next_day(tmp_path):
    child = span("00000000000000b2", "chat", chat_attrs(), parent="00000000000000a1")
    day = ingest(tmp_path, export(child))
    assert day.traces.height == 0
    [row] = day.quarantine.to_dicts()
    assert row["reason"] == "awaiting_root" and "traces/2026-03-05/" in row["detail"]


def test_a_parent_in_another_process_makes_a_local_root(tmp_path):
    server = {**span("00000000000000b2", "chat", chat_attrs(), parent="00000000000000a1"), "flags": 0x300}
    row = only_trace(ingest(tmp_path, export(server)))
    assert row["partial_reason"] is None and row["output"].startswith("Why did the developer")


def test_log_records_are_events_of_their_span_or_quarantined(tmp_path):
    chat = span("00000000000000b2", "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})

    def record(name: str, body: dict, span_id: str = "00000000000000b2") -> dict:
        return {
            "eventName": name,
            "traceId": TRACE,
            "spanId": span_id,
            "body": {"kvlistValue": {"values": encode_attributes(body)}},
        }

    logs = {
        "resourceLogs": [
            {
                "resource": {},
                "scopeLogs": [
                    {
                        "logRecords": [
                            record("gen_ai.user.message", {"content": "hello?"}),
                            record("gen_ai.choice", {"index": 0, "message": {"role": "assistant", "content": "hi!"}}),
                            record("gen_ai.user.message", {"content": "lost"}, span_id="00000000000000ff"),
                            {"body": {"stringValue": "an application log line"}},
                        ]
                    }
                ],
            }
        ]
    }
    day = ingest(tmp_path, json.dumps(export(chat)) + "\n" + json.dumps(logs) + "\n", name="collector.json")
    row = day.traces.row(0, named=True)
    assert (row["input"], row["output"]) == ("hello?", "hi!")
    assert [(q["line"], q["reason"]) for q in day.quarantine.to_dicts()] == [
        (2, "orphan_event"),
        (2, "not_a_genai_event"),
    ]
    assert day.counts["read"] == 5 and day.counts["accepted"] == 3


def test_a_metrics_line_is_not_a_trace(tmp_path):
    day = ingest(
        tmp_path,
        json.dumps({"resourceMetrics": []})
        + "\n"
        + json.dumps(export(span("00000000000000a1", "chat", chat_attrs())))
        + "\n",
        name="all.jsonl",
    )
    assert day.traces.height == 1
    assert day.quarantine["reason"].to_list() == ["not_a_trace:metrics"]
