"""The `traces` step (`defs.traces.ingest_day`: read a day, write its partitions) at scale, beside plain polars /
pyarrow reading the same files and writing the same rows, in the same run.

    python -m tools.perf.trace_ingest_scale [--traces 100000 1000000] [--otel-spans 100000] [--files 8]
        [--before DIR]

Two kinds of day, each step in its own process (so each peak RSS is its own, capped by `--memory-limit-gb`):

- plain trace exports: `--traces` JSON lines traces (an id, timestamp, ~300 characters of input, ~600 of output,
  metadata, model, tokens, latency, cost) over `--files` files. Beside the step: `polars.read_ndjson` of the files
  then `write_parquet` of the frame (no validation, no quarantine, no order kept across files);
- OTLP Collector lines (`perf/otel_ingest.build_day`: the recorded instrumentations replicated with new ids,
  `--otel-spans` spans). Beside the step: `pyarrow.json.read_json` of the files then `pyarrow.parquet.write_table`
  (parse and write only: nothing assembled; polars cannot read a 1M-span day within 12 GB, see the README).

Prints per day and step: wall seconds, CPU seconds, peak RSS, what it wrote; then the ratio of the step's wall time
to its baseline's. `--before DIR` also runs the step of another checkout of the project (an earlier commit in a
`git worktree` or `git archive`), on the same files, right after this one's: before and after in the same run.
Timings on a shared machine are noisy: compare the ratio within one run.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

from tools.perf.otel_ingest import DAY, run_measured
from tools.perf.otel_ingest import build_day as build_otel_day

STEP = (
    "import logging; from eval_platform.defs.traces import ingest_day; "
    "d = ingest_day(ROOT, DAY, logging.getLogger('perf')); "
    "out = f'{d.traces} traces, {d.spans} spans, {d.quarantined} quarantined written'"
)
POLARS = (
    "import polars as pl; f = pl.concat([pl.read_ndjson(p, infer_schema_length=None) for p in FILES], "
    "how='diagonal_relaxed'); f.write_parquet(ROOT / 'plain.parquet'); out = f'{f.height} rows written'"
)
PYARROW = (
    "import pyarrow as pa, pyarrow.json as pj, pyarrow.parquet as pq; "
    "t = pa.concat_tables([pj.read_json(p) for p in FILES], promote_options='permissive'); "
    "pq.write_table(t, ROOT / 'plain.parquet'); out = f'{t.num_rows} requests (lines) written'"
)
_WALL = re.compile(r"^([\d.]+) s \(CPU ([\d.]+) s\)")


def build_plain_day(root: Path, traces: int, files: int) -> int:
    """`traces` plain JSON lines traces under `root/traces/DAY/`, over `files` files; returns the bytes written."""
    folder = root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    handles = [(folder / f"export-{i:02d}.jsonl").open("w") for i in range(files)]
    for i in range(traces):
        row = {
            "trace_id": f"{DAY}-{i:08d}",
            "timestamp": f"{DAY}T{i % 24:02d}:{i % 60:02d}:{(i // 60) % 60:02d}Z",
            "input": f"Question {i}: " + "summarise the customer's account history and open tickets. " * 5,
            "output": f"Answer {i}: " + "the account is in good standing; two tickets are open, one overdue. " * 9,
            "metadata": {"customer_tier": ["free", "pro", "enterprise"][i % 3], "region": "eu-west-1"},
            "model": "gpt-4o-mini",
            "project_id": "support-bot",
            "prompt_tokens": 180 + i % 50,
            "completion_tokens": 240 + i % 70,
            "latency_ms": 800.0 + i % 400,
            "cost_usd": 0.00021,
        }
        handles[i % files].write(json.dumps(row) + "\n")
    for handle in handles:
        handle.close()
    return sum(p.stat().st_size for p in folder.iterdir())


def _times(line: str) -> tuple[float, float] | None:
    found = _WALL.match(line)
    return (float(found.group(1)), float(found.group(2))) if found else None


def measure(
    label: str, root: Path, baseline_name: str, baseline: str, limit_gb: float, before: Path | None = None
) -> None:
    step = run_measured(STEP, root, limit_gb)
    print(f"  traces step        {step}", flush=True)
    if before is not None:
        print(f"  step, --before     {run_measured(STEP, root, limit_gb, checkout=before)}", flush=True)
    base = run_measured(baseline, root, limit_gb)
    print(f"  {baseline_name:18s} {base}", flush=True)
    ours, theirs = _times(step), _times(base)
    if ours and theirs:
        ratios = f"{ours[0] / theirs[0]:.2f}x the wall time, {ours[1] / theirs[1]:.2f}x the CPU time"
        print(f"  {label}: the step takes {ratios} of {baseline_name}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, nargs="*", default=[100_000, 1_000_000], help="plain days to measure")
    parser.add_argument("--otel-spans", type=int, nargs="*", default=[100_000], help="OTLP days to measure")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--memory-limit-gb", type=float, default=8.0, help="address-space cap of each process")
    parser.add_argument("--before", type=Path, help="also run the step of this other checkout of the project")
    args = parser.parse_args(argv)
    for n in args.traces:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            size = build_plain_day(Path(tmp), n, args.files)
            took = time.perf_counter() - start
            print(f"plain day: {n:,} traces, {size / 1e6:,.0f} MB in {args.files} files (built in {took:.1f} s)")
            measure(f"{n:,} plain traces", Path(tmp), "polars read+write", POLARS, args.memory_limit_gb, args.before)
    for spans in args.otel_spans:
        with tempfile.TemporaryDirectory() as tmp:
            written, copies = build_otel_day(Path(tmp), spans, args.files)
            size = sum(p.stat().st_size for p in (Path(tmp) / "traces" / DAY).iterdir())
            print(f"OTLP day: {written:,} spans ({copies:,} copies of the recordings), {size / 1e6:,.0f} MB")
            measure(
                f"{written:,} OTLP spans", Path(tmp), "pyarrow read+write", PYARROW, args.memory_limit_gb, args.before
            )


if __name__ == "__main__":
    main()
