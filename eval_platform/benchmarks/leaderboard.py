"""Groups, suite scores and the leaderboard: aggregates over tasks, with intervals from the cases.

- A task's primary metric is its first scorer, and a task's value is what its own `benchmark_results` row
  reports: the mean over its cases, or for a corpus metric (BLEU, chrF) the corpus score (`TaskCases`).
  A group aggregates its tasks' values, `macro` (weighted by the tasks' weights: the paper's "average over
  subsets") or `micro` (weighted by the tasks' numbers of cases, lm-evaluation-harness's `weight_by_size`: for
  per-case metrics exactly the mean of every case pooled), as the suite declares; the suite score is the macro
  mean over its top-level units (each group, and each task in no group, weighted by its weight), and the micro
  mean over all its tasks.
- Intervals come from a seeded bootstrap that resamples cases within each task (tasks are fixed strata) and
  recomputes each task's value on every draw (a corpus score from the drawn cases' summed statistics) before
  aggregating. When the bootstrap has no width (every case alike) the interval is Wilson's for the value over
  the pooled cases, never a standard error of exactly 0.
- The leaderboard ranks the models of a suite by score. The gap of each model to the leader is paired: both
  are resampled on the same cases, among the cases both answered, and the gap is significant when its 95%
  interval excludes 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import cast

import numpy as np
import polars as pl

from eval_platform.benchmarks.config import Suite
from eval_platform.benchmarks.results import (
    Z_95,
    TaskCases,
    as_task_cases,
    draws_per_chunk,
)
from eval_platform.benchmarks.task_results import task_cases
from eval_platform.schemas import BENCHMARK_RESULT_SCHEMA, LEADERBOARD_SCHEMA, SKIPPED
from eval_platform.stats.proportions import wilson_interval

RESAMPLES = 2000

# A task's cases for its primary metric: task -> TaskCases (or, for a mean metric, case_id -> value).
CaseValues = Mapping[str, TaskCases | Mapping[str, float]]


def _tasks(suite: Suite, values: CaseValues) -> dict[str, TaskCases]:
    return {t: as_task_cases(values.get(t, {})) for t in suite.tasks}


def units(suite: Suite) -> list[tuple[str, list[str], float, str]]:
    """Top-level units: (name, tasks, weight, aggregate) for each group, then each task in no group."""
    grouped = {task for group in suite.groups.values() for task in group.tasks}
    out: list[tuple[str, list[str], float, str]] = [
        (name, list(g.tasks), 1.0, g.aggregate) for name, g in suite.groups.items()
    ]
    out += [(name, [name], task.weight, "macro") for name, task in suite.tasks.items() if name not in grouped]
    return out


def _macro(suite: Suite, tasks: list[str], means: Mapping[str, float]) -> float | None:
    present = [t for t in tasks if t in means]
    if not present:
        return None
    weights = np.array([suite.tasks[t].weight for t in present])
    return float(np.dot(weights, [means[t] for t in present]) / weights.sum())


def _pooled(values: Mapping[str, TaskCases]) -> np.ndarray:
    """Every case of the tasks pooled (micro); a corpus task's cases each count at its corpus score."""
    parts = [v.as_pooled_cases() for v in values.values() if len(v)]
    return np.concatenate(parts) if parts else np.array([])


def _score(suite: Suite, values: Mapping[str, TaskCases], kind: str, top: list | None = None) -> float | None:
    """The suite's (or one unit's) score from its tasks' cases."""
    if kind == "micro":
        pooled = _pooled(values)
        return float(pooled.mean()) if len(pooled) else None
    means = {t: value for t, v in values.items() if (value := v.value()) is not None}  # None: a task without cases
    if top is None:
        return _macro(suite, list(values), means)
    unit_values, weights = [], []
    for _name, tasks, weight, aggregate in top:
        sub = {t: values[t] for t in tasks if t in values}
        value = _score(suite, sub, aggregate) if aggregate == "micro" else _macro(suite, tasks, means)
        if value is not None:
            unit_values.append(value)
            weights.append(weight)
    return float(np.dot(weights, unit_values) / sum(weights)) if unit_values else None


# One side's resampled tasks: task -> (each draw's total, cases); see `TaskCases.resampled_totals`.
Resampled = Mapping[str, tuple[np.ndarray, int]]


def _resampled(suite, sides: list[Mapping[str, TaskCases]], seed: int) -> list[dict[str, tuple[np.ndarray, int]]]:
    """Each side's tasks over the same RESAMPLES draws of cases within each task (vectorized; a corpus task's score
    is recomputed from each draw's summed statistics). Any aggregate is then `_score_draws` of these, so a caller
    resamples once for macro and micro."""
    rng = np.random.default_rng(seed)
    stats: list[dict[str, tuple[np.ndarray, int]]] = [{} for _ in sides]
    for task in suite.tasks:
        n = len(sides[0].get(task, ()))
        if not n:
            continue
        totals = [np.empty(RESAMPLES) for _ in sides]
        chunk = draws_per_chunk(RESAMPLES, n)  # a chunk of draws at a time: never a RESAMPLES x n array
        for start in range(0, RESAMPLES, chunk):
            size = min(chunk, RESAMPLES - start)
            index = rng.integers(0, n, (size, n))
            for side, total in zip(sides, totals, strict=True):
                total[start : start + size] = side[task].resampled_totals(index)
        for total, stat in zip(totals, stats, strict=True):
            stat[task] = (total, n)
    return stats


def _score_draws(suite, stat: Resampled, kind, top) -> np.ndarray:
    """`_score` over resampled per-task totals (see `TaskCases.resampled_totals`): one value per draw."""
    if kind == "micro":
        # a sum of arrays: `stat` is never empty here (`_interval` returns first; a pair has common cases)
        return cast(np.ndarray, sum(sums for sums, _ in stat.values()) / sum(n for _, n in stat.values()))
    if top is None:
        return _macro_draws(suite, list(stat), stat)
    unit_values, weights = [], []
    for _name, tasks, weight, aggregate in top:
        sub = {t: stat[t] for t in tasks if t in stat}
        if sub:
            unit_values.append(
                _score_draws(suite, sub, "micro", None) if aggregate == "micro" else _macro_draws(suite, tasks, sub)
            )
            weights.append(weight)
    return np.average(np.vstack(unit_values), axis=0, weights=weights)


def _macro_draws(suite, tasks: list[str], stat) -> np.ndarray:
    present = [t for t in tasks if t in stat]
    weights = np.array([suite.tasks[t].weight for t in present])
    means = np.vstack([stat[t][0] / stat[t][1] for t in present])
    return weights @ means / weights.sum()


def _interval(suite, stat: Resampled, kind, top, value: float | None) -> tuple[float | None, ...]:
    """(ci_low, ci_high, stderr) of `value` from its tasks' resampled totals; Wilson's for `value` over the pooled
    cases when the bootstrap has no width (never a certainty of 0)."""
    if value is None or not stat:
        return None, None, None
    low, high = (float(q) for q in np.quantile(_score_draws(suite, stat, kind, top), [0.025, 0.975]))
    n = sum(cases for _, cases in stat.values())
    if high - low == 0 and n and 0 <= value <= 1:
        low, high = (float(bound) for bound in wilson_interval(value * n, n))
    return low, high, (high - low) / (2 * Z_95)


def suite_results(
    suite_name: str, suite: Suite, model: str, case_values: CaseValues, task_rows: pl.DataFrame, seed: int = 0
) -> pl.DataFrame:
    """`benchmark_results` rows for each group and for the suite, for one model (BENCHMARK_RESULT_SCHEMA)."""
    now = datetime.now(UTC)
    arrays = _tasks(suite, case_values)
    primary = {t: task.scorers[0].metric_name for t, task in suite.tasks.items()}
    rows = []
    resampled: dict[tuple[str, ...], Resampled] = {}  # the suite's macro and micro rows share their draws

    def row(level: str, name: str, tasks: list[str], kind: str, top=None) -> dict:
        values = {t: arrays[t] for t in tasks}
        value = _score(suite, values, kind, top)
        if tuple(tasks) not in resampled:
            (resampled[tuple(tasks)],) = _resampled(suite, [values], seed)
        low, high, stderr = _interval(suite, resampled[tuple(tasks)], kind, top, value)
        metrics = {primary[t] for t in tasks}
        mine = task_rows.filter(pl.col("name").is_in(tasks) & pl.col("metric").is_in(list(metrics)))
        first = mine.unique("name")
        return {
            "suite": suite_name,
            "level": level,
            "name": name,
            "model": model,
            "metric": metrics.pop() if len(metrics) == 1 else "score",
            "aggregate": kind,
            "value": value,
            "stderr": stderr,
            "ci_low": low,
            "ci_high": high,
            "n": int(sum(len(values[t]) for t in tasks)),
            "n_failed": int(first["n_failed"].sum()) if first.height else 0,
            "n_skipped": int(first["n_skipped"].sum()) if first.height else 0,
            "cost_usd": first["cost_usd"].sum() if first.height and first["cost_usd"].null_count() == 0 else None,
            "datasets": "; ".join(sorted(first["datasets"].to_list())) if first.height else "",
            # A group's or suite's row names what its tasks' rows name: a hash over their hashes.
            "task_config_hash": _combined(first, "task_config_hash"),
            "scorer_config_hash": _combined(first, "scorer_config_hash"),
            "computed_at": now,
        }

    for name, group in suite.groups.items():
        rows.append(row("group", name, list(group.tasks), group.aggregate))
    top = units(suite)
    rows.append(row("suite", suite_name, list(suite.tasks), "macro", top))
    rows.append(row("suite", suite_name, list(suite.tasks), "micro"))
    return pl.DataFrame(rows, schema=BENCHMARK_RESULT_SCHEMA).with_columns(pl.lit(False).alias("stale"))


def _combined(rows: pl.DataFrame, column: str) -> str | None:
    if not rows.height:
        return None
    parts = sorted(f"{name}={value}" for name, value in zip(rows["name"], rows[column], strict=True))
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def leaderboard(
    suite_name: str, suite: Suite, by_model: Mapping[str, CaseValues], costs: Mapping[str, float | None], seed: int = 0
) -> pl.DataFrame:
    """One row per model and aggregate (macro, micro): rank, score, interval and the paired gap to the leader."""
    now = datetime.now(UTC)
    top = units(suite)
    cases = {model: _tasks(suite, values) for model, values in by_model.items()}
    # resampled once per model and once per (model, leader) pair, for macro and micro alike
    own = {model: _resampled(suite, [arrays], seed)[0] for model, arrays in cases.items()}
    pairs: dict[tuple[str, str], tuple | None] = {}
    out = []
    for kind in ("macro", "micro"):
        scored = {}
        for model, arrays in cases.items():
            use_top = top if kind == "macro" else None
            score = _score(suite, arrays, kind, use_top)
            low, high, _ = _interval(suite, own[model], kind, use_top, score)
            scored[model] = (score, low, high, arrays)
        scores = {m: score for m, (score, *_) in scored.items() if score is not None}
        ranked = sorted(scores, key=lambda m: (-scores[m], m))
        leader = ranked[0] if ranked else None
        for model, (score, low, high, arrays) in scored.items():
            gap = None, None, None, 0
            if leader and model != leader and score is not None:
                if (model, leader) not in pairs:
                    pairs[(model, leader)] = _paired(suite, cases[model], cases[leader], seed)
                gap = _gap(suite, pairs[(model, leader)], kind, top)
            out.append(
                {
                    "suite": suite_name,
                    "aggregate": kind,
                    "model": model,
                    "rank": ranked.index(model) + 1 if model in ranked else None,
                    "score": score,
                    "ci_low": low,
                    "ci_high": high,
                    "n_cases": int(sum(len(a) for a in arrays.values())),
                    "tasks_scored": sum(1 for a in arrays.values() if len(a)),
                    "tasks_total": len(suite.tasks),
                    "leader": leader,
                    "gap_to_leader": gap[0],
                    "gap_ci_low": gap[1],
                    "gap_ci_high": gap[2],
                    "paired_cases": gap[3],
                    "significant_vs_leader": None if gap[1] is None else bool(gap[1] > 0 or gap[2] < 0),
                    "cost_usd": costs.get(model),
                    "computed_at": now,
                    "stale": False,
                    "stale_reason": None,
                }
            )
    return pl.DataFrame(out, schema=LEADERBOARD_SCHEMA).sort("suite", "aggregate", "rank", nulls_last=True)


def _paired(suite, mine: Mapping[str, TaskCases], leader: Mapping[str, TaskCases], seed: int) -> tuple | None:
    """Model and leader on the cases both answered, each task resampled on the same draws of cases for both (a
    corpus task's scores recomputed on those draws for each): (mine, leader, mine's draws, leader's draws)."""
    a, b = {}, {}
    for task in suite.tasks:
        common = sorted(set(mine[task].ids) & set(leader[task].ids))
        if common:
            a[task] = mine[task].on(common)
            b[task] = leader[task].on(common)
    if not a:
        return None
    draws_a, draws_b = _resampled(suite, [a, b], seed)
    return a, b, draws_a, draws_b


def _gap(suite, pair: tuple | None, kind, top):
    """(gap, ci_low, ci_high, paired cases): model minus leader over the cases both answered."""
    if pair is None:
        return None, None, None, 0
    a, b, draws_a, draws_b = pair
    use_top = top if kind == "macro" else None
    mine, theirs = _score(suite, a, kind, use_top), _score(suite, b, kind, use_top)
    assert mine is not None and theirs is not None  # `_paired`: both sides have the cases both answered
    observed = mine - theirs
    differences = _score_draws(suite, draws_a, kind, use_top) - _score_draws(suite, draws_b, kind, use_top)
    low, high = np.quantile(differences, [0.025, 0.975])
    return observed, float(low), float(high), int(sum(len(v) for v in a.values()))


def suite_case_values(
    cases: pl.DataFrame | None, suite_name: str, suite: Suite
) -> tuple[dict[str, dict[str, TaskCases]], dict[str, float | None]]:
    """model -> task -> its cases' primary metric (`task_cases`), and model -> cost, from `benchmark_cases` rows
    (all suites' rows, or None when the table has no file yet)."""
    by_model: dict[str, dict[str, TaskCases]] = {}
    costs: dict[str, float | None] = {}
    if cases is None:
        return by_model, costs
    cases = cases.filter(pl.col("suite") == suite_name)
    for (model, task_name), frame in cases.group_by("model", "task"):
        if task_name not in suite.tasks:
            continue
        by_model.setdefault(model, {})[task_name] = task_cases(frame, suite.tasks[task_name])
    for (model,), frame in cases.group_by("model"):
        called = frame.filter(pl.col("status") != SKIPPED)
        # A call whose price is unknown leaves the total unknown: never summed as if it were free.
        costs[model] = None if called["cost_usd"].null_count() else float(called["cost_usd"].sum())
    return by_model, costs
