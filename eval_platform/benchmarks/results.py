"""A task's metric over its answered cases: mean, standard error and a 95% interval that stays honest at the edges;
for a corpus statistic (corpus BLEU, chrF), the statistic and an interval from resampling its cases.

FAILED and SKIPPED cases are left out of `values` by the caller (counted as n_failed), never scored 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from eval_platform.stats.proportions import wilson_interval

Z_95 = 1.959963984540054


def draws_per_chunk(resamples: int, n: int) -> int:
    """Bootstrap draws of `n` cases taken at a time: a chunk's draws hold ~2M case positions (16 MB), so memory
    stays bounded whatever `n` (the draws are the same as in one go: the generator's stream is consumed in order)."""
    return max(1, min(resamples, 2_000_000 // max(n, 1)))


def summed_draws(case_statistics: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Each draw's summed statistics: `index` holds one row of drawn case positions per draw (resamples x n).

    The cases' counts in each draw times the statistics (counts @ statistics), a chunk of draws at a time, so
    memory stays bounded (never a resamples x n x statistics array)."""
    stats = np.asarray(case_statistics, dtype=float)
    index = np.asarray(index)
    resamples, n = index.shape
    out = np.empty((resamples, stats.shape[1]))
    chunk = draws_per_chunk(resamples, n)
    for start in range(0, resamples, chunk):
        part = index[start : start + chunk]
        size = len(part)
        picked = part + len(stats) * np.arange(size)[:, None]
        counts = np.bincount(picked.ravel(), minlength=size * len(stats)).reshape(size, len(stats))
        out[start : start + size] = counts @ stats
    return out


@dataclass(frozen=True)
class MetricSummary:
    value: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


def summarize(values: np.ndarray, seed: int = 0, resamples: int = 2000) -> MetricSummary:
    """Mean with its 95% interval: Wilson for 0/1 values, else a seeded percentile bootstrap.

    At the edges (all values equal) the bootstrap collapses, so the stderr is taken from the Wilson
    interval's half width instead of reporting an impossible certainty of 0.
    """
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        return MetricSummary(None, None, None, None, 0)
    mean = float(values.mean())
    binary = bool(np.isin(values, (0.0, 1.0)).all())
    if binary or np.ptp(values) == 0:
        low, high = (float(bound) for bound in wilson_interval(mean * n, n)) if 0 <= mean <= 1 else (mean, mean)
        stderr = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
        if stderr == 0.0:
            stderr = (high - low) / (2 * Z_95)
        return MetricSummary(mean, stderr, low, high, n)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = draws_per_chunk(resamples, n)  # the draws a chunk at a time: bounded memory
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        means[start : start + size] = values[rng.integers(0, n, size=(size, n))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return MetricSummary(mean, float(values.std(ddof=1) / math.sqrt(n)), float(low), float(high), n)


def summarize_corpus(
    value: float | None,
    case_statistics: np.ndarray,
    score: Callable[[np.ndarray], float],
    seed: int = 0,
    resamples: int = 2000,
) -> MetricSummary:
    """A corpus statistic (corpus BLEU, chrF) with an interval that describes it, not the mean of per-case scores.

    `case_statistics` holds one row of summable sufficient statistics per case, `score(summed row)` the statistic.
    A seeded bootstrap draws the cases with replacement and recomputes the statistic from each draw's summed rows
    (sacrebleu's bootstrap method, over cases); the interval is the draws' 2.5-97.5 percentiles and the stderr
    their standard deviation. When every draw is equal (one case, identical cases) the bootstrap has no width and
    the interval is Wilson's on `value` over the cases, as for a mean: never a certainty of 0.
    """
    stats = np.asarray(case_statistics, dtype=float)
    n = len(stats)
    if n == 0 or value is None:
        return MetricSummary(value, None, None, None, n)
    rng = np.random.default_rng(seed)
    draws = np.empty(resamples)
    chunk = draws_per_chunk(resamples, n)  # the draws a chunk at a time: bounded memory
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        draws[start : start + size] = [score(row) for row in summed_draws(stats, rng.integers(0, n, size=(size, n)))]
    low, high = (float(q) for q in np.quantile(draws, [0.025, 0.975]))
    stderr = float(draws.std(ddof=1)) if resamples > 1 else 0.0
    if high - low == 0 and 0 <= value <= 1:
        low, high = (float(bound) for bound in wilson_interval(value * n, n))
        stderr = (high - low) / (2 * Z_95)
    return MetricSummary(value, stderr, low, high, n)


@dataclass(frozen=True, eq=False)
class TaskCases:
    """One task's answered cases for one model, as groups, suites and the leaderboard aggregate and resample them.

    `data` holds the task's primary metric per case (`corpus` None: the task's value is their mean), or for a corpus
    metric (corpus BLEU, chrF) one row of summable statistics per case, with `corpus(summed row)` the corpus score:
    the task's value is then the corpus score over its cases, the one its own `benchmark_results` row reports, and
    each resample recomputes it from the drawn cases' statistics.
    """

    ids: tuple[str, ...]
    data: np.ndarray
    corpus: Callable[[np.ndarray], float] | None = None

    @classmethod
    def of_values(cls, values: Mapping[str, float]) -> TaskCases:
        """Per-case values of a mean metric: case_id -> value."""
        return cls(tuple(values), np.array(list(values.values()), dtype=float))

    def __len__(self) -> int:
        return len(self.ids)

    def value(self) -> float | None:
        """The task's value: its cases' mean, or the corpus score over them."""
        if not len(self):
            return None
        return float(self.data.mean()) if self.corpus is None else self.corpus(self.data.sum(axis=0))

    def as_pooled_cases(self) -> np.ndarray:
        """What the task adds to a pool of cases (micro): its per-case values, or for a corpus metric its corpus
        score once per case, so the pool's mean weighs each task's value by its number of cases."""
        return self.data if self.corpus is None else np.full(len(self), self.value())

    def resampled_totals(self, index: np.ndarray) -> np.ndarray:
        """Per draw (a row of `index`: drawn case positions), the sum of what `as_pooled_cases` would give for the
        drawn cases: the drawn values' sum, or the number of cases times the draw's corpus score."""
        if self.corpus is None:
            return self.data[index].sum(axis=1)
        return len(self) * np.array([self.corpus(row) for row in summed_draws(self.data, index)])

    def on(self, ids: list[str]) -> TaskCases:
        """The same task restricted to `ids` (in that order), e.g. the cases two models both answered."""
        position = {case_id: i for i, case_id in enumerate(self.ids)}
        return TaskCases(tuple(ids), self.data[[position[case_id] for case_id in ids]], self.corpus)


def as_task_cases(cases: TaskCases | Mapping[str, float]) -> TaskCases:
    """A task's cases; a plain mapping case_id -> value is a mean metric's."""
    return cases if isinstance(cases, TaskCases) else TaskCases.of_values(cases)
