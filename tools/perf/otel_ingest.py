"""A day of OTLP agent traces through the ingest, beside plain pyarrow / polars reading the same files.

    python -m tools.perf.otel_ingest [--spans 1000000] [--files 8] [--keep DIR] [--memory-limit-gb 12]

The day is built from the recorded instrumentation output in `eval_platform_tests/fixtures/otel/` (OTel
GenAI, OpenLLMetry, OpenInference, Langfuse: 12 traces, 30 spans each set, spans of a trace on several
lines): every recorded line is replicated with new trace and span ids until the day holds `--spans` spans,
written as Collector file-exporter JSON lines over `--files` files. Each reader then runs in its own process
(so each peak RSS is its own): `read_trace_day` (the whole ingest: parse, assemble, read conventions, model,
validate, frames), `pyarrow.json.read_json` and `polars.read_ndjson` of the same files (parse only, nothing
assembled). Prints one line per reader: wall seconds (and CPU seconds, which a loaded machine changes less),
peak RSS, what it produced. Each reader's address space is
capped (`--memory-limit-gb`, RLIMIT_AS) so that one needing more than the machine fails alone ("failed ... after
N s"), rather than the machine's OOM killer choosing a victim.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURES = Path(__file__).parents[2] / "eval_platform_tests" / "fixtures" / "otel"
FOLDERS = {
    "genai": "traces.jsonl",
    "openllmetry": "traces.json",
    "openinference": "traces.jsonl.gz",
    "langfuse": "traces.jsonl",
}
DAY = "2026-11-23"
_ID = re.compile(r'"(traceId|spanId|parentSpanId)":"([0-9a-f]{16}|[0-9a-f]{32})"')


def _templates() -> list[tuple[str, int]]:
    """Each recorded line as a format template over its ids, with its span count."""
    templates = []
    for folder, name in FOLDERS.items():
        data = (FIXTURES / folder / name).read_bytes()
        text = (gzip.decompress(data) if name.endswith(".gz") else data).decode()
        for line in text.splitlines():
            line = line.replace("{", "{{").replace("}", "}}")
            template = _ID.sub(lambda m: f'"{m.group(1)}":"{m.group(2)[:-8]}{{r}}"', line)
            templates.append((template, line.count('"spanId"')))
    return templates


def build_day(root: Path, spans: int, files: int) -> tuple[int, int]:
    """Write the day under `root/traces/DAY/`; returns the spans written and the copies of the recordings."""
    folder = root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    templates = _templates()
    handles = [(folder / f"otel-{i:02d}.jsonl").open("w") for i in range(files)]
    written, replica = 0, 0
    while written < spans:
        out = handles[replica % files]  # one replica's lines stay in one file, in recorded order
        for template, count in templates:
            out.write(template.format(r=f"{replica:08x}") + "\n")
            written += count
        replica += 1
    for handle in handles:
        handle.close()
    return written, replica


READERS = {
    "ingest": "from eval_platform.ingest import read_trace_day; d = read_trace_day(ROOT, DAY); "
    "out = f'{d.traces.height} traces, {d.spans.height} spans, {d.quarantine.height} quarantined'",
    "pyarrow": "import pyarrow.json as pj, pyarrow as pa; "
    "t = pa.concat_tables([pj.read_json(p) for p in FILES], promote_options='permissive'); "
    "out = f'{t.num_rows} requests (lines) parsed'",
    "polars": "import polars as pl; f = pl.concat([pl.read_ndjson(p, infer_schema_length=None) for p in FILES], "
    "how='diagonal_relaxed'); out = f'{f.height} requests (lines) parsed'",
}


def run_reader(name: str, root: Path, limit_gb: float = 12.0) -> str:
    return run_measured(READERS[name], root, limit_gb)


def run_measured(
    statement: str, root: Path, limit_gb: float = 12.0, day: str = DAY, checkout: Path | None = None
) -> str:
    """Run `statement` (which sets `out`, a description of what it produced; `ROOT`, `DAY` and `FILES`, the day's
    files, are set) in a fresh process under an address-space cap; its wall and CPU seconds and peak RSS.
    `checkout`: another checkout of the project whose package the process imports (first on PYTHONPATH)."""
    code = (
        "import resource, sys, time\nfrom pathlib import Path\n"
        f"ROOT, DAY = Path({str(root)!r}), {day!r}\n"
        f"FILES = sorted(str(p) for p in (ROOT / 'traces' / DAY).iterdir())\n"
        "start = time.perf_counter()\n"
        "try:\n"
        f"    {statement}\n"
        "except Exception as exc:\n"
        "    out = f'failed: {type(exc).__name__}: {str(exc)[:120]}'\n"
        "took = time.perf_counter() - start\n"
        "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
        "rss, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime\n"
        "print(f'{took:.1f} s (CPU {cpu:.1f} s), peak RSS {rss:.0f} MB, {out}')\n"
    )
    limit = int(limit_gb * 2**30)
    start = time.perf_counter()
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(checkout).resolve()), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        # `python -c` puts its working folder first on sys.path: run in the other checkout, or it imports this one
        cwd=str(Path(checkout).resolve()) if checkout is not None else None,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no message"]
        last = next((line for line in lines if "memory" in line.lower()), lines[-1])[:160]
        took = time.perf_counter() - start
        return f"failed (exit {done.returncode}, {limit_gb:g} GB address-space cap) after {took:.1f} s: {last}"
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--keep", type=Path, help="build the day here and keep it")
    parser.add_argument("--memory-limit-gb", type=float, default=12.0, help="address-space cap of each reader")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        start = time.perf_counter()
        written, copies = build_day(root, args.spans, args.files)
        size = sum(p.stat().st_size for p in (root / "traces" / DAY).iterdir()) / 1e6
        traces = copies * 12 * len(FOLDERS)
        print(
            f"day: {written:,} spans, {traces:,} traces ({copies:,} copies of the {len(FOLDERS)} recordings), "
            f"{size:,.0f} MB in {args.files} files, built in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
        for name in READERS:
            print(f"{name:8s} {run_reader(name, root, args.memory_limit_gb)}", flush=True)


if __name__ == "__main__":
    main()
