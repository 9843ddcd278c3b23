"""Ranking models from pairwise comparisons: win rates with Wilson intervals, and Bradley–Terry strengths.

A comparison is (left, right, winner) with winner "left", "right" or "tie"; a tie counts as half a win for
each side. Rows with a null winner are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from eval_platform.stats._labels import as_series, encode
from eval_platform.stats.proportions import wilson_interval

WINNERS = ("left", "right", "tie")
RANKING_SCHEMA = {"model": pl.String, "score": pl.Float64, "rank": pl.UInt32, "comparisons": pl.UInt32}


def _comparisons(left, right, winner) -> pl.DataFrame:
    frame = pl.DataFrame({"left": as_series(left), "right": as_series(right), "winner": as_series(winner)})
    frame = frame.drop_nulls()
    unknown = frame.filter(~pl.col("winner").is_in(WINNERS))
    if unknown.height:
        raise ValueError(f"winner must be one of {WINNERS}, got {unknown['winner'].unique().to_list()[:5]}")
    return frame.with_columns(
        pl.when(pl.col("winner") == "left")
        .then(1.0)
        .when(pl.col("winner") == "right")
        .then(0.0)
        .otherwise(0.5)
        .alias("left_points")
    )


def win_rates(left, right, winner, confidence: float = 0.95) -> pl.DataFrame:
    """Per model: comparisons, wins, losses, ties, `win_rate` = (wins + ties / 2) / comparisons and its
    Wilson interval (`ci_low`, `ci_high`). Sorted by win rate, best first, then by model."""
    frame = _comparisons(left, right, winner)
    sides = pl.concat(
        [
            frame.select(pl.col("left").alias("model"), pl.col("left_points").alias("points")),
            frame.select(pl.col("right").alias("model"), (1 - pl.col("left_points")).alias("points")),
        ]
    )
    table = sides.group_by("model").agg(
        pl.len().alias("comparisons"),
        (pl.col("points") == 1).sum().alias("wins"),
        (pl.col("points") == 0).sum().alias("losses"),
        (pl.col("points") == 0.5).sum().alias("ties"),
        pl.col("points").mean().alias("win_rate"),
    )
    low, high = wilson_interval(table["win_rate"] * table["comparisons"], table["comparisons"], confidence)
    return table.with_columns(ci_low=low, ci_high=high).sort(["win_rate", "model"], descending=[True, False])


@dataclass(frozen=True)
class BradleyTerry:
    """Bradley–Terry strengths: `table` has model, score (strengths summing to 1), rank (1 = best; equal
    scores share the best rank) and comparisons, sorted by rank then model."""

    table: pl.DataFrame
    n: int
    iterations: int
    converged: bool
    note: str | None = None


def bradley_terry(left, right, winner, tolerance: float = 1e-10, max_iterations: int = 10_000) -> BradleyTerry:
    """Maximum-likelihood Bradley–Terry strengths by Hunter's (2004) MM algorithm (Zermelo's iteration).

    Ties count as half a win for each side (evalica's default weighting). Iterates until no strength moves by
    more than `tolerance` relative to the largest. When a model never won or never lost the maximum-likelihood
    estimate does not exist (its strength runs to 0 or takes all the mass); the note says so, and the ranks
    still order the models sensibly.
    """
    frame = _comparisons(left, right, winner)
    (first, second), models = encode(frame["left"], frame["right"])
    k = models.size
    if frame.height == 0 or k < 2:
        empty = pl.DataFrame(schema=RANKING_SCHEMA)
        return BradleyTerry(empty, frame.height, 0, False, note="needs comparisons between at least two models")

    points = frame["left_points"].to_numpy()
    wins = np.zeros((k, k))
    np.add.at(wins, (first, second), points)
    np.add.at(wins, (second, first), 1 - points)
    games = wins + wins.T
    total_wins = wins.sum(axis=1)

    strength = np.full(k, 1.0 / k)
    converged = False
    # B007 is wrong here: `iteration` is read after the loop, as the number of iterations run
    for iteration in range(1, max_iterations + 1):  # noqa: B007
        pair_sum = np.add.outer(strength, strength)
        rate = np.divide(games, pair_sum, out=np.zeros_like(games), where=games > 0).sum(axis=1)
        updated = np.divide(total_wins, rate, out=np.zeros_like(total_wins), where=rate > 0)
        updated /= updated.sum()
        change = np.abs(updated - strength).max() / updated.max()
        strength = updated
        if change < tolerance:
            converged = True
            break

    table = (
        pl.DataFrame({"model": models, "score": strength, "comparisons": games.sum(axis=1).astype(np.uint32)})
        .with_columns(pl.col("score").rank("min", descending=True).cast(pl.UInt32).alias("rank"))
        .select("model", "score", "rank", "comparisons")
        .sort(["rank", "model"])
    )
    notes = []
    if not converged:
        notes.append(f"did not converge in {max_iterations} iterations")
    one_sided = int(((total_wins == 0) | (total_wins == games.sum(axis=1))).sum())
    if one_sided:
        notes.append(f"{one_sided} model(s) never won or never lost, so no finite maximum-likelihood strength exists")
    return BradleyTerry(table, frame.height, iteration, converged, "; ".join(notes) or None)
