"""Groups, suite scores and the leaderboard: aggregates over tasks, with intervals from the cases.

- A task's primary metric is its first scorer. A group aggregates its tasks' primary metrics, `macro`
  (the weighted mean of the task values: the paper's "average over subsets") or `micro` (every case of
  every task pooled), as the suite declares; the suite score is the macro mean over its top-level units
  (each group, and each task in no group, weighted by its weight), and the micro mean over all its cases.
- Intervals come from a seeded bootstrap that resamples cases within each task (tasks are fixed strata).
  When every case has the same value the bootstrap has no width; the interval is then Wilson's on the
  pooled cases, never a standard error of exactly 0.
- The leaderboard ranks the models of a suite by score. The gap of each model to the leader is paired: both
  are resampled on the same cases, among the cases both answered, and the gap is significant when its 95%
  interval excludes 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime

import numpy as np
import polars as pl

from eval_platform.benchmarks.config import Suite
from eval_platform.benchmarks.results import Z_95, wilson_interval
from eval_platform.schemas import BENCHMARK_RESULT_SCHEMA, LEADERBOARD_SCHEMA

RESAMPLES = 2000

# Per-case values of a task's primary metric: task -> case_id -> value.
CaseValues = Mapping[str, Mapping[str, float]]


def units(suite: Suite) -> list[tuple[str, list[str], float, str]]:
    """Top-level units: (name, tasks, weight, aggregate) for each group, then each task in no group."""
    grouped = {task for group in suite.groups.values() for task in group.tasks}
    out = [(name, list(g.tasks), 1.0, g.aggregate) for name, g in suite.groups.items()]
    out += [(name, [name], task.weight, "macro") for name, task in suite.tasks.items() if name not in grouped]
    return out


def _macro(suite: Suite, tasks: list[str], means: Mapping[str, float]) -> float | None:
    present = [t for t in tasks if t in means]
    if not present:
        return None
    weights = np.array([suite.tasks[t].weight for t in present])
    return float(np.dot(weights, [means[t] for t in present]) / weights.sum())


def _score(suite: Suite, values: Mapping[str, np.ndarray], kind: str, top: list | None = None) -> float | None:
    """The suite's (or one unit's) score from per-task case arrays."""
    if kind == "micro":
        pooled = np.concatenate([v for v in values.values() if len(v)]) if any(len(v) for v in values.values()) else np.array([])
        return float(pooled.mean()) if len(pooled) else None
    means = {t: float(v.mean()) for t, v in values.items() if len(v)}
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


def _resampled(suite, sides: list[Mapping[str, np.ndarray]], kind, top, seed: int) -> list[np.ndarray]:
    """Each side's score over the same RESAMPLES draws of cases within each task (vectorized)."""
    rng = np.random.default_rng(seed)
    stats: list[dict[str, tuple[np.ndarray, int]]] = [{} for _ in sides]
    for task in suite.tasks:
        n = len(sides[0].get(task, ()))
        if not n:
            continue
        index = rng.integers(0, n, (RESAMPLES, n))
        for side, stat in zip(sides, stats, strict=True):
            stat[task] = (side[task][index].sum(axis=1), n)
    return [_score_draws(suite, stat, kind, top) for stat in stats] if stats[0] else []


def _score_draws(suite, stat: Mapping[str, tuple[np.ndarray, int]], kind, top) -> np.ndarray:
    """`_score` over resampled per-task sums: one value per draw."""
    if kind == "micro":
        return sum(sums for sums, _ in stat.values()) / sum(n for _, n in stat.values())
    if top is None:
        return _macro_draws(suite, list(stat), stat)
    unit_values, weights = [], []
    for _name, tasks, weight, aggregate in top:
        sub = {t: stat[t] for t in tasks if t in stat}
        if sub:
            unit_values.append(_score_draws(suite, sub, "micro", None) if aggregate == "micro" else _macro_draws(suite, tasks, sub))
            weights.append(weight)
    return np.average(np.vstack(unit_values), axis=0, weights=weights)


def _macro_draws(suite, tasks: list[str], stat) -> np.ndarray:
    present = [t for t in tasks if t in stat]
    weights = np.array([suite.tasks[t].weight for t in present])
    means = np.vstack([stat[t][0] / stat[t][1] for t in present])
    return weights @ means / weights.sum()


def _bootstrap(suite, values: Mapping[str, np.ndarray], kind, top, seed: int) -> tuple[float | None, float | None]:
    draws = _resampled(suite, [values], kind, top, seed)
    if not draws:
        return None, None
    low, high = np.quantile(draws[0], [0.025, 0.975])
    return float(low), float(high)


def _interval(suite, values, kind, top, seed) -> tuple[float | None, float | None, float | None]:
    """(ci_low, ci_high, stderr); Wilson on the pooled cases when the bootstrap has no width."""
    low, high = _bootstrap(suite, values, kind, top, seed)
    pooled = np.concatenate([v for v in values.values() if len(v)]) if any(len(v) for v in values.values()) else np.array([])
    if low is None:
        return None, None, None
    if high - low == 0 and len(pooled) and 0 <= pooled.mean() <= 1:
        low, high = wilson_interval(float(pooled.mean()) * len(pooled), len(pooled))
    return low, high, (high - low) / (2 * Z_95)


def suite_results(
    suite_name: str, suite: Suite, model: str, case_values: CaseValues, task_rows: pl.DataFrame, seed: int = 0
) -> pl.DataFrame:
    """`benchmark_results` rows for each group and for the suite, for one model (BENCHMARK_RESULT_SCHEMA)."""
    now = datetime.now(UTC)
    arrays = {t: np.array(list(case_values.get(t, {}).values()), dtype=float) for t in suite.tasks}
    primary = {t: task.scorers[0].metric_name for t, task in suite.tasks.items()}
    rows = []

    def row(level: str, name: str, tasks: list[str], kind: str, top=None) -> dict:
        values = {t: arrays[t] for t in tasks}
        value = _score(suite, values, kind, top)
        low, high, stderr = _interval(suite, values, kind, top, seed) if value is not None else (None, None, None)
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
    return pl.DataFrame(rows, schema=BENCHMARK_RESULT_SCHEMA)


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
    out = []
    for kind in ("macro", "micro"):
        scored = {}
        for model, values in by_model.items():
            arrays = {t: np.array(list(values.get(t, {}).values()), dtype=float) for t in suite.tasks}
            score = _score(suite, arrays, kind, top if kind == "macro" else None)
            low, high, _ = _interval(suite, arrays, kind, top if kind == "macro" else None, seed) if score is not None else (None, None, None)
            scored[model] = (score, low, high, arrays)
        ranked = sorted((m for m in scored if scored[m][0] is not None), key=lambda m: (-scored[m][0], m))
        leader = ranked[0] if ranked else None
        for model, (score, low, high, arrays) in scored.items():
            gap = _paired_gap(suite, by_model[model], by_model[leader], kind, top, seed) if leader and model != leader and score is not None else (None, None, None, 0)
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
                }
            )
    return pl.DataFrame(out, schema=LEADERBOARD_SCHEMA).sort("suite", "aggregate", "rank", nulls_last=True)


def _paired_gap(suite, mine: CaseValues, leader: CaseValues, kind, top, seed):
    """(gap, ci_low, ci_high, paired cases): model minus leader over the cases both answered, resampled together."""
    a, b = {}, {}
    for task in suite.tasks:
        common = sorted(set(mine.get(task, {})) & set(leader.get(task, {})))
        if common:
            a[task] = np.array([mine[task][c] for c in common])
            b[task] = np.array([leader[task][c] for c in common])
    if not a:
        return None, None, None, 0
    use_top = top if kind == "macro" else None
    observed = _score(suite, a, kind, use_top) - _score(suite, b, kind, use_top)
    draws_a, draws_b = _resampled(suite, [a, b], kind, use_top, seed)
    low, high = np.quantile(draws_a - draws_b, [0.025, 0.975])
    return observed, float(low), float(high), int(sum(len(v) for v in a.values()))
