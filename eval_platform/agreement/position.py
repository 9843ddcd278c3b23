"""`position_consistency`: does a pairwise evaluator judged in both orders give the same verdict?"""

from __future__ import annotations

import json

import polars as pl

from eval_platform.agreement.periods import windows
from eval_platform.agreement.rows import Rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.stats.judge_agreement import (
    position_consistency,
    position_consistency_from_counts,
    position_counts,
)


def position(config: EvaluatorConfig, scores: pl.DataFrame, rows: Rows, trailing_days: int) -> None:
    both = scores.filter(pl.col("is_final") & pl.col("verdict_ab").is_not_null() & pl.col("verdict_ba").is_not_null())
    mirrored = pl.col("verdict_ba").replace({"A": "B", "B": "A"})  # back to presentation terms
    frame = both.select("date", "verdict_ab", mirrored.alias("shown_swapped"))
    # Counts per day, summed over each window's days: 61 windows cost 30 days' counts instead of 61 passes.
    days = {
        day: position_counts(part["verdict_ab"], part["shown_swapped"])
        for (day,), part in frame.group_by("date")
        if day is not None
    }
    for window, start, end in windows(scores["date"].unique().to_list(), trailing_days):
        if start is None:
            result = position_consistency(frame["verdict_ab"], frame["shown_swapped"])
        else:
            counts = [c for day, c in days.items() if start <= day <= end]
            result = position_consistency_from_counts(*(sum(column) for column in zip((0, 0, 0), *counts, strict=True)))
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
