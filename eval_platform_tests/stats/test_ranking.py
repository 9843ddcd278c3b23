"""Win rates with Wilson intervals and Bradley–Terry strengths, against statsmodels and evalica."""

from __future__ import annotations

import evalica
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_platform.stats.ranking import bradley_terry, win_rates

EVALICA_WINNERS = {"left": evalica.Winner.X, "right": evalica.Winner.Y, "tie": evalica.Winner.Draw}


def _tournament(seed: int, models: int = 8, games: int = 600) -> pl.DataFrame:
    """Comparisons drawn from a Bradley–Terry model with a tie band, every model connected."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 1, models)
    left, right = rng.integers(0, models, games), rng.integers(0, models, games)
    right = np.where(left == right, (right + 1) % models, right)
    gap = strength[left] - strength[right] + rng.logistic(size=games)
    winner = np.where(gap > 0.4, "left", np.where(gap < -0.4, "right", "tie"))
    names = np.array([f"model-{i}" for i in range(models)])
    return pl.DataFrame({"left": names[left], "right": names[right], "winner": winner})


def test_win_rates_count_a_tie_as_half_a_win():
    table = win_rates(["x", "x", "y", "x"], ["y", "z", "z", "y"], ["left", "tie", "right", None])
    rows = {row["model"]: row for row in table.to_dicts()}
    assert (rows["x"]["wins"], rows["x"]["ties"], rows["x"]["comparisons"]) == (1, 1, 2)
    assert rows["x"]["win_rate"] == 0.75 and rows["z"]["win_rate"] == 0.75 and rows["y"]["win_rate"] == 0.0
    assert table["model"].to_list() == ["x", "z", "y"]
    assert rows["x"]["ci_low"] < 0.75 < rows["x"]["ci_high"]


@pytest.mark.parametrize("seed", range(10))
def test_bradley_terry_matches_evalica(seed):
    games = _tournament(seed)
    ours = bradley_terry(games["left"], games["right"], games["winner"])
    peer = evalica.bradley_terry(
        games["left"].to_list(),
        games["right"].to_list(),
        [EVALICA_WINNERS[w] for w in games["winner"]],
        tolerance=1e-12,
        limit=100_000,
    )
    expected = (peer.scores / peer.scores.sum()).to_dict()
    assert ours.converged
    for model, score in ours.table.select("model", "score").iter_rows():
        assert score == pytest.approx(expected[model], abs=1e-8)


def test_bradley_terry_ranks_are_deterministic_and_share_equal_scores():
    result = bradley_terry(["a", "b", "c", "a"], ["b", "c", "a", "d"], ["tie", "tie", "tie", "left"])
    assert result.table["model"].to_list() == ["a", "b", "c", "d"]
    assert result.table["rank"].to_list()[-1] == 4
    symmetric = bradley_terry(["p", "q"], ["q", "p"], ["left", "left"])
    assert symmetric.table["rank"].to_list() == [1, 1]
    assert symmetric.table["score"].to_list() == pytest.approx([0.5, 0.5])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_swapping_sides_does_not_change_the_strengths(seed):
    games = _tournament(seed, games=200)
    mirrored = games.select(
        pl.col("right").alias("left"),
        pl.col("left").alias("right"),
        pl.col("winner").replace({"left": "right", "right": "left"}),
    )
    original = bradley_terry(games["left"], games["right"], games["winner"]).table
    swapped = bradley_terry(mirrored["left"], mirrored["right"], mirrored["winner"]).table
    assert swapped["model"].to_list() == original["model"].to_list()
    assert swapped["score"].to_numpy() == pytest.approx(original["score"].to_numpy(), abs=1e-9)


def test_degenerate_comparisons_are_reported_not_raised():
    assert bradley_terry([], [], []).note == "needs comparisons between at least two models"
    assert bradley_terry([None], ["a"], ["left"]).table.height == 0
    unbeaten = bradley_terry(["a", "a"], ["b", "b"], ["left", "left"])
    assert "2 model(s) never won or never lost" in unbeaten.note
    assert unbeaten.table["model"].to_list() == ["a", "b"]
    chain = bradley_terry(["a", "b", "c"], ["b", "c", "a"], ["left", "left", "tie"], max_iterations=3)
    assert not chain.converged and chain.note == "did not converge in 3 iterations"
    with pytest.raises(ValueError, match="winner must be one of"):
        bradley_terry(["a"], ["b"], ["A"])
