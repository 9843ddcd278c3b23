"""A benchmark task's results from its scored rows: one `benchmark_results` row per scorer (a mean over cases or a
corpus statistic, with its interval and counts), and the task's cases as groups, suites and the leaderboard use them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from eval_platform.benchmarks.config import Task
from eval_platform.benchmarks.results import (
    MetricSummary,
    TaskCases,
    summarize,
    summarize_corpus,
)
from eval_platform.ingest.datasets import expected_value
from eval_platform.schemas import BENCHMARK_RESULT_SCHEMA, COMPLETED, FAILED, SKIPPED
from eval_platform.scoring import registry
from eval_platform.stats.repeated import pass_at_k, pass_hat_k


def _metric_values(frame: pl.DataFrame, metric: str) -> pl.DataFrame:
    """(case_id, sample, value): the metric's value on each COMPLETED row that has one."""
    return (
        frame.filter(pl.col("status") == COMPLETED)
        .select(
            "case_id",
            "sample",
            pl.col("scores").list.eval(pl.element().filter(pl.element().struct.field("metric") == metric)).alias("s"),
        )
        .explode("s")
        .select("case_id", "sample", pl.col("s").struct.field("value").alias("value"))
        .drop_nulls("value")
    )


def per_case_values(frame: pl.DataFrame, metric: str) -> dict[str, float]:
    """case_id -> the metric's mean over the case's scored rows (samples, presentation orders)."""
    if frame.is_empty():
        return {}
    means = _metric_values(frame, metric).group_by("case_id").agg(pl.col("value").mean()).sort("case_id")
    return dict(zip(means["case_id"].to_list(), means["value"].to_list(), strict=True))


def per_case_right(frame: pl.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Per case (sorted by case_id): its scored samples n and the right ones c. A sample is right when the metric
    gives it full marks (its mean over presentation orders is 1); FAILED samples are not scored, so not counted."""
    if frame.is_empty():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    samples = _metric_values(frame, metric).group_by("case_id", "sample").agg(pl.col("value").mean())
    cases = (
        samples.group_by("case_id").agg(pl.len().alias("n"), (pl.col("value") >= 1.0).sum().alias("c")).sort("case_id")
    )
    return cases["n"].to_numpy().astype(np.int64), cases["c"].to_numpy().astype(np.int64)


def repeated_sample_rows(frame: pl.DataFrame, task: Task, mean_rows: dict[str, dict], seed: int = 0) -> list[dict]:
    """Per per-case scorer and per k of the task (`Task.ks`: `pass_at`, else k = `samples` when it is > 1), two
    more rows beside the scorer's own (`mean_rows`: metric -> row): metrics `<metric>.pass@k` and
    `<metric>.pass^k` (column `k`; a query on the metric's own name still finds one row per task), the mean over
    cases with at least k scored samples of each case's unbiased estimate from its n scored samples, with its 95%
    interval (`results.summarize`). `n` counts those cases; a case with some but fewer than k scored samples is
    left out and counted in `n_failed` with the cases that have none."""
    out: list[dict] = []
    if not task.ks:
        return out
    for spec in task.scorers:
        if registry.SCORERS[spec.name].task_level:
            continue  # a corpus statistic has no per-sample right or wrong
        n, c = per_case_right(frame, spec.metric_name)
        for k in task.ks:
            complete = n >= k
            for name, estimator in ((f"pass@{k}", pass_at_k), (f"pass^{k}", pass_hat_k)):
                summary = summarize(estimator(n[complete], c[complete], k), seed=seed)
                own = mean_rows[spec.metric_name]
                out.append(
                    {
                        **own,
                        "metric": f"{spec.metric_name}.{name}",
                        "aggregate": "mean",
                        "value": summary.value,
                        "stderr": summary.stderr,
                        "ci_low": summary.ci_low,
                        "ci_high": summary.ci_high,
                        "n": int(complete.sum()),
                        "n_failed": own["n_failed"] + int((~complete).sum()),
                        "k": k,
                    }
                )
    return out


def case_counts(frame: pl.DataFrame, metric: str) -> tuple[int, int, int]:
    """(cases with a value, cases with no value and a FAILED row, cases all SKIPPED)."""
    scored = per_case_values(frame, metric)
    statuses = frame.group_by("case_id").agg(pl.col("status").unique()).iter_rows()
    failed = skipped = 0
    for case_id, values in statuses:
        if case_id in scored:
            continue
        if FAILED in values:
            failed += 1
        elif set(values) == {SKIPPED}:
            skipped += 1
    return len(scored), failed, skipped


def task_results(
    frame: pl.DataFrame, suite_name: str, task_name: str, task: Task, model_name: str, seed: int = 0
) -> pl.DataFrame:
    """One `benchmark_results` row per scorer of a task for one model (BENCHMARK_RESULT_SCHEMA)."""
    now = datetime.now(UTC)
    first = frame.row(0, named=True) if frame.height else {}
    datasets = (
        f"{task.dataset}@v{first.get('dataset_version')} ({(first.get('dataset_hash') or '')[:12]})"
        if first
        else task.dataset
    )
    # Unknown when one call's price is: summing the others would count that call as free.
    cost = float(frame["cost_usd"].sum()) if frame.height and not frame["cost_usd"].null_count() else None
    out: list[dict[str, Any]] = []
    for spec in task.scorers:
        scorer = registry.SCORERS[spec.name]
        values = per_case_values(frame, spec.metric_name)
        n, n_failed, n_skipped = case_counts(frame, spec.metric_name)
        summary = summarize(np.array(list(values.values())), seed=seed)
        value = summary.value
        if scorer.task_level:  # a statistic over the task's cases (corpus BLEU, a kappa), not their mean
            summary = _corpus_summary(frame, scorer, spec, seed)
            value = summary.value
        out.append(
            {
                "suite": suite_name,
                "level": "task",
                "name": task_name,
                "model": model_name,
                "metric": spec.metric_name,
                "aggregate": "corpus" if scorer.task_level else "mean",
                "value": value,
                "stderr": summary.stderr if scorer.interval else None,
                "ci_low": summary.ci_low if scorer.interval else None,
                "ci_high": summary.ci_high if scorer.interval else None,
                "n": n,
                "n_failed": n_failed,
                "n_skipped": n_skipped,
                "cost_usd": cost,
                "datasets": datasets,
                "task_config_hash": first.get("task_config_hash"),
                "scorer_config_hash": first.get("scorer_config_hash"),
                "computed_at": now,
            }
        )
    if out:  # repeated samples: flakiness rows of their own metric names, after the scorers' rows
        out += repeated_sample_rows(frame, task, {row["metric"]: row for row in out}, seed)
    return pl.DataFrame(out, schema=BENCHMARK_RESULT_SCHEMA).with_columns(pl.lit(False).alias("stale"))


def _corpus_summary(frame: pl.DataFrame, scorer: registry.Scorer, spec, seed: int) -> MetricSummary:
    """A task-level statistic (corpus BLEU, a kappa) over the scored rows; for a corpus statistic that declares its
    sufficient statistics, with an interval from resampling the cases (a case's samples and orders together)."""
    done = frame.filter(pl.col("status") == COMPLETED)
    if done.is_empty():
        return MetricSummary(None, None, None, None, 0)
    if scorer.statistics is None:
        cases, outputs, options = _scored_rows(done, scorer, spec)
        value = scorer.aggregate([], outputs, cases, options)
        return MetricSummary(value, None, None, None, done["case_id"].n_unique())
    corpus = corpus_cases(done, scorer, spec)
    assert corpus.corpus is not None  # `done` has rows: their corpus score comes with them
    # the corpus score from the same statistics (what `aggregate` computes, without tokenizing everything twice)
    return summarize_corpus(corpus.value(), corpus.data, corpus.corpus, seed=seed)


def _scored_rows(done: pl.DataFrame, scorer: registry.Scorer, spec) -> tuple[list[dict], list[str], Any]:
    fields = ("case_id", "sample", "presentation", "input", "expected_output", "expected_output_json", "verdict")
    cases = [{**{f: r[f] for f in fields}, "expected_output": expected_value(r)} for r in done.iter_rows(named=True)]
    return cases, done["output"].to_list(), scorer.options(**spec.options)


def corpus_cases(frame: pl.DataFrame, scorer: registry.Scorer, spec) -> TaskCases:
    """A corpus metric's (declared `statistics`) summable statistics per case over the COMPLETED rows, a case's
    samples and presentation orders summed, with the corpus score over summed statistics: what the task's row
    reports and resamples, and what groups, suites and the leaderboard aggregate."""
    done = frame.filter(pl.col("status") == COMPLETED)
    if done.is_empty():
        return TaskCases((), np.zeros((0, 0)))
    cases, outputs, options = _scored_rows(done, scorer, spec)
    statistics, from_statistics = scorer.statistics, scorer.from_statistics
    # callers pass a scorer that declares its statistics, and a scorer declares both (`Scorer.statistics`)
    assert statistics is not None and from_statistics is not None
    case_ids, row_case = np.unique(done["case_id"].to_numpy(), return_inverse=True)
    rows = statistics(outputs, cases, options)
    per_case = np.zeros((len(case_ids), rows.shape[1]))
    np.add.at(per_case, row_case, rows)

    def score(summed: np.ndarray) -> float:
        return from_statistics(summed, options)

    return TaskCases(tuple(case_ids.tolist()), per_case, score)


def task_cases(frame: pl.DataFrame, task: Task) -> TaskCases:
    """A task's cases as groups, suites and the leaderboard use them: its primary (first) metric per case, or for a
    corpus metric its cases' statistics, so a group's value for the task is the value the task's own row reports."""
    spec = task.scorers[0]
    scorer = registry.SCORERS[spec.name]
    if scorer.statistics is not None:
        return corpus_cases(frame, scorer, spec)
    return TaskCases.of_values(per_case_values(frame, spec.metric_name))


# The columns of a task's `benchmark_cases` rows that `task_results`, `task_cases` and the UI's metadata read; a
# task-level scorer (corpus BLEU, a kappa) also reads the texts its cases were scored on.
RESULT_COLUMNS = [
    "case_id",
    "sample",
    "presentation",
    "status",
    "reason",
    "scores",
    "cost_usd",
    "cache_hit",
    "dataset_version",
    "dataset_hash",
    "task_config_hash",
    "scorer_config_hash",
]
TEXT_COLUMNS = ["input", "expected_output", "expected_output_json", "verdict", "output"]


def result_columns(task: Task) -> list[str]:
    """What to read of a task's stored rows to compute its results and cases: its rows without the texts, unless
    a scorer of the task scores them as a whole."""
    task_level = any(registry.SCORERS[spec.name].task_level for spec in task.scorers)
    return RESULT_COLUMNS + (TEXT_COLUMNS if task_level else [])
