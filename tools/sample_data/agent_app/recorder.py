"""Record the demo app's traces: the local judge plays the app's model, an OTLP receiver writes Collector-style
files, and each instrumentation runs the scenarios in a process of its own (they patch `openai` globally).

Output, per instrumentation, under `out/<instrumentation>/`: the traces file (`traces.jsonl` by default), the
logs file when the library emitted log records (GenAI events), and `manifest.json` (the trace ids of each
scenario, the library versions used).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.sample_data.agent_app import CONVENTIONS, convention_class
from tools.sample_data.agent_app.convention import ScenarioLedger, set_run
from tools.sample_data.agent_app.langfuse_sdk import LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY
from tools.sample_data.otlp_receiver import OtlpFileReceiver, ReceiverStats

RUN_TIMEOUT_S = 180
# The distributions whose versions a recording depends on (written to manifest.json).
PACKAGES = (
    "openai",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry-instrumentation-openai-v2",
    "opentelemetry-util-genai",
    "opentelemetry-instrumentation-openai",
    "opentelemetry-semantic-conventions-ai",
    "traceloop-sdk",
    "openinference-instrumentation-openai",
    "openinference-instrumentation",
    "langfuse",
    "openlit",
)


@dataclass
class Recording:
    """One instrumentation's recording: its folder, what the receiver wrote, the scenarios' trace ids."""

    folder: Path
    stats: ReceiverStats
    scenarios: dict[str, list[str]]

    def summary(self) -> dict[str, object]:
        """Counts to print after recording."""
        return {
            "folder": str(self.folder),
            "traces": sum(len(ids) for ids in self.scenarios.values()),
            "spans": self.stats.spans,
            "trace_lines": self.stats.trace_requests,
            "log_records": self.stats.log_records,
            "refused": self.stats.refused,
        }


def _clean_env(extra: dict[str, str]) -> dict[str, str]:
    """The parent's environment without its own OpenTelemetry / Langfuse / provider settings, plus `extra`."""
    dropped = ("OTEL_", "LANGFUSE_", "TRACELOOP_", "OPENINFERENCE_", "OPENAI_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    return {**env, **extra}


def record(
    out_dir: Path,
    instrumentations: list[str] | None = None,
    traces_file: str = "traces.jsonl",
    logs_file: str = "logs.jsonl",
    run: str | None = None,
    python: str | None = None,
    scenarios: list[str] | None = None,
) -> dict[str, Recording]:
    """Record every (or the named) instrumentation into `out_dir/<name>/`, replacing earlier files there. A named
    `run` draws its own questions and session ids (`app.script_for`) and trace ids; None records the test
    recordings' script.

    `scenarios`: only these (`app.SCENARIOS` and `app.EXTRA_SCENARIOS` names); default: every one of `SCENARIOS`.
    `python`: the interpreter that runs the app (default: this one); the local judge and the receiver stay in this
    process. A scratch venv holding older releases of a library records what those releases wrote
    (`LEGACY_CONVENTIONS`, eval_platform_tests/fixtures/otel/README.md)."""
    from tools.local_judge_wires import WiredJudgeServer

    names = instrumentations or list(CONVENTIONS)
    results: dict[str, Recording] = {}
    with WiredJudgeServer() as judge:
        for name in names:
            folder = Path(out_dir) / name
            folder.mkdir(parents=True, exist_ok=True)
            for stale in (traces_file, logs_file, "manifest.json"):
                (folder / stale).unlink(missing_ok=True)
            receiver = OtlpFileReceiver(
                folder, traces_file, logs_file, credentials=(LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY)
            )
            manifest = folder / "manifest.json"
            with receiver:
                command = [python or sys.executable, "-m", "tools.sample_data.agent_app", "run"]
                command += ["--instrumentation", name, "--base-url", judge.base_url]
                command += ["--endpoint", receiver.endpoint, "--manifest", str(manifest)]
                command += ["--run", run] if run is not None else []
                command += [arg for name in scenarios or [] for arg in ("--scenario", name)]
                completed = subprocess.run(
                    command,
                    env=_clean_env(convention_class(name).env),
                    capture_output=True,
                    text=True,
                    timeout=RUN_TIMEOUT_S,
                )
            if completed.returncode != 0:
                raise RuntimeError(f"recording {name} failed (exit {completed.returncode}):\n{completed.stderr}")
            if receiver.stats.refused:
                raise RuntimeError(f"recording {name}: the receiver refused {receiver.stats.refused}")
            found = json.loads(manifest.read_text())["scenarios"]
            results[name] = Recording(folder, receiver.stats, found)
    return results


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class LoopbackOnly:
    """An audit hook for the recording process: a connection to, or a name lookup of, anything but loopback is
    refused (OSError, as if the network were down) and noted, so no library reaches the network unseen (a
    telemetry or sync thread that swallows the error is still caught by `refused`)."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.connect":
            address = args[1]
            host = address[0] if isinstance(address, tuple) else None  # a unix socket path is local
        elif event == "socket.getaddrinfo":
            host = args[0]
        else:
            return
        if isinstance(host, bytes):
            host = host.decode(errors="replace")
        if host is None or is_loopback(str(host)):
            return
        self.refused.append(f"{event} {host}")
        raise OSError(f"the demo app talks to loopback addresses only, not {host!r}")


def run_in_process(
    name: str,
    base_url: str,
    endpoint: str,
    manifest: Path,
    run: str | None = None,
    scenarios: list[str] | None = None,
) -> None:
    """Instrument this process with one library, run every scenario (of the named run), flush, and write the
    manifest. Nothing may leave the machine (`LoopbackOnly`): the run fails if any library tried."""
    from tools.sample_data.agent_app.app import run_scenarios, script_for

    guard = LoopbackOnly()
    sys.addaudithook(guard)
    set_run(run)
    ledger = ScenarioLedger()
    convention = convention_class(name)(endpoint, ledger)
    convention.setup()
    try:
        run_framework = getattr(convention, "run_framework", None)  # a framework runs its own scenarios
        if run_framework is not None:
            traces = run_framework(base_url)
        else:
            traces = run_scenarios(convention, base_url, script_for(run), scenarios)
    finally:
        convention.shutdown()
    if guard.refused:
        raise RuntimeError(f"{name} tried to reach the network: {sorted(set(guard.refused))}")
    versions = {}
    for package in (*PACKAGES, *getattr(convention, "packages", ())):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    written: dict[str, Any] = {"instrumentation": name, "run": run, "scenarios": traces, "packages": versions}
    if convention.requirements:  # an older release: how to make the venv it was recorded in, and to record it
        written["scratch_venv"] = scratch_venv_commands(name, convention.requirements)
    manifest.write_text(json.dumps(written, indent=2) + "\n")


def scratch_venv_commands(name: str, requirements: tuple[str, ...]) -> list[str]:
    """The commands (run from the repository's root, with the project's venv in .venv) that re-create the scratch
    venv holding an older release and record `name` with it into eval_platform_tests/fixtures/otel/<name>/."""
    venv = f"/tmp/venv-{name}"
    pins = " ".join(f"'{requirement}'" for requirement in requirements)
    return [
        f"python3 -m venv {venv}",
        f"{venv}/bin/pip install {pins}",
        f"{venv}/bin/pip install --no-deps -e .",
        "PYTHONPATH=$PWD .venv/bin/python -m tools.sample_data.agent_app record"
        f" --out eval_platform_tests/fixtures/otel --instrumentation {name} --python {venv}/bin/python",
    ]
