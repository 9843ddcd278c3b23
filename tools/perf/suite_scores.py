"""Suite scores and the leaderboard for a per-case metric and for a corpus metric, at suite scale.

    python -m tools.perf.suite_scores [--tasks 8] [--models 10] [--cases 1000] [--metrics exact_match,bleu]

For each metric, a synthetic suite of `tasks` tasks scored by it alone, and for each of `models` models one
`benchmark_cases` frame per task (`cases` outputs of 8-30 words, about a third equal to their reference). Timed
as the suite asset and the `leaderboard` asset do the work: `task_cases` per task and model (for a corpus metric,
sacrebleu's statistics of every output: a tokenization), `suite_results` per model, then `leaderboard` over all
models (each model resampled once, each model-leader pair once, RESAMPLES draws).
"""

from __future__ import annotations

import argparse
import random
import time

import polars as pl

from eval_platform.benchmarks.config import Suite
from eval_platform.benchmarks.leaderboard import leaderboard, suite_results
from eval_platform.benchmarks.task_results import task_cases
from eval_platform.schemas import BENCHMARK_CASE_SCHEMA, BENCHMARK_RESULT_SCHEMA
from eval_platform.scoring import registry

WORDS = [f"w{i}" for i in range(300)]


def _frame(rng: random.Random, references: list[str], metric: str) -> pl.DataFrame:
    scorer = registry.get(metric)
    rows = []
    for i, reference in enumerate(references):
        output = reference if rng.random() < 0.3 else " ".join(rng.choices(WORDS, k=rng.randint(8, 30)))
        value = scorer.score(output, {"expected_output": reference}) if scorer.statistics is None else 0.0
        rows.append(
            {
                "case_id": f"c{i:06d}",
                "sample": 0,
                "presentation": "",
                "status": "COMPLETED",
                "output": output,
                "expected_output": reference,
                "expected_output_json": False,
                "cost_usd": 0.0,
                "scores": [{"metric": metric, "value": value}],
            }
        )
    return pl.DataFrame(rows, schema=BENCHMARK_CASE_SCHEMA)


def measure(metric: str, tasks: int, models: int, cases: int) -> dict[str, float]:
    rng = random.Random(0)
    task = {"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": metric}]}
    suite = Suite.model_validate({"name": "s", "tasks": {f"t{k}": task for k in range(tasks)}})
    references = [" ".join(rng.choices(WORDS, k=rng.randint(8, 30))) for _ in range(cases)]
    frames = {f"m{j}": {name: _frame(rng, references, metric) for name in suite.tasks} for j in range(models)}
    started = time.perf_counter()
    by_model = {m: {name: task_cases(frame, suite.tasks[name]) for name, frame in f.items()} for m, f in frames.items()}
    read = time.perf_counter() - started
    started = time.perf_counter()
    for model, values in by_model.items():
        suite_results("s", suite, model, values, pl.DataFrame(schema=BENCHMARK_RESULT_SCHEMA))
    scores = time.perf_counter() - started
    started = time.perf_counter()
    leaderboard("s", suite, by_model, {})
    return {"task_cases": read, "suite_results": scores, "leaderboard": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--metrics", default="exact_match,bleu")
    args = parser.parse_args()
    print(f"{args.tasks} tasks x {args.models} models x {args.cases} cases")
    print(f"{'metric':<12} {'task_cases':>11} {'suite_results':>14} {'leaderboard':>12}")
    for metric in args.metrics.split(","):
        t = measure(metric, args.tasks, args.models, args.cases)
        print(f"{metric:<12} {t['task_cases']:>10.2f}s {t['suite_results']:>13.2f}s {t['leaderboard']:>11.2f}s")


if __name__ == "__main__":
    main()
