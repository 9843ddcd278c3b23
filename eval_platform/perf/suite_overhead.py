"""Dagster's share of a benchmark suite's wall time, beside the same scoring without Dagster in the same run.

    python -m eval_platform.perf.suite_overhead [--tasks 8] [--models 10] [--cases 1000]

A synthetic suite (`tasks` generation tasks over one `cases`-case dataset, scored by exact_match and
numeric_match) runs for `models` scripted local models (the local judge in its own process, 0 latency):

- bare: for each model and task, `run_task` + `task_results` + the Parquet writes, then each model's suite
  scores and the leaderboard, in a plain loop (the same core work the assets do);
- dagster: one `dg.materialize` per model over the suite's asset group (tasks, suite score) in a real
  instance, then the leaderboard.

Both start from an empty judge cache, so both make every call. Dagster's share is (dagster - bare) / dagster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _write_project(root: Path, tasks: int, models: int, cases: int) -> None:
    (root / "datasets" / "synth").mkdir(parents=True)
    lines = [json.dumps({"case_id": f"c{i:06d}", "input": f"What is {i} + 1?", "expected_output": str(i + 1)}) for i in range(cases)]
    (root / "datasets" / "synth" / "v1.jsonl").write_text("\n".join(lines) + "\n")
    (root / "evaluators").mkdir()
    (root / "benchmarks").mkdir()
    suite = {
        "tasks": {
            f"t{k}": {
                "dataset": "synth",
                "version": 1,
                "prompt": f"Variant {k}. {{{{input}}}}",
                "scorers": [{"name": "exact_match"}, {"name": "numeric_match"}],
            }
            for k in range(tasks)
        }
    }
    (root / "benchmarks" / "synth.yaml").write_text(yaml.safe_dump(suite))
    entries = {f"m{j}": {"model": f"local/fixed/The answer is {j}."} for j in range(models)}
    (root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump({"models": entries}))


def _start_judge(root: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "eval_platform.local_judge", "--host", "127.0.0.1", "--port", "0", "--data-root", str(root)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    url = line.strip().split()[-1]
    return process, url


def _bare(root: Path, url: str) -> float:
    import polars as pl

    from eval_platform.benchmarks.config import load_models, load_suite
    from eval_platform.benchmarks.leaderboard import leaderboard, suite_results
    from eval_platform.benchmarks.runner import TaskRun, per_case_values, run_task, task_results
    from eval_platform.defs.resources import JudgeResource
    from eval_platform.storage.warehouse import write_partition

    suite = load_suite(root / "benchmarks" / "synth.yaml", root)
    models = load_models(root / "benchmarks" / "models.yaml")
    started = time.perf_counter()
    by_model = {}
    for name, model in models.items():
        values, rows = {}, []
        for task in suite.tasks:
            runtime = JudgeResource(local_judge_url=url).runtime(root)
            frame = run_task(TaskRun(root, "synth", suite, task, name, model, runtime))
            write_partition(root, "benchmark_cases", {"suite": "synth", "task": task, "model": name}, frame)
            results = task_results(frame, "synth", task, suite.tasks[task], name)
            write_partition(root, "benchmark_results", {"suite": "synth", "name": task, "model": name}, results)
            values[task] = per_case_values(frame, suite.tasks[task].scorers[0].name)
            rows.append(results)
        scores = suite_results("synth", suite, name, values, pl.concat(rows))
        write_partition(root, "benchmark_results", {"suite": "synth", "name": "_suite", "model": name}, scores)
        by_model[name] = values
    board = leaderboard("synth", suite, by_model, {name: 0.0 for name in by_model})
    write_partition(root, "leaderboard", {"suite": "synth"}, board)
    return time.perf_counter() - started


def _dagster(root: Path, url: str) -> float:
    import dagster as dg

    from eval_platform.definitions import build_definitions

    os.environ["EVAL_PLATFORM_LOCAL_JUDGE_URL"] = url
    defs = build_definitions(root)
    models = sorted(yaml.safe_load((root / "benchmarks" / "models.yaml").read_text())["models"])
    with tempfile.TemporaryDirectory() as home, dg.instance_for_test(temp_dir=home) as instance:
        instance.add_dynamic_partitions("benchmark_models", models)
        started = time.perf_counter()
        for model in models:
            result = dg.materialize(
                assets=list(defs.assets), selection=dg.AssetSelection.groups("benchmark_synth"), partition_key=model,
                instance=instance, resources=defs.resources,
                run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            )
            assert result.success
        dg.materialize(assets=list(defs.assets), selection=["leaderboard"], instance=instance, resources=defs.resources,
                       run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--cases", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bare_root, dagster_root = Path(tmp) / "bare", Path(tmp) / "dagster"
        for root in (bare_root, dagster_root):
            _write_project(root, args.tasks, args.models, args.cases)
        judge, url = _start_judge(bare_root)
        try:
            bare = _bare(bare_root, url)
            dagster = _dagster(dagster_root, url)
        finally:
            judge.terminate()
            judge.wait()
    rows = args.tasks * args.models * args.cases
    print(f"{args.tasks} tasks x {args.models} models x {args.cases} cases = {rows:,} rows (one call each)")
    print(f"bare (run_task in a loop):    {bare:7.1f} s  ({rows / bare:,.0f} rows/s)")
    print(f"through Dagster (materialize): {dagster:7.1f} s  ({rows / dagster:,.0f} rows/s)")
    print(f"Dagster's share of the wall time: {(dagster - bare) / dagster:.1%}")


if __name__ == "__main__":
    main()
