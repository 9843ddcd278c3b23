"""The demo's agent traces: the agent app (`sample_data.agent_app`) recorded under the real instrumentation
libraries, one run per sample day, each recording moved onto its day.

    python -m tools.sample_data.agent_traces [--data-dir data]     (also run by sample_data.build)

Needs the `test` extra (the instrumentation libraries, the OpenTelemetry SDK and exporter): the demo only reads
the committed files. For each sample day D and each instrumentation I of `INSTRUMENTATIONS`, the recorder runs the
app's scenarios as run `D-I` (its own questions, session ids and trace ids: `agent_app.app.script_for`) against
the local judge's `app/assistant` model, and the OTLP receiver writes what the Collector's file exporter would.
The files land in `traces/D/` as `agent_<instrumentation>.jsonl.gz` (and `agent_<instrumentation>_logs.jsonl.gz`
for the GenAI log events), gzip-compressed as the Collector's exporter can write them, to keep the data small.

Timestamps: a recording carries the wall-clock time it was made. Each recording is moved onto its day by one
constant offset: its earliest span start goes to `D` at the instrumentation's hour (`START_TIMES`), and every
timestamp in its files moves by the same number of nanoseconds: the OTLP `startTimeUnixNano`,
`endTimeUnixNano`, `timeUnixNano` and `observedTimeUnixNano` fields, and the ISO-8601 instants inside attribute
values (Langfuse's `completion_start_time`). Nothing else is touched: every other byte is the instrumentation's
output as the receiver wrote it (durations, order of spans, lines and batches included). `agent_recordings.json`
beside `traces/` lists the library versions and, per day and instrumentation, the files, the run, the offset
applied and the scenarios' trace ids.

What varies between two generations: the timestamps within a recording (durations are measured), the receiver's
port and the SDK's instance id in the resource. The ids, texts, sessions and tokens are the same every time.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import re
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# The instrumentations the demo ships, each at its own time of day (UTC hour, minute) on every sample day:
# GenAI with content (spans and log events), GenAI with the instrumentation's default (no content: the traces a
# judge must never be paid for), OpenLLMetry, OpenInference and Langfuse.
START_TIMES: dict[str, tuple[int, int]] = {
    "genai": (9, 0),
    "genai_no_content": (10, 30),
    "openllmetry": (12, 0),
    "openinference": (14, 15),
    "langfuse": (16, 45),
}
INSTRUMENTATIONS = tuple(START_TIMES)
MANIFEST_FILE = "agent_recordings.json"
FILE_PREFIX = "agent_"
# The modules of the test extra a recording needs (checked before anything is deleted).
REQUIRED_MODULES = (
    "opentelemetry.sdk",
    "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry.instrumentation.openai_v2",
    "opentelemetry.instrumentation.openai",
    "openinference.instrumentation.openai",
    "langfuse",
)

_NANOS = re.compile(rb'("(?:startTimeUnixNano|endTimeUnixNano|timeUnixNano|observedTimeUnixNano)":\s*"?)(\d+)')
_ISO_INSTANT = re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z")


def require_test_extra() -> None:
    """Exit naming the recorder's libraries that are not installed (the `test` extra)."""
    missing = []
    for name in REQUIRED_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise SystemExit(
            f"recording the demo's agent traces needs the test extra ({', '.join(missing)} not installed): "
            "pip install -e '.[test]'"
        )


def earliest_start_ns(data: bytes) -> int:
    """The earliest `startTimeUnixNano` of an OTLP/JSON file's spans."""
    starts = [int(m.group(2)) for m in _NANOS.finditer(data) if m.group(1).startswith(b'"startTimeUnixNano"')]
    if not starts:
        raise ValueError("the recording holds no span (no startTimeUnixNano)")
    return min(starts)


def _shift_iso(match: re.Match[bytes], offset_ns: int) -> bytes:
    text = match.group(0).decode()
    whole, _, fraction = text.removesuffix("Z").partition(".")
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    moved_ns = int(datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp()) * 1_000_000_000 + nanos + offset_ns
    seconds, rest = divmod(moved_ns, 1_000_000_000)
    moved = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if fraction:
        moved += "." + f"{rest:09d}"[: len(fraction)]
    return (moved + "Z").encode()


def shift_timestamps(data: bytes, offset_ns: int) -> bytes:
    """Every timestamp of an OTLP/JSON file moved by `offset_ns`; every other byte unchanged."""
    data = _NANOS.sub(lambda m: m.group(1) + str(int(m.group(2)) + offset_ns).encode(), data)
    return _ISO_INSTANT.sub(lambda m: _shift_iso(m, offset_ns), data)


def day_start_ns(day: str, instrumentation: str) -> int:
    hour, minute = START_TIMES[instrumentation]
    start = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(hours=hour, minutes=minute)
    return int(start.timestamp()) * 1_000_000_000


def agent_files(folder: Path) -> list[Path]:
    """The agent trace files this module writes into a day folder."""
    return sorted(folder.glob(f"{FILE_PREFIX}*.jsonl.gz"))


def _write_gzip(path: Path, data: bytes) -> None:
    # mtime 0 and no file name in the header: the same bytes give the same file
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        out.write(data)


def build_agent_traces(data_dir: Path, days: tuple[str, ...]) -> dict[str, Any]:
    """Record the agent app for each day and write its files into `data_dir/traces/<day>/`; returns the
    manifest (also written to `data_dir/agent_recordings.json`, where other days' entries are kept)."""
    from tools.sample_data.agent_app.recorder import record

    require_test_extra()
    manifest_path = data_dir / MANIFEST_FILE
    earlier = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest: dict[str, Any] = {"instrumentations": list(INSTRUMENTATIONS), "days": earlier.get("days", {})}
    with tempfile.TemporaryDirectory(prefix="agent-recordings-") as scratch:
        for day in days:
            folder = data_dir / "traces" / day
            folder.mkdir(parents=True, exist_ok=True)
            for stale in agent_files(folder):
                stale.unlink()
            manifest["days"][day] = {}
            for name in INSTRUMENTATIONS:
                # a run per day and instrumentation: its own questions, sessions and ids
                recording = record(Path(scratch) / day, [name], run=f"{day}-{name}")[name]
                traces = (recording.folder / "traces.jsonl").read_bytes()
                offset_ns = day_start_ns(day, name) - earliest_start_ns(traces)
                files = {"traces": f"{FILE_PREFIX}{name}.jsonl.gz"}
                _write_gzip(folder / files["traces"], shift_timestamps(traces, offset_ns))
                logs = recording.folder / "logs.jsonl"
                if logs.exists() and logs.stat().st_size:
                    files["logs"] = f"{FILE_PREFIX}{name}_logs.jsonl.gz"
                    _write_gzip(folder / files["logs"], shift_timestamps(logs.read_bytes(), offset_ns))
                recorded = json.loads((recording.folder / "manifest.json").read_text())
                manifest["days"][day][name] = {
                    "files": files,
                    "run": recorded["run"],
                    "offset_ns": offset_ns,
                    "scenarios": recorded["scenarios"],
                }
                manifest["packages"] = recorded["packages"]  # one environment records every run
    manifest["days"] = dict(sorted(manifest["days"].items()))
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> None:
    from tools.sample_data.build import DAYS, default_data_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(), help="the data folder")
    parser.add_argument("--day", action="append", help="only this sample day (repeatable; default: all)")
    args = parser.parse_args(argv)
    manifest = build_agent_traces(args.data_dir.resolve(), tuple(args.day or DAYS))
    for day, recordings in manifest["days"].items():
        counts = ", ".join(f"{name}: {sum(map(len, r['scenarios'].values()))}" for name, r in recordings.items())
        print(day, counts)


if __name__ == "__main__":
    main()
