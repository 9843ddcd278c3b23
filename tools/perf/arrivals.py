"""One file arriving into a day that already holds many: what ingesting and judging it again costs (issue 34).

    python -m tools.perf.arrivals [--traces 100000] [--files 100] [--arrival 1000] [--history-days 0] [--before DIR]
    python -m tools.perf.arrivals --otlp [--spans 200000] [--files 100] [--arrival 1000] [--before DIR]

Setup (timed, but not the figure): the local judge in its own process (`backfill_overhead.start_judge`, 0 ms); one
score evaluator on it; a day of `--traces` JSONL traces over `--files` files (`synthetic_project.synthetic_trace`),
ingested (`defs.traces.ingest_day`) and judged (what the `judge_scores` asset runs for a partition: the day a part
at a time where it can, `judging/increments.py`, else `evaluator_day.judge_partition`), with a cold judge cache.
Then the steps downstream of `judge_scores` that each arrival triggers run once (the partition's `judge_day_numbers`,
`judge_cost_daily`, the `alerts` computation, the `report`), so each starts from what the last arrival left
(`--history-days N`: before them, N earlier days of verdicts, copies of the day's, which the rollups over every day
read). Then one file of `--arrival` new traces is added to the day and every step runs again: those are the figures.
Each step runs in a fresh process (`otel_ingest.run_measured`: wall, CPU and peak RSS of the process); a process that
only imports is the baseline to read them against. `--before DIR`: the same on another checkout of the project
(`git archive main | tar -x -C DIR`), on its own copy of the day, in the same run, so before and after share the
machine's load.

`--otlp`: ingest and judge only, the day `--spans` OTLP spans instead (the recordings of `otel_ingest.build_day`,
replicated with new ids, each replica's export lines in one file) and the arrival a file of about `--arrival` spans:
new replicas, and the later GenAI lines of the day's last replica (the later spans and roots of traces whose first
spans are in a file of the day: the arrival re-assembles them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tools.perf.backfill_overhead import start_judge
from tools.perf.otel_ingest import _templates, run_measured
from tools.perf.synthetic_project import synthetic_trace, write_score_evaluator

DAY = (datetime.now(UTC) - timedelta(days=2)).date().isoformat()
EVALUATOR = "arrivals"
# `W`: the data root as the storage functions take it (`DataRoot`; a bare path in a checkout from before it)
WAREHOUSE = (
    "from eval_platform.storage import location as _l; "
    "W = _l.DataRoot.from_env(ROOT) if hasattr(_l, 'DataRoot') else ROOT; "
)
INGEST = WAREHOUSE + (
    "import logging; from eval_platform.defs.traces import ingest_day; "
    "d = ingest_day(W, DAY, logging.getLogger('perf')); "
    "n = getattr(d, 'read', None); "
    "out = f'{d.traces} traces in the day, {len(d.files if n is None else n)} file(s) read'"
)
JUDGE = WAREHOUSE + (
    "import importlib.util; from eval_platform.defs.resources import JudgeResource; "
    "from eval_platform.judging.loading import load_evaluator; "
    "from eval_platform.judging.evaluator_day import judge_partition; "
    "parts = importlib.util.find_spec('eval_platform.judging.increments') is not None; "
    "inc = __import__('eval_platform.judging.increments', fromlist=['judge_in_parts']) if parts else None; "
    f"c = load_evaluator(ROOT / 'evaluators' / '{EVALUATOR}.yaml'); r = JudgeResource().runtime(ROOT); "
    "j = (inc.judge_in_parts(W, c, DAY, r, set()) if inc else None) or judge_partition(W, c, DAY, r, set()); "
    "s = j.summary; out = f\"{s['rows']} rows in the day, {s['calls']} calls, {s['cache_hits']} cache hits\""
)
# The rollups an arrival triggers after judge_scores, each as its asset computes it (defs/judging.py, defs/costs.py,
# defs/experiments.py `alerts`, defs/report.py), without Dagster around it.
DAY_NUMBERS = WAREHOUSE + (
    "from eval_platform.judging.day_numbers import write_day_numbers; "
    f"write_day_numbers(W, '{EVALUATOR}', DAY); out = 'judge_day_numbers of the partition written'"
)
COST = WAREHOUSE + (
    "from eval_platform import costs; "
    "from eval_platform.judging.loading import load_evaluator; "
    "from eval_platform.storage.warehouse import write_partition; "
    f"c = load_evaluator(ROOT / 'evaluators' / '{EVALUATOR}.yaml'); ledger = costs.judge_ledger(ROOT); "
    "counted = getattr(costs, 'counted_cost_rollup', None); "
    "f, n = counted(W, {c.name: c}, ledger) if counted else (costs.cost_rollup(W, {c.name: c}, ledger), {}); "
    "write_partition(W, 'judge_cost_daily', {}, f); "
    "read = f\"{n['files_summed']} judge file(s) summed, {n['files_kept']} kept\" if n else 'every row read'; "
    "out = f\"{f.height} row(s), {f['rows'].sum():,} judge rows, {f['calls'].sum():,} calls; {read}\""
)
ALERTS = WAREHOUSE + (
    "from eval_platform.costs import judge_ledger; "
    "from eval_platform.experiments.inputs import read_final_scores; "
    "from eval_platform.experiments.regressions import regressions; "
    "from eval_platform.threshold_alerts import threshold_alerts_for; "
    "from eval_platform.judging.loading import load_evaluator; "
    f"c = load_evaluator(ROOT / 'evaluators' / '{EVALUATOR}.yaml'); "
    "s = read_final_scores(W, [c.name]); r = regressions(s, evaluators=[c.name]); "
    "t = threshold_alerts_for(W, {c.name: c}, judge_ledger(ROOT)); "
    "out = f'{s.height:,} final scores read, {r.height} regression(s), {t.height} threshold alert(s)'"
)
REPORT = WAREHOUSE + (
    "from eval_platform.defs.catalog import refresh; from eval_platform.report import build_report; "
    "refresh(W); r = build_report(ROOT); out = f'{r.plots} plot(s)'"
)
# What a fresh process costs before it does anything: the figure each step's CPU is read against.
BASELINE = "import polars; import eval_platform.storage.warehouse; out = 'nothing done'"
ROLLUPS = {"judge_day_numbers": DAY_NUMBERS, "judge_cost_daily": COST, "alerts": ALERTS, "report": REPORT}


def write_file(root: Path, name: str, start: int, n: int) -> None:
    folder = root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(synthetic_trace(DAY, i, 8)) + "\n" for i in range(start, start + n)))
    then = time.time() - 3600  # settled
    os.utime(path, (then, then))


def copy_history(root: Path, days: int) -> None:
    """`days` earlier days of judged verdicts: copies of the day's judge_scores partition (a warehouse with a history,
    which the rollups over every day read; the arrival is into the latest day)."""
    judged = root / "warehouse" / "judge_scores" / f"evaluator={EVALUATOR}"
    for k in range(1, days + 1):
        earlier = (datetime.fromisoformat(DAY) - timedelta(days=k)).date().isoformat()
        shutil.copytree(judged / f"date={DAY}", judged / f"date={earlier}")


def write_otlp_day(root: Path, spans: int, files: int, arrival: int) -> str:
    """A day of about `spans` OTLP spans over `files` files, and the arrival file's text (about `arrival` spans);
    returns what was written."""
    folder = root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    templates = _templates()
    per_replica = sum(count for _, count in templates)
    replicas = max(1, spans // per_replica)
    lines: list[list[str]] = [[] for _ in range(files)]
    for replica in range(replicas):
        lines[replica % files] += [t.format(r=f"{replica:08x}") for t, _ in templates]
    # the last replica's GenAI lines 5-8 arrive with the new file: the later spans and the roots of traces whose
    # first spans are in a file of the day (the recording's first 8 lines are GenAI's, a trace over several lines)
    last = lines[(replicas - 1) % files]
    at = len(last) - len(templates)
    late = last[at + 4 : at + 8]
    del last[at + 4 : at + 8]
    for k, text in enumerate(lines):
        _settled(folder / f"export-{k:05d}.jsonl", "".join(line + "\n" for line in text))
    new = late + [
        t.format(r=f"{replica:08x}")
        for replica in range(replicas, replicas + max(1, arrival // per_replica))
        for t, _ in templates
    ]
    (root / "arrival.jsonl").write_text("".join(line + "\n" for line in new))
    added = sum(line.count('"spanId"') for line in new)
    return f"{replicas * per_replica:,} spans in {files} files, then one file of {added:,} spans"


def _settled(path: Path, text: str) -> None:
    path.write_text(text)
    then = time.time() - 3600
    os.utime(path, (then, then))


def measure(label: str, root: Path, checkout: Path | None, args: argparse.Namespace, judge_url: str) -> None:
    write_score_evaluator(root, EVALUATOR, judge_url)
    if args.otlp:
        print(f"[{label}] {write_otlp_day(root, args.spans, args.files, args.arrival)}", flush=True)
        measure_arrival(label, root, checkout)
        return
    per_file = args.traces // args.files
    for k in range(args.files):
        write_file(root, f"export-{k:05d}.jsonl", k * per_file, per_file)
    print(f"[{label}] setup ingest: {run_measured(INGEST, root, day=DAY, checkout=checkout)}", flush=True)
    print(f"[{label}] setup judge:  {run_measured(JUDGE, root, day=DAY, checkout=checkout)}", flush=True)
    copy_history(root, args.history_days)
    for step, statement in ROLLUPS.items():
        print(f"[{label}] setup {step}: {run_measured(statement, root, day=DAY, checkout=checkout)}", flush=True)
    write_file(root, f"export-{args.files:05d}.jsonl", args.traces, args.arrival)
    print(f"[{label}] arrival ingest: {run_measured(INGEST, root, day=DAY, checkout=checkout)}", flush=True)
    print(f"[{label}] arrival judge:  {run_measured(JUDGE, root, day=DAY, checkout=checkout)}", flush=True)
    for step, statement in ROLLUPS.items():
        print(f"[{label}] arrival {step}: {run_measured(statement, root, day=DAY, checkout=checkout)}", flush=True)
    print(f"[{label}] baseline (a process that only imports polars): {run_measured(BASELINE, root, day=DAY)}")


def measure_arrival(label: str, root: Path, checkout: Path | None) -> None:
    """The OTLP day ingested and judged, then its arrival file added and the day ingested and judged again."""
    print(f"[{label}] setup ingest: {run_measured(INGEST, root, day=DAY, checkout=checkout)}", flush=True)
    print(f"[{label}] setup judge:  {run_measured(JUDGE, root, day=DAY, checkout=checkout)}", flush=True)
    _settled(root / "traces" / DAY / f"export-{99999:05d}.jsonl", (root / "arrival.jsonl").read_text())
    print(f"[{label}] arrival ingest: {run_measured(INGEST, root, day=DAY, checkout=checkout)}", flush=True)
    print(f"[{label}] arrival judge:  {run_measured(JUDGE, root, day=DAY, checkout=checkout)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--arrival", type=int, default=1000)
    parser.add_argument("--history-days", type=int, default=0, help="earlier days of verdicts (copies of the day)")
    parser.add_argument("--otlp", action="store_true", help="a day of OTLP spans (`--spans`), not JSONL traces")
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--before", type=Path, default=None, help="another checkout, measured the same way")
    args = parser.parse_args()
    judge, url = start_judge(0.0)
    try:
        with tempfile.TemporaryDirectory(prefix="eval_platform-arrivals-") as folder:
            if not args.otlp:
                print(
                    f"{DAY}: {args.traces:,} traces in {args.files} files, then one file of {args.arrival:,}; "
                    f"{args.history_days} earlier day(s) of verdicts"
                )
            if args.before is not None:
                measure("before", Path(folder) / "before", args.before.resolve(), args, url)
            measure("after", Path(folder) / "after", None, args, url)
    finally:
        judge.terminate()
        judge.wait(timeout=30)


if __name__ == "__main__":
    main()
