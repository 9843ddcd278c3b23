"""One day of N traces end to end: ingest -> judge -> views, each step in its own fresh process, with each step's
wall time, CPU time and peak RSS, beside plain polars reading the same files and writing the same rows.

    python -m tools.perf.day_scale --traces 100000 [--concurrency 128] [--latency-ms 0] [--cap-gb 8]
        [--batch] [--steps ingest,judge_batch,...] [--root DIR] [--keep]

Setup (not timed): the local judge in its own process (`backfill_overhead.start_judge`), answering every call
after `latency-ms`; one score evaluator on it (the shape `backfill_overhead.write_project` writes); the day's
export files, `traces/<day>/export-NNN.jsonl` (100,000 traces each, written a file at a time: the script never
holds the day), with the trace shape of `backfill_overhead` (input, output, timestamp).

Then, each in a fresh `python -m tools.perf.day_scale --step ...` process (so a step's peak RSS is its
own, and no step inherits another's heap), under an address-space cap of `--cap-gb` (RLIMIT_AS):

- ingest: `defs.traces.ingest_day` (read the export files, write traces / spans / quarantine partitions);
- judge: `evaluator_day.judge_partition` with the evaluator (what the `judge_scores` asset runs per partition),
  the judge client at `--concurrency`, a cold judge cache and ledger;
- judge_batch (with `--batch`): the same day judged by the same evaluator in batch mode (`batch:`, its own cold
  cache, ledger and batch state), through the local judge's OpenAI batch API: the day recorded to disk, cut into
  batches of 50,000 requests, submitted, polled every 0.5 s, answered from the downloaded results;
- views: `defs.catalog.refresh` and two queries on the views (the day's traces; judge_scores per status);
- polars read+write (reference): `pl.scan_ndjson` over the day's files and `sink_parquet` of the same rows, then
  the judged partition read and written again with `pl.read_parquet` / `write_parquet`: what moving the day's
  rows costs with nothing else done, in the same run.

Printed per step: wall s, CPU s (user + system of the step's process, every thread), peak RSS (ru_maxrss of the
process), and the judge step's calls/s and the local judge's own CPU. Timings on a shared machine are noisy:
compare the steps of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval_platform.markdown_table import markdown_table
from eval_platform.storage.location import DataRoot
from tools.perf.synthetic_project import synthetic_trace, write_score_evaluator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DAY = "2026-11-10"
EVALUATOR = "helpfulness"
FILE_TRACES = 100_000  # traces per export file
STEPS = ("ingest", "judge", "views", "polars")
BATCH_EVALUATOR = f"{EVALUATOR}_batch"
TIMEOUT_S = 7200.0  # bounds a hang only


def write_day(root: Path, traces: int, judge_url: str, concurrency: int) -> None:
    """The evaluator and the day's export files (one file at a time in memory)."""
    write_score_evaluator(root, EVALUATOR, judge_url)
    write_score_evaluator(root, BATCH_EVALUATOR, judge_url, batch={"poll_interval_s": 0.5})
    folder = root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    for number, start in enumerate(range(0, traces, FILE_TRACES)):
        with open(folder / f"export-{number:03d}.jsonl", "w") as out:
            for i in range(start, min(start + FILE_TRACES, traces)):
                out.write(json.dumps(synthetic_trace(DAY, i, 7)) + "\n")


class _Log:
    def warning(self, message: str) -> None:
        print(f"warning: {message}", file=sys.stderr)

    info = warning


def run_step(step: str, root: Path, concurrency: int) -> dict:
    """One step, in this (fresh) process; returns what it did (rows, calls)."""
    from eval_platform.settings import warehouse_dir

    if step == "ingest":
        from eval_platform.defs.traces import ingest_day

        day = ingest_day(DataRoot.from_env(root), DAY, _Log())
        return {"traces": day.traces, "quarantined": day.quarantined}
    if step in ("judge", "judge_batch"):
        from eval_platform.judging.evaluator_day import judge_partition
        from eval_platform.judging.loading import load_evaluator
        from eval_platform.llm.budget import BudgetLedger
        from eval_platform.llm.cache import ModelCache
        from eval_platform.llm.client import LiteLLMModelClient
        from eval_platform.llm.runtime import ModelRuntime

        name = EVALUATOR if step == "judge" else BATCH_EVALUATOR
        config = load_evaluator(root / "evaluators" / f"{name}.yaml")
        state = root / ("state" if step == "judge" else "state_batch")
        runtime = ModelRuntime(
            client=LiteLLMModelClient(max_concurrency=concurrency),
            cache=ModelCache(state / "judge_cache"),
            ledger=BudgetLedger(state / "budget.sqlite"),
            env={},
        )
        judged = judge_partition(DataRoot.from_env(root), config, DAY, runtime, set())
        s = judged.summary
        return {
            "rows": s["rows"],
            "completed": s["completed"],
            "failed": s["failed"],
            "calls": s["calls"],
            "every_trace_has_one_status": judged.every_trace_has_one_status,
            "batches": len(s.get("batches", [])),
        }
    if step == "views":
        from eval_platform.defs.catalog import refresh
        from eval_platform.storage.warehouse import open_catalog

        refresh(DataRoot.from_env(root))
        with open_catalog(DataRoot.from_env(root)) as conn:
            traces = conn.execute("SELECT count(*) FROM traces WHERE date = ?", [DAY]).fetchone()[0]
            statuses = conn.execute(
                "SELECT status, count(*), avg(score) FROM judge_scores WHERE date = ? GROUP BY status ORDER BY 1",
                [DAY],
            ).fetchall()
        return {"traces": traces, "judge_scores": {s: n for s, n, _ in statuses}}
    if step == "polars":
        import polars as pl

        out = Path(tempfile.mkdtemp(prefix="day-scale-polars-", dir=root))
        files = sorted(str(p) for p in (root / "traces" / DAY).glob("*.jsonl"))
        pl.scan_ndjson(files).sink_parquet(out / "traces.parquet")
        judged = warehouse_dir(root) / "judge_scores" / f"evaluator={EVALUATOR}" / f"date={DAY}" / "part.parquet"
        rows = pl.read_parquet(judged)
        rows.write_parquet(out / "judge_scores.parquet")
        del rows
        traces = pl.scan_parquet(out / "traces.parquet").select(pl.len()).collect().item()
        shutil.rmtree(out)
        return {"traces": traces}
    raise ValueError(f"unknown step {step!r}")


def _worker(args: argparse.Namespace) -> int:
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    did = run_step(args.step, Path(args.root), args.concurrency)
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KB on Linux
    print(json.dumps({"step": args.step, "wall_s": wall, "cpu_s": cpu, "peak_rss_gb": peak_gb, **did}))
    return 0


def _process_cpu_s(pid: int) -> float:
    from tools.perf.judge_throughput import _process_cpu_s

    return _process_cpu_s(pid)


def measure(step: str, root: Path, concurrency: int, cap_gb: float, judge_pid: int) -> dict:
    cap = int(cap_gb * 2**30)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    command = [sys.executable, "-m", "tools.perf.day_scale", "--step", step, "--root", str(root)]
    command += ["--concurrency", str(concurrency)]
    judge_cpu = _process_cpu_s(judge_pid)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, preexec_fn=limit)
    outer = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"step {step} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = outer  # with the interpreter's start and imports
    result["judge_cpu_s"] = _process_cpu_s(judge_pid) - judge_cpu
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--cap-gb", type=float, default=8.0, help="address-space cap of every step's process")
    parser.add_argument("--batch", action="store_true", help="also judge the day in batch mode (judge_batch)")
    parser.add_argument("--steps", help="the steps to run, in this order, comma-separated (default: all)")
    parser.add_argument("--root", help="the data root to use (default: a temp folder, removed unless --keep)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--step", choices=(*STEPS, "judge_batch"), help=argparse.SUPPRESS)  # in a worker process
    args = parser.parse_args(argv)
    if args.step:
        return _worker(args)

    from tools.perf.backfill_overhead import start_judge

    root = Path(args.root or tempfile.mkdtemp(prefix="day-scale-"))
    judge, judge_url = start_judge(args.latency_ms)
    try:
        setup = time.perf_counter()
        write_day(root, args.traces, judge_url, args.concurrency)
        size_mb = sum(p.stat().st_size for p in (root / "traces" / DAY).glob("*.jsonl")) / 2**20
        print(
            f"{args.traces:,} traces ({size_mb:,.0f} MB of JSONL) written in {time.perf_counter() - setup:.1f} s; "
            f"local judge at {args.latency_ms:g} ms, concurrency {args.concurrency}, cap {args.cap_gb:g} GB per step"
        )
        results = []
        steps = (*STEPS[:2], "judge_batch", *STEPS[2:]) if args.batch else STEPS
        if args.steps:
            steps = tuple(args.steps.split(","))
        for step in steps:
            result = measure(step, root, args.concurrency, args.cap_gb, judge.pid)
            results.append(result)
            print(json.dumps(result), flush=True)
        print()
        columns = ["step", "wall s", "CPU s", "peak RSS GB", "notes"]
        rows = []
        for r in results:
            notes = ""
            if r["step"] in ("judge", "judge_batch"):
                notes = (
                    f"{r['calls']:,} calls, {r['calls'] / r['wall_s']:,.0f} calls/s, local judge CPU "
                    f"{r['judge_cpu_s']:.1f} s, every trace one status: {r['every_trace_has_one_status']}"
                )
                if r["step"] == "judge_batch":
                    notes += f", {r['batches']} batches, {r['completed']:,} completed"
            elif r["step"] in ("ingest", "views", "polars"):
                notes = f"{r.get('traces', 0):,} traces"
            rows.append([r["step"], f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}", f"{r['peak_rss_gb']:.2f}", notes])
        day = [r for r in results if r["step"] not in ("polars", "judge_batch")] or results
        whole_day = [
            "whole day (ingest + judge + views)",
            f"{sum(r['wall_s'] for r in day):.1f}",
            f"{sum(r['cpu_s'] for r in day):.1f}",
            f"{max(r['peak_rss_gb'] for r in day):.2f}",
            "",
        ]
        print(markdown_table([dict(zip(columns, row, strict=True)) for row in [*rows, whole_day]], columns))
    finally:
        judge.terminate()
        judge.wait(30)
        if not args.keep and not args.root:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
