"""The real receivers the export tests send to, each started on 127.0.0.1 into a temp folder.

- `Collector`: Rotel (streamfold's OpenTelemetry collector, in Rust, shipped as a binary inside the `rotel` wheel of
  the test dependencies), receiving OTLP/HTTP on a free port and printing every log record it receives with its
  detailed debug output (the OpenTelemetry Collector's `debug` exporter format: event name, attributes, trace and
  span ids); `records()` parses that output. The OpenTelemetry Collector itself is not on PyPI.
- `PhoenixServer`: Arize Phoenix from its own venv (`.ci/phoenix-venv`; its pins clash with requirements.lock),
  found through `EVAL_PLATFORM_PHOENIX_VENV`, else `.venv-phoenix` in the checkout. Its working folder (SQLite
  database) and home are a fresh temp folder; telemetry is off; its gRPC receiver gets a free port too.

Without either one the tests are skipped with the command that installs it, except under CI (`CI` set), where a
missing receiver is a failure, never a silent skip (as `label_studio_server` does for Label Studio).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from eval_platform_tests.dagster_daemon import stop_group
from eval_platform_tests.postgres_server import free_port

PHOENIX_VENV_ENV = "EVAL_PLATFORM_PHOENIX_VENV"
DEFAULT_PHOENIX_VENV = Path(__file__).resolve().parents[2] / ".venv-phoenix"
# How long a start may take on a loaded 2-core machine (Phoenix migrates a fresh database first); a guard only.
START_TIMEOUT_S = 600


def missing(message: str, named_env: str | None = None) -> None:
    """Skip, or fail under CI (or when a variable names what is not there): never a silent skip in CI."""
    if os.environ.get("CI") or (named_env and os.environ.get(named_env)):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


class _Process:
    """A server process in its own session and temp folder, stopped with its whole process group."""

    def __init__(self, prefix: str):
        self.folder = Path(tempfile.mkdtemp(prefix=prefix))
        self.log_file = self.folder / "server.log"
        self._process: subprocess.Popen | None = None

    def _start(self, command: list[str], env: dict[str, str]) -> None:
        keep = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL", "TZ") if name in os.environ}
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(
                command,
                cwd=self.folder,
                env={**keep, "HOME": str(self.folder), "TMPDIR": str(self.folder), **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"{what} exited with {self._process.returncode}:\n{self.log_text()[-4000:]}")
            try:
                if ready():
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{what} did not start within {START_TIMEOUT_S} s:\n{self.log_text()[-4000:]}")

    def stop(self, remove: bool = True) -> None:
        try:
            if self._process is not None and self._process.poll() is None:
                stop_group(self._process)
        finally:
            if remove:
                shutil.rmtree(self.folder, ignore_errors=True)


def rotel_agent() -> Path | None:
    try:
        import rotel
    except ImportError:
        return None
    binary = Path(rotel.__file__).parent / "rotel-agent"
    return binary if binary.is_file() else None


@dataclass
class ReceivedRecord:
    """One log record as the collector printed it."""

    event_name: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)  # the printed value: `Str(text)`, `Double(0.5)`
    text: str = ""  # the record's whole printed block


_ATTRIBUTE = re.compile(r"^\s+-> ([^:]+): (.*)$")


class Collector(_Process):
    """Rotel on 127.0.0.1, receiving OTLP/HTTP and printing each log record it receives."""

    def __init__(self, binary: Path):
        super().__init__("eval-platform-rotel-")
        self.binary = binary
        self.port = free_port()
        self.grpc_port = free_port()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [
            str(self.binary),
            "start",
            "--otlp-http-endpoint",
            f"127.0.0.1:{self.port}",
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{self.grpc_port}",
            "--exporter",
            "blackhole",
            "--debug-log",
            "logs",
            "--debug-log-verbosity",
            "detailed",
            "--pid-file",
            str(self.folder / "rotel.pid"),
        ]
        self._start(command, {})
        # A POST of an empty export request answers 200 once the receiver listens.
        self._wait(
            lambda: (
                httpx.post(
                    f"{self.endpoint}/v1/logs", content=b"", headers={"Content-Type": "application/x-protobuf"}
                ).status_code
                == 200
            ),
            "rotel",
        )

    def records(self) -> list[ReceivedRecord]:
        """Every log record received so far, in arrival order."""
        records: list[ReceivedRecord] = []
        lines = self.log_text().splitlines()
        current: ReceivedRecord | None = None
        for line in lines:
            if re.match(r"^LogRecord #\d+", line):
                current = ReceivedRecord()
                records.append(current)
                continue
            if current is None:
                continue
            if re.match(r"^(ResourceLog|ScopeLogs) #\d+", line):
                current = None
                continue
            current.text += line + "\n"
            if line.startswith("EventName: "):
                current.event_name = line.removeprefix("EventName: ").strip()
            elif match := re.match(r"^\s+Trace ID\s+: (\w+)", line):
                current.trace_id = match.group(1)
            elif match := re.match(r"^\s+Span ID\s+: (\w+)", line):
                current.span_id = match.group(1)
            elif match := _ATTRIBUTE.match(line):
                current.attributes[match.group(1)] = match.group(2)
        return records

    def wait_for(self, count: int, timeout_s: float = 60) -> list[ReceivedRecord]:
        """The records once at least `count` arrived (the collector prints them as they come); a guard only."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.records()
            if len(found) >= count:
                return found
            time.sleep(0.2)
        return self.records()


def find_phoenix_venv() -> Path | None:
    given = os.environ.get(PHOENIX_VENV_ENV)
    venv = Path(given) if given else DEFAULT_PHOENIX_VENV
    return venv if (venv / "bin" / "phoenix").is_file() else None


class PhoenixServer(_Process):
    """`phoenix serve` on 127.0.0.1, its database in a temp folder."""

    def __init__(self, venv: Path):
        super().__init__("eval-platform-phoenix-")
        self.venv = venv
        self.port = free_port()
        self.grpc_port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {
            "PHOENIX_WORKING_DIR": str(self.folder / "working"),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        self._start([str(self.venv / "bin" / "phoenix"), "serve"], env)
        self._wait(lambda: httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200, "phoenix")

    def spans(self, project: str) -> list[dict]:
        answer = httpx.get(f"{self.url}/v1/projects/{project}/spans", params={"limit": 1000}, timeout=30)
        return answer.json()["data"] if answer.status_code == 200 else []

    def annotations(self, project: str, span_ids: list[str]) -> list[dict]:
        """Every span annotation on these spans, read back through Phoenix's REST API."""
        found: list[dict] = []
        cursor = None
        while True:
            params: dict = {"span_ids": span_ids, "limit": 1000}
            if cursor:
                params["cursor"] = cursor
            answer = httpx.get(f"{self.url}/v1/projects/{project}/span_annotations", params=params, timeout=30)
            answer.raise_for_status()
            body = answer.json()
            found += body["data"]
            cursor = body.get("next_cursor")
            if not cursor:
                return found


@pytest.fixture
def collector():
    """A fresh Rotel collector per test (it starts in well under a second)."""
    binary = rotel_agent()
    if binary is None:
        missing(
            "the `rotel` package (an OpenTelemetry collector) is not installed: pip install -r requirements-dev.lock"
        )
    assert binary is not None
    server = Collector(binary)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    yield server
    server.stop()


@pytest.fixture(scope="session")
def phoenix_server():
    """A Phoenix server for the whole session (a fresh one migrates its database for about a minute)."""
    venv = find_phoenix_venv()
    if venv is None:
        missing(
            f"Phoenix's venv not found (${PHOENIX_VENV_ENV}, else {DEFAULT_PHOENIX_VENV}): build it with "
            "`.ci/phoenix-venv` (CI does)",
            PHOENIX_VENV_ENV,
        )
    assert venv is not None
    server = PhoenixServer(venv)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    yield server
    server.stop()
