"""Agreement's per-window statistics from per-day counts equal the statistics of the window's rows."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from eval_platform.agreement import PAIRWISE_LABELS, _DailyTables, _windows
from eval_platform.stats.judge_agreement import (
    label_agreement,
    label_agreement_table,
    pairwise_agreement,
    position_consistency,
    position_consistency_from_counts,
    position_counts,
)

DAYS = [f"2026-10-{d:02d}" for d in range(1, 13)]


def _frame(seed: int, values: list) -> pl.DataFrame:
    """Human and judge labels over twelve days (one day without rows), with missing labels on both sides and
    some rows without a date."""
    rng = np.random.default_rng(seed)
    n = 400
    pick = lambda: [values[i] if i < len(values) else None for i in rng.integers(0, len(values) + 1, n)]  # noqa: E731
    dates = [DAYS[i] if i != 4 else None for i in rng.integers(0, len(DAYS) - 1, n)]
    return pl.DataFrame({"date": dates, "human": pick(), "judge": pick()}, schema={"date": pl.String, "human": pl.String, "judge": pl.String})


def _in(frame: pl.DataFrame, start, end) -> pl.DataFrame:
    return frame if start is None else frame.filter(pl.col("date").is_between(pl.lit(start), pl.lit(end)))


@pytest.mark.parametrize("seed", range(8))
def test_label_statistics_per_window_equal_those_of_the_windows_rows(seed):
    # a rare label and one that only the judge gives: each window has its own set of seen labels
    frame = _frame(seed, ["neutral", "negative", "positive", "positive", "sarcastic"][: 3 + seed % 3])
    tables = _DailyTables(frame, frame["judge"])
    for _, start, end in _windows(DAYS, 3):
        part = _in(frame, start, end)
        assert label_agreement_table(*tables.contingency(tables.window(start, end))) == label_agreement(part["human"], part["judge"])


@pytest.mark.parametrize("seed", range(8))
def test_pairwise_statistics_per_window_equal_those_of_the_windows_rows(seed):
    frame = _frame(seed, ["A", "B", "tie", "garbage"])  # a verdict outside the labels: out of the table, in S1
    for judge in (frame["judge"], frame["judge"].fill_null("tie")):
        tables = _DailyTables(frame, judge)
        rows = frame.with_columns(judge.alias("judge"))
        for _, start, end in _windows(DAYS, 7):
            part, full = _in(rows, start, end), tables.window(start, end)
            assert label_agreement_table(*tables.contingency(full, PAIRWISE_LABELS)) == label_agreement(
                part["human"], part["judge"], labels=PAIRWISE_LABELS)
            assert tables.pairwise(full) == pairwise_agreement(part["human"], part["judge"])


def test_a_window_without_rows_has_no_statistics():
    frame = _frame(0, ["A", "B", "tie"])
    tables = _DailyTables(frame, frame["judge"])
    empty = tables.window("2026-09-01", "2026-09-07")
    assert label_agreement_table(*tables.contingency(empty)).n == 0
    assert tables.pairwise(empty).with_ties is None


@pytest.mark.parametrize("seed", range(5))
def test_position_consistency_from_counts_summed_over_days(seed):
    rng = np.random.default_rng(seed)
    verdicts = ["A", "B", "tie", None, "odd"]
    frame = pl.DataFrame({"day": rng.integers(0, 5, 300), "first": [verdicts[i] for i in rng.integers(0, 5, 300)],
                          "swapped": [verdicts[i] for i in rng.integers(0, 5, 300)]})
    days = [position_counts(part["first"], part["swapped"]) for _, part in frame.group_by("day")]
    summed = position_consistency_from_counts(*(sum(column) for column in zip(*days)))
    assert summed == position_consistency(frame["first"], frame["swapped"])
