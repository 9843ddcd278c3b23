"""Periods of the judge rows (`all`, each `day`, the `trailing` window ending on each day), and tables of counts
per day that a window sums instead of passing over its rows again."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import polars as pl

from eval_platform.stats._labels import encode
from eval_platform.stats.judge_agreement import (
    MAX_TABLE_CELLS,
    pairwise_agreement_counts,
    score_agreement_table,
)

TRAILING_DAYS = 7


def windows(dates: list[str], trailing_days: int) -> list[tuple[str, str | None, str | None]]:
    """(window, start, end): all, each day, and the trailing window ending on each day."""
    windows: list[tuple[str, str | None, str | None]] = [("all", None, None)]
    for day in sorted(set(dates)):
        start = (date.fromisoformat(day) - timedelta(days=trailing_days - 1)).isoformat()
        windows += [("day", day, day), ("trailing", start, day)]
    return windows


def period_windows(dates: list[str], trailing_days: int, base: dict) -> list[tuple[str | None, str | None, dict]]:
    """(start, end, fields) of each of `windows`: the row fields `base` with the window's period columns."""
    return [
        (start, end, {**base, "period": window, "period_start": start, "period_end": end})
        for window, start, end in windows(dates, trailing_days)
    ]


def sorted_by_date(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame sorted by date, rows of a day in their order: each window is then a slice (`in_window`)."""
    return frame.sort("date", maintain_order=True, nulls_last=True)


def in_window(frame: pl.DataFrame, start: str | None, end: str | None) -> pl.DataFrame:
    """The rows of a `sorted_by_date` frame dated start..end (a slice, not a filter: 61 windows of millions of rows)."""
    if start is None:
        return frame
    dates = frame["date"]
    dated = dates.len() - dates.null_count()
    first = int(dates.head(dated).search_sorted(start, side="left"))
    last = int(dates.head(dated).search_sorted(end, side="right"))
    return frame.slice(first, max(last - first, 0))


class DailyTables:
    """Per day, the counts of every (human, judge) pair of values, missing ones included, so that a window's
    label statistics come from the sum of its days' tables: the same counts as from the window's rows, without
    a pass over up to seven days of rows for each of the 61 windows."""

    def __init__(self, frame: pl.DataFrame, judge: pl.Series):
        (human_codes, judge_codes), self.categories = encode(frame["human"], judge)
        [day_codes], days = encode(frame["date"])
        k = self.categories.size + 1  # the last row and column count missing values
        cell = np.where(human_codes < 0, k - 1, human_codes) * k + np.where(judge_codes < 0, k - 1, judge_codes)
        dated = day_codes >= 0
        self.total = np.bincount(cell, minlength=k * k).reshape(k, k)  # every row, dated or not
        per_day = np.bincount(day_codes[dated] * k * k + cell[dated], minlength=days.size * k * k)
        self.days = dict(zip(days.tolist(), per_day.reshape(days.size, k, k), strict=True))

    def window(self, start: str | None, end: str | None) -> np.ndarray:
        if start is None:
            return self.total
        k = self.categories.size + 1
        return sum((t for day, t in self.days.items() if start <= day <= end), np.zeros((k, k), dtype=np.int64))

    def contingency(self, full: np.ndarray, labels=None) -> tuple[np.ndarray, tuple]:
        """What `contingency_table` gives on the rows counted in `full`: the categories seen on either side
        (or `labels`, in their order), rows human."""
        k = self.categories.size
        if labels is None:
            seen = np.flatnonzero((full[:k, :].sum(axis=1) > 0) | (full[:, :k].sum(axis=0) > 0))
            return full[np.ix_(seen, seen)], tuple(self.categories[seen].tolist())
        position = {value: i for i, value in enumerate(self.categories.tolist())}
        index = [position.get(label, -1) for label in labels]
        padded = np.zeros((k + 1, k + 1), dtype=full.dtype)
        padded[:k, :k] = full[:k, :k]  # the last row and column of `padded` are zeros, for labels never seen
        return padded[np.ix_(index, index)], tuple(labels)

    def pairwise(self, full: np.ndarray, tie: str = "tie"):
        """`pairwise_agreement` on the rows counted in `full`."""
        k = self.categories.size
        both = full[:k, :k]
        decisive = [i for i, value in enumerate(self.categories.tolist()) if value != tie]
        kept = both[np.ix_(decisive, decisive)]
        return pairwise_agreement_counts(int(both.sum()), int(np.trace(both)), int(kept.sum()), int(np.trace(kept)))


class DailyScoreTables:
    """Per day, the count of every (human value, judge value) pair of the rows with both, so that a window's
    Spearman, Pearson and MAE come from the sum of its days' tables (`score_agreement_table`) instead of ranking
    each of the 61 windows' rows. Only when both sides take few values (`fits`: ratings, scores on a scale);
    otherwise the windows are ranked from their rows."""

    def __init__(self, frame: pl.DataFrame):
        sides = frame.select(
            "date", *(pl.col(c).cast(pl.Float64).fill_nan(None) for c in ("human", "judge"))
        ).drop_nulls(["human", "judge"])
        human, judge = sides["human"].to_numpy(), sides["judge"].to_numpy()
        self.human_values, self.judge_values = (np.sort(sides[c].unique().to_numpy()) for c in ("human", "judge"))
        self.fits = self.human_values.size * self.judge_values.size <= MAX_TABLE_CELLS
        if not self.fits:
            return
        shape = (self.human_values.size, self.judge_values.size)
        cell = np.searchsorted(self.human_values, human) * shape[1] + np.searchsorted(self.judge_values, judge)
        [day_codes], days = encode(sides["date"])
        dated = day_codes >= 0
        size = shape[0] * shape[1]
        self.total = np.bincount(cell, minlength=size).reshape(shape)  # every row, dated or not
        per_day = np.bincount(day_codes[dated] * size + cell[dated], minlength=days.size * size)
        self.days = dict(zip(days.tolist(), per_day.reshape(days.size, *shape), strict=True))

    def window(self, start: str | None, end: str | None) -> np.ndarray:
        if start is None:
            return self.total
        return sum((t for day, t in self.days.items() if start <= day <= end), np.zeros_like(self.total))

    def agreement(self, start: str | None, end: str | None):
        return score_agreement_table(self.window(start, end), self.human_values, self.judge_values)
