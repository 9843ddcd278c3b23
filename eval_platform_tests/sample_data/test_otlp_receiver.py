"""The OTLP/HTTP receiver accepts what exporters send (protobuf, JSON, gzip, Langfuse's path and auth) and writes
one OTLP/JSON request per line, as the Collector's file exporter does."""

from __future__ import annotations

import base64
import gzip
import json

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tools.sample_data.otlp_receiver import OtlpFileReceiver

KEYS = ("pk-test", "sk-test-Zr4Wq8Lp2")


def export_two_spans(endpoint: str, path: str = "/v1/traces", **exporter_options) -> tuple[str, str]:
    """A real SDK exporting a parent and a child span, one export request each; their hex ids."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + path, **exporter_options)))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("parent") as parent:
        with tracer.start_as_current_span("child", attributes={"count": 7, "ratio": 0.5}):
            pass
    provider.shutdown()
    return f"{parent.get_span_context().trace_id:032x}", f"{parent.get_span_context().span_id:016x}"


def read(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle.read().splitlines()]


def test_protobuf_exports_become_collector_style_lines(tmp_path):
    with OtlpFileReceiver(tmp_path) as receiver:
        trace_id, parent_id = export_two_spans(receiver.endpoint)
    lines = read(tmp_path / "traces.jsonl")
    assert len(lines) == 2  # one line per export request
    child = lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    parent = lines[1]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert (child["name"], parent["name"]) == ("child", "parent")
    assert child["traceId"] == parent["traceId"] == trace_id  # hex, not base64
    assert child["parentSpanId"] == parent["spanId"] == parent_id and "parentSpanId" not in parent
    assert child["kind"] == 1 and isinstance(child["startTimeUnixNano"], str)
    attributes = {a["key"]: a["value"] for a in child["attributes"]}
    assert attributes == {"count": {"intValue": "7"}, "ratio": {"doubleValue": 0.5}}
    assert receiver.stats.spans == 2 and receiver.stats.trace_requests == 2


def test_gzip_requests_and_gzip_output(tmp_path):
    with OtlpFileReceiver(tmp_path, traces_file="traces.json.gz") as receiver:
        trace_id, _ = export_two_spans(receiver.endpoint, compression=Compression.Gzip)
    lines = read(tmp_path / "traces.json.gz")
    assert [line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] for line in lines] == [trace_id] * 2


def test_otlp_json_requests_round_trip(tmp_path):
    with OtlpFileReceiver(tmp_path / "proto") as receiver:
        export_two_spans(receiver.endpoint)
    written = (tmp_path / "proto" / "traces.jsonl").read_text().splitlines()
    with OtlpFileReceiver(tmp_path / "json") as receiver:
        for line in written:
            response = httpx.post(
                f"{receiver.endpoint}/v1/traces", content=line, headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 200
        bad = httpx.post(
            f"{receiver.endpoint}/v1/traces", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert bad.status_code == 400
    assert (tmp_path / "json" / "traces.jsonl").read_text().splitlines() == written


@pytest.mark.parametrize(
    ("credentials", "status"), [(KEYS, 200), (("pk-test", "wrong"), 401)], ids=["right-key", "wrong-key"]
)
def test_langfuse_path_checks_basic_auth(tmp_path, credentials, status):
    with OtlpFileReceiver(tmp_path, credentials=KEYS) as receiver:
        token = base64.b64encode(":".join(credentials).encode()).decode()
        export_two_spans(receiver.endpoint, "/api/public/otel/v1/traces", headers={"Authorization": f"Basic {token}"})
        stats = receiver.stats
    assert (stats.spans, len(stats.refused)) == ((2, 0) if status == 200 else (0, 2))
    assert (tmp_path / "traces.jsonl").exists() == (status == 200)
    assert not [reason for reason in stats.refused if KEYS[1] in reason]


def test_unknown_path_is_refused(tmp_path):
    with OtlpFileReceiver(tmp_path) as receiver:
        assert httpx.post(f"{receiver.endpoint}/v2/spans", content=b"").status_code == 404
