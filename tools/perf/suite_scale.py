"""A benchmark suite of many cases, each step of its asset graph in its own process: wall, CPU and peak RSS per step,
beside reading and writing the same rows with plain polars in the same run.

    python -m tools.perf.suite_scale [--cases 100000] [--concurrency 128] [--chunk-cases N]

The suite (`suite_overhead`'s synthetic dataset of `cases` cases) has two tasks for one model under test: `answer`
(the model answers each case; exact_match and numeric_match) and `judged` (`answer`'s outputs scored by a judge
evaluator: one judge call per case). The model under test and the judge are both served by the local judge
(`python -m eval_platform.local_judge`, its own process, 127.0.0.1, 0 ms). The steps are materialized one after the
other, each by `dg.materialize` in a fresh Python process on one Dagster instance (SQLite, a temp DAGSTER_HOME),
so each step's peak RSS is its own: `answer`, `judged`, the suite score (`benchmark_scores/synth`), `leaderboard`.

After each step, a fresh process does the step's Parquet I/O with plain polars: it reads the step's input files
(the dataset, or the upstream tables) and writes the step's output rows again (read from what the step wrote):
the floor any implementation pays for the same rows. Wall and CPU include starting Python and imports; peak RSS is
the process's own (`os.wait4`). Run it under a cap: `prlimit --as=8000000000 -- python -m ...`.
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

from eval_platform.benchmarks.runner import CHUNK_CASES_ENV
from eval_platform.settings import LOCAL_JUDGE_FOR_MISSING_KEYS_ENV
from tools.perf.suite_overhead import _start_judge, _write_project

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SUITE, MODEL = "synth", "m0"
EVALUATOR = {
    "description": "How well the answer answers (the local judge's mock verdicts).",
    "mode": "score",
    "score_scale": {"min": 0, "max": 1},
    "model": "openai/gpt-4o-mini",
    "api_key_env": "EVAL_PLATFORM_PERF_UNSET_KEY",  # unset: the local judge answers (the demo's mode, see `measure`)
    "local_judge": "mock",
    "prompt": "Rate the answer to {{input}}: {{output}}",
}
# step name -> (asset key, the tables it reads, the tables it writes), as `warehouse/<table>/<key=value>/...` globs
STEPS = {
    "answer": (["benchmark", SUITE, "answer"], ["datasets/synth/v1.jsonl"], ["cases:answer", "results:answer"]),
    "judged": (["benchmark", SUITE, "judged"], ["cases:answer"], ["cases:judged", "results:judged"]),
    "suite": (
        ["benchmark_scores", SUITE],
        ["cases:answer", "cases:judged", "results:answer", "results:judged"],
        ["results:_suite"],
    ),
    "leaderboard": (["leaderboard"], ["cases:answer", "cases:judged"], ["leaderboard"]),
}


def write_suite(root: Path, cases: int) -> None:
    """`suite_overhead`'s one-dataset project with the two tasks and the judge evaluator above."""
    _write_project(root, 1, 1, cases)
    suite = {
        "tasks": {
            "answer": {
                "dataset": "synth",
                "version": 1,
                "prompt": "{{input}}",
                "scorers": [{"name": "exact_match"}, {"name": "numeric_match"}],
            },
            "judged": {
                "dataset": "synth",
                "version": 1,
                "outputs_of": "answer",
                "scorers": [{"name": "judge", "options": {"evaluator": "quality"}}],
            },
        }
    }
    (root / "benchmarks" / f"{SUITE}.yaml").write_text(yaml.safe_dump(suite))
    (root / "evaluators" / "quality.yaml").write_text(yaml.safe_dump(EVALUATOR))


def _file(root: Path, name: str) -> Path:
    if "/" in name:
        return root / name
    table, _, key = name.partition(":")
    if table == "leaderboard":
        return root / "warehouse" / "leaderboard" / f"suite={SUITE}" / "part.parquet"
    keys = f"task={key}" if table == "cases" else f"name={key}"
    return root / "warehouse" / f"benchmark_{table}" / f"suite={SUITE}" / keys / f"model={MODEL}" / "part.parquet"


def _child_step(root: Path, home: Path, step: str, concurrency: int) -> dict:
    """In the child: one `dg.materialize` of one step on the shared instance."""
    import dagster as dg

    from eval_platform.definitions import build_definitions

    defs = build_definitions(root)
    key = dg.AssetKey(STEPS[step][0])
    run_config = {
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        "resources": {"judge": {"config": {"max_concurrency_per_model": concurrency}}},
    }
    with dg.DagsterInstance.get() as instance:  # DAGSTER_HOME: the run's shared instance
        if MODEL not in instance.get_dynamic_partitions("benchmark_models"):
            instance.add_dynamic_partitions("benchmark_models", [MODEL])
        result = dg.materialize(
            assets=list(defs.assets),
            selection=[key],
            partition_key=None if step == "leaderboard" else MODEL,
            instance=instance,
            resources=defs.resources,
            run_config=run_config,
            raise_on_error=False,
        )
        if not result.success:
            raise SystemExit(f"step {step} failed")
    return {}


def _child_polars(root: Path, step: str) -> dict:
    """In the child: the step's reads and writes with plain polars."""
    import polars as pl

    _, inputs, outputs = STEPS[step]
    rows = 0
    for name in inputs:
        path = _file(root, name)
        rows += (pl.read_ndjson(path) if path.suffix == ".jsonl" else pl.read_parquet(path)).height
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        for k, name in enumerate(outputs):
            frame = pl.read_parquet(_file(root, name))
            frame.write_parquet(Path(tmp) / f"{k}.parquet")
    return {"rows_read": rows}


def _run_child(args: list[str], env: dict) -> dict:
    """Run one child; its wall, user+system CPU and peak RSS (os.wait4: this child's own, not a running max)."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "tools.perf.suite_scale", *args], env=env)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"child {args} exited with {process.returncode}")
    return {
        "wall_s": time.perf_counter() - started,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_gb": usage.ru_maxrss * 1024 / 1e9,  # KiB on Linux
    }


def measure(cases: int, concurrency: int, chunk_cases: int | None, tmp: Path) -> list[tuple[str, dict, dict]]:
    root, home = tmp / "root", tmp / "dagster_home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    write_suite(root, cases)
    judge, url = _start_judge(root)
    env = dict(os.environ, EVAL_PLATFORM_LOCAL_JUDGE_URL=url, EVAL_PLATFORM_DATA_DIR=str(root), DAGSTER_HOME=str(home))
    env.pop("EVAL_PLATFORM_PERF_UNSET_KEY", None)
    env[LOCAL_JUDGE_FOR_MISSING_KEYS_ENV] = "1"
    if chunk_cases:
        env[CHUNK_CASES_ENV] = str(chunk_cases)
    out = []
    try:
        for step in STEPS:
            common = ["--root", str(root), "--step", step]
            ours = _run_child(["--child", "step", "--home", str(home), "--concurrency", str(concurrency), *common], env)
            plain = _run_child(["--child", "polars", *common], env)
            out.append((step, ours, plain))
    finally:
        judge.terminate()
        judge.wait()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=128, help="calls in flight per model string")
    parser.add_argument("--chunk-cases", type=int, default=None, help="cases per chunk (default: the product's)")
    parser.add_argument("--child", choices=["step", "polars"], help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--step", choices=list(STEPS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "step":
        _child_step(args.root, args.home, args.step, args.concurrency)
        return
    if args.child == "polars":
        _child_polars(args.root, args.step)
        return
    print(
        f"suite '{SUITE}': tasks answer + judged, {args.cases:,} cases, 1 model; local judge at 0 ms, "
        f"concurrency {args.concurrency}; each step and each polars baseline in a fresh process"
    )
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(args.cases, args.concurrency, args.chunk_cases, Path(tmp))
    header = f"{'step':<12} {'wall s':>8} {'CPU s':>8} {'peak RSS GB':>12}"
    print(f"{header}   {'polars wall s':>13} {'CPU s':>7} {'RSS GB':>7}")
    for step, ours, plain in rows:
        print(
            f"{step:<12} {ours['wall_s']:>8.1f} {ours['cpu_s']:>8.1f} {ours['rss_gb']:>12.2f}   "
            f"{plain['wall_s']:>13.1f} {plain['cpu_s']:>7.1f} {plain['rss_gb']:>7.2f}"
        )
    print(json.dumps({step: {"ours": ours, "polars": plain} for step, ours, plain in rows}))


if __name__ == "__main__":
    main()
