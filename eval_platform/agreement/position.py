"""`position_consistency`: does a pairwise evaluator judged in both orders give the same verdict?"""

from __future__ import annotations

import json

import polars as pl

from eval_platform.agreement.periods import windows
from eval_platform.agreement.rows import Rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.stats.judge_agreement import (
    position_consistency_from_counts,
    position_counts,
)


def position(config: EvaluatorConfig, scores: pl.DataFrame, rows: Rows, trailing_days: int) -> None:
    both = scores.filter(pl.col("is_final") & pl.col("verdict_ab").is_not_null() & pl.col("verdict_ba").is_not_null())
    table = both.group_by("date", "verdict_ab", "verdict_ba").len("n")
    position_rows(config, table, scores["date"].unique().to_list(), rows, trailing_days)


def position_rows(config: EvaluatorConfig, table: pl.DataFrame, dates: list, rows: Rows, trailing_days: int) -> None:
    """The rows from `table`, (date, verdict_ab, verdict_ba, n) over the final verdicts given in both orders, and
    the evaluator's `dates`. Each distinct pair of verdicts is counted once by `position_counts` and weighted
    by n: the same integer counts as from the rows. Counts per day, summed over each window's days: 61 windows
    cost 30 days' counts instead of 61 passes."""
    mirrored = pl.col("verdict_ba").replace({"A": "B", "B": "A"})  # back to presentation terms
    days: dict = {}
    for day, shown, swapped, n in table.select("date", "verdict_ab", mirrored.alias("shown_swapped"), "n").iter_rows():
        counts = position_counts(pl.Series([shown]), pl.Series([swapped]))
        days[day] = tuple(total + n * c for total, c in zip(days.get(day, (0, 0, 0)), counts, strict=True))
    for window, start, end in windows(dates, trailing_days):
        kept = [c for day, c in days.items() if start is None or (day is not None and start <= day <= end)]
        result = position_consistency_from_counts(*(sum(column) for column in zip((0, 0, 0), *kept, strict=True)))
        rows.add(
            "position_consistency",
            result.consistency,
            result.n,
            note=result.note,
            section="position_consistency",
            subject=config.name,
            reference="swapped_order",
            period=window,
            period_start=start,
            period_end=end,
            details=json.dumps(
                {"inconsistent": result.inconsistent, "first_position_share": result.first_position_share}
            ),
        )
