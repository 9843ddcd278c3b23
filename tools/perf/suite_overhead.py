"""Dagster's share of a benchmark suite's wall time, beside the same scoring without Dagster in the same run.

    python -m tools.perf.suite_overhead [--tasks 8] [--models 10] [--cases 1000]
        [--modes per-model,one-run] [--repeat 3]

A synthetic suite (`tasks` generation tasks over one `cases`-case dataset, scored by exact_match and
numeric_match) runs for `models` scripted local models (the local judge in its own process, 0 latency):

- bare: for each model and task, `run_task` + `task_results` + the Parquet writes, then each model's suite
  scores and the leaderboard, in a plain loop (the same core work the assets do);
- dagster, one run per model: one `dg.materialize` per model over the suite's asset group (tasks, suite score)
  in a real instance (SQLite event log in a temp DAGSTER_HOME), then the leaderboard; bare and Dagster
  alternate model by model, so a change of load on the machine falls on both alike;
- dagster, one run for all models: the suite's asset group materialized once over the range of all models, as
  a backfill of the models runs under the assets' backfill policy, then the leaderboard (fresh data roots).

Both start from an empty judge cache, so both make every call. Dagster's share is (dagster - bare) / dagster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from eval_platform.storage.location import DataRoot

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _write_project(root: Path, tasks: int, models: int, cases: int) -> None:
    (root / "datasets" / "synth").mkdir(parents=True)
    lines = [
        json.dumps({"case_id": f"c{i:06d}", "input": f"What is {i} + 1?", "expected_output": str(i + 1)})
        for i in range(cases)
    ]
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
        [
            sys.executable,
            "-m",
            "eval_platform.local_judge",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--data-root",
            str(root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    url = line.strip().split()[-1]
    return process, url


class _Bare:
    """The core work of the assets, called directly: each task, each model's suite scores, the leaderboard."""

    def __init__(self, root: Path, url: str):
        from eval_platform.benchmarks.config import load_models, load_suite

        self.root, self.url = root, url
        self.suite = load_suite(root / "benchmarks" / "synth.yaml", root)
        self.models = load_models(root / "benchmarks" / "models.yaml")
        self.by_model: dict = {}

    def model(self, name: str) -> float:
        import polars as pl

        from eval_platform.benchmarks.leaderboard import suite_results
        from eval_platform.benchmarks.runner import TaskRun, run_task
        from eval_platform.benchmarks.task_results import task_cases, task_results
        from eval_platform.defs.resources import JudgeResource
        from eval_platform.storage.warehouse import write_partition

        started = time.perf_counter()
        values, rows = {}, []
        for task in self.suite.tasks:
            runtime = JudgeResource(local_judge_url=self.url).runtime(self.root)
            frame = run_task(TaskRun(self.root, "synth", self.suite, task, name, self.models[name], runtime))
            write_partition(
                DataRoot.from_env(self.root), "benchmark_cases", {"suite": "synth", "task": task, "model": name}, frame
            )
            results = task_results(frame, "synth", task, self.suite.tasks[task], name)
            write_partition(
                DataRoot.from_env(self.root),
                "benchmark_results",
                {"suite": "synth", "name": task, "model": name},
                results,
            )
            values[task] = task_cases(frame, self.suite.tasks[task])
            rows.append(results)
        scores = suite_results("synth", self.suite, name, values, pl.concat(rows))
        write_partition(
            DataRoot.from_env(self.root),
            "benchmark_results",
            {"suite": "synth", "name": "_suite", "model": name},
            scores,
        )
        self.by_model[name] = values
        return time.perf_counter() - started

    def leaderboard(self) -> float:
        from eval_platform.benchmarks.leaderboard import leaderboard
        from eval_platform.storage.warehouse import write_partition

        started = time.perf_counter()
        board = leaderboard("synth", self.suite, self.by_model, {name: 0.0 for name in self.by_model})
        write_partition(DataRoot.from_env(self.root), "leaderboard", {"suite": "synth"}, board)
        return time.perf_counter() - started


QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _measure(bare_root: Path, dagster_root: Path, url: str) -> tuple[float, float]:
    """Bare and Dagster timed model by model, alternately, so a load change on the machine hits both alike."""
    import dagster as dg

    from eval_platform.definitions import build_definitions

    os.environ["EVAL_PLATFORM_LOCAL_JUDGE_URL"] = url
    bare = _Bare(bare_root, url)
    defs = build_definitions(dagster_root)
    models = sorted(bare.models)
    bare_s = dagster_s = 0.0
    with tempfile.TemporaryDirectory() as home, dg.instance_for_test(temp_dir=home) as instance:
        instance.add_dynamic_partitions("benchmark_models", models)
        for model in models:
            bare_s += bare.model(model)
            started = time.perf_counter()
            result = dg.materialize(
                assets=list(defs.assets),
                selection=dg.AssetSelection.groups("benchmark_synth"),
                partition_key=model,
                instance=instance,
                resources=defs.resources,
                run_config=QUIET,
            )
            assert result.success
            dagster_s += time.perf_counter() - started
        bare_s += bare.leaderboard()
        started = time.perf_counter()
        dg.materialize(
            assets=list(defs.assets),
            selection=["leaderboard"],
            instance=instance,
            resources=defs.resources,
            run_config=QUIET,
        )
        dagster_s += time.perf_counter() - started
    return bare_s, dagster_s


def _bare_all(bare_root: Path, url: str) -> float:
    bare = _Bare(bare_root, url)
    return sum(bare.model(model) for model in sorted(bare.models)) + bare.leaderboard()


def _dagster_one_run(dagster_root: Path, url: str) -> float:
    """The suite's assets as one run over the range of all models (what a backfill of the models runs under the
    assets' backfill policy), then the leaderboard."""
    import dagster as dg

    from eval_platform.benchmarks.config import load_models
    from eval_platform.definitions import build_definitions
    from eval_platform.defs.benchmarks import MODELS_PER_RUN

    os.environ["EVAL_PLATFORM_LOCAL_JUDGE_URL"] = url
    defs = build_definitions(dagster_root)
    models = sorted(load_models(dagster_root / "benchmarks" / "models.yaml"))
    if len(models) > MODELS_PER_RUN:
        raise SystemExit(f"--models {len(models)} is more than a backfill run holds ({MODELS_PER_RUN})")
    with tempfile.TemporaryDirectory() as home, dg.instance_for_test(temp_dir=home) as instance:
        instance.add_dynamic_partitions("benchmark_models", models)
        started = time.perf_counter()
        result = dg.materialize(
            assets=list(defs.assets),
            selection=dg.AssetSelection.groups("benchmark_synth"),
            instance=instance,
            resources=defs.resources,
            run_config=QUIET,
            tags={"dagster/asset_partition_range_start": models[0], "dagster/asset_partition_range_end": models[-1]},
        )
        assert result.success
        dg.materialize(
            assets=list(defs.assets),
            selection=["leaderboard"],
            instance=instance,
            resources=defs.resources,
            run_config=QUIET,
        )
        return time.perf_counter() - started


def _measure_one_run(tmp: Path, url: str, args, repeat: int) -> tuple[list[float], list[float]]:
    """Bare over every model and one Dagster run over all of them, `repeat` times each, alternating which goes
    first, each on a fresh data root (an empty judge cache)."""
    bare_s, dagster_s = [], []
    for k in range(repeat):
        for side in ("bare", "dagster") if k % 2 == 0 else ("dagster", "bare"):
            root = tmp / f"{side}{k}"
            _write_project(root, args.tasks, args.models, args.cases)
            if side == "bare":
                bare_s.append(_bare_all(root, url))
            else:
                dagster_s.append(_dagster_one_run(root, url))
    return bare_s, dagster_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--modes", default="per-model,one-run", help="per-model, one-run or both (comma-separated)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the one-run measurement, alternating")
    args = parser.parse_args()
    rows = args.tasks * args.models * args.cases
    print(f"{args.tasks} tasks x {args.models} models x {args.cases} cases = {rows:,} rows (one call each)")
    with tempfile.TemporaryDirectory() as tmp:
        bare_root, dagster_root = Path(tmp) / "bare", Path(tmp) / "dagster"
        for root in (bare_root, dagster_root):
            _write_project(root, args.tasks, args.models, args.cases)
        judge, url = _start_judge(bare_root)
        try:
            if "per-model" in args.modes:
                bare, dagster = _measure(bare_root, dagster_root, url)
                print("one run per model (materialize each model; bare and Dagster alternate model by model):")
                _report(rows, [bare], [dagster])
            if "one-run" in args.modes:
                bare, dagster = _measure_one_run(Path(tmp), url, args, args.repeat)
                print(
                    "one run for all models (a backfill's run under the backfill policy; "
                    f"{args.repeat} alternating repeats):"
                )
                _report(rows, bare, dagster)
        finally:
            judge.terminate()
            judge.wait()


def _report(rows: int, bare: list[float], dagster: list[float]) -> None:
    b, d = statistics.median(bare), statistics.median(dagster)
    spread = (
        f" (each: bare {', '.join(f'{x:.1f}' for x in bare)}; Dagster {', '.join(f'{x:.1f}' for x in dagster)})"
        if len(bare) > 1
        else ""
    )
    print(f"  bare (run_task in a loop):     {b:7.1f} s  ({rows / b:,.0f} rows/s)")
    print(f"  through Dagster:               {d:7.1f} s  ({rows / d:,.0f} rows/s)")
    print(f"  Dagster's share of the wall time (medians): {(d - b) / d:.1%}{spread}")


if __name__ == "__main__":
    main()
