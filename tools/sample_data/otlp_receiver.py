"""A local OTLP/HTTP receiver that writes what it receives the way the OpenTelemetry Collector's file exporter
(`fileexporter`, `format: json`) does: one OTLP/JSON export request per line, in arrival order.

It listens on 127.0.0.1 only and accepts, as protobuf (`application/x-protobuf`) or OTLP/JSON
(`application/json`), optionally gzip-encoded (`Content-Encoding: gzip`, Langfuse's default):
- `POST /v1/traces` (ExportTraceServiceRequest) -> the traces file, one `{"resourceSpans": [...]}` per line;
- `POST /v1/logs` (ExportLogsServiceRequest, where GenAI events go) -> the logs file, `{"resourceLogs": [...]}`;
- `POST /api/public/otel/v1/traces`: Langfuse's OTLP path, with its Basic auth checked when `credentials` is set;
- `POST /v1/metrics`: accepted and dropped (instrumentations may send metrics; nothing here reads them).

Lines follow the OTLP/JSON mapping as the Collector writes it: camelCase keys, trace and span ids in hex (not
protobuf's base64), 64-bit integers as strings, enums as integers, default values left out. Spans arrive in the
batches the application's span processor sends as they end, so one trace's spans land on several lines, as in
real Collector output. A file named `*.gz` is written gzip-compressed (what a user's log rotation makes of the
Collector's file); the Collector's own `compression: zstd` frames are not produced.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

TRACES_PATHS = ("/v1/traces", "/api/public/otel/v1/traces")
LOGS_PATH = "/v1/logs"
METRICS_PATH = "/v1/metrics"
LANGFUSE_TRACES_PATH = "/api/public/otel/v1/traces"
# OTLP/JSON writes these bytes fields as hex; protobuf's JSON mapping would write base64.
ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


def _map_ids(value: Any, convert) -> Any:
    if isinstance(value, dict):
        return {key: convert(item) if key in ID_FIELDS else _map_ids(item, convert) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_ids(item, convert) for item in value]
    return value


def to_otlp_json(message: Message) -> dict[str, Any]:
    """An export request as the Collector's OTLP/JSON: protobuf's JSON mapping with hex ids and integer enums."""
    as_dict = json_format.MessageToDict(message, use_integers_for_enums=True)
    return _map_ids(as_dict, lambda b64: base64.b64decode(b64).hex())


def from_otlp_json(payload: bytes, message: Message) -> Message:
    """Parse an OTLP/JSON request body (hex ids) into the protobuf message."""
    data = json.loads(payload)
    json_format.ParseDict(_map_ids(data, lambda hex_id: base64.b64encode(bytes.fromhex(hex_id)).decode()), message)
    return message


@dataclass
class ReceiverStats:
    """What the receiver saw, for tests: requests written per signal, refused requests and their reasons."""

    trace_requests: int = 0
    log_requests: int = 0
    metric_requests: int = 0
    spans: int = 0
    log_records: int = 0
    refused: list[str] = field(default_factory=list)


class OtlpFileReceiver:
    """OTLP/HTTP on 127.0.0.1 writing Collector-style files under `out_dir`; use `start()`/`stop()` or `with`.

    `traces_file` / `logs_file` name the outputs (`.json`, `.jsonl`, either with `.gz`); `credentials`
    (public key, secret key) makes Langfuse's path require that Basic auth, as Langfuse does.
    """

    def __init__(
        self,
        out_dir: Path,
        traces_file: str = "traces.jsonl",
        logs_file: str = "logs.jsonl",
        credentials: tuple[str, str] | None = None,
        port: int = 0,
    ):
        self.out_dir = Path(out_dir)
        self.traces_path = self.out_dir / traces_file
        self.logs_path = self.out_dir / logs_file
        self.credentials = credentials
        self.port = port
        self.stats = ReceiverStats()
        self._files: dict[Path, IO[str]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """The base URL (`http://127.0.0.1:<port>`); OTLP exporters append `/v1/traces` and `/v1/logs`."""
        if self._server is None:
            raise RuntimeError("the OTLP receiver is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> str:
        """Bind on 127.0.0.1, serve on a daemon thread and return the endpoint."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
                status, body, content_type = receiver.handle(self.path, self.headers, self._read_body())
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _read_body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's signature
                pass  # quiet: the recorder's output is the files, not an access log

        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()
        return self.endpoint

    def stop(self) -> None:
        """Stop serving and close the output files (a gzip file is complete only after this)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = self._thread = None
        with self._lock:
            for handle in self._files.values():
                handle.close()
            self._files.clear()

    def __enter__(self) -> OtlpFileReceiver:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- requests ------------------------------------------------------------------------------------------

    def handle(self, path: str, headers: Any, body: bytes) -> tuple[int, bytes, str]:
        """(status, body, content type) for one POST."""
        path = path.split("?", 1)[0]
        if path == LANGFUSE_TRACES_PATH and self.credentials is not None and not self._authorized(headers):
            return self._refuse(401, f"{path}: missing or wrong Basic auth")
        if path not in (*TRACES_PATHS, LOGS_PATH, METRICS_PATH):
            return self._refuse(404, f"{path}: not an OTLP path")
        if (headers.get("Content-Encoding") or "").lower() == "gzip":
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError) as error:
                return self._refuse(400, f"{path}: bad gzip body ({error})")
        if path == METRICS_PATH:
            with self._lock:
                self.stats.metric_requests += 1
            return 200, b"", "application/x-protobuf"
        is_json = (headers.get("Content-Type") or "").startswith("application/json")
        request, response = (
            (ExportLogsServiceRequest(), ExportLogsServiceResponse())
            if path == LOGS_PATH
            else (ExportTraceServiceRequest(), ExportTraceServiceResponse())
        )
        try:
            if is_json:
                from_otlp_json(body, request)
            else:
                request.ParseFromString(body)
        except (DecodeError, json_format.ParseError, ValueError, binascii.Error) as error:
            return self._refuse(400, f"{path}: not an OTLP request ({error})")
        self._write(request)
        if is_json:
            return 200, b"{}", "application/json"
        return 200, response.SerializeToString(), "application/x-protobuf"

    def _authorized(self, headers: Any) -> bool:
        public_key, secret_key = self.credentials
        expected = "Basic " + base64.b64encode(f"{public_key}:{secret_key}".encode()).decode()
        return headers.get("Authorization") == expected

    def _refuse(self, status: int, reason: str) -> tuple[int, bytes, str]:
        with self._lock:
            self.stats.refused.append(reason)
        return status, json.dumps({"error": reason}).encode(), "application/json"

    def _write(self, request: Message) -> None:
        if isinstance(request, ExportLogsServiceRequest):
            path, count = (
                self.logs_path,
                sum(len(scope.log_records) for resource in request.resource_logs for scope in resource.scope_logs),
            )
        else:
            path, count = (
                self.traces_path,
                sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans),
            )
        if count == 0:
            return  # the Collector writes nothing for an empty export
        line = json.dumps(to_otlp_json(request), separators=(",", ":"), ensure_ascii=False) + "\n"
        with self._lock:
            handle = self._files.get(path)
            if handle is None:
                opener = gzip.open if path.suffix == ".gz" else open
                handle = self._files[path] = opener(path, "at", encoding="utf-8")
            handle.write(line)
            handle.flush()
            if path == self.logs_path:
                self.stats.log_requests += 1
                self.stats.log_records += count
            else:
                self.stats.trace_requests += 1
                self.stats.spans += count
