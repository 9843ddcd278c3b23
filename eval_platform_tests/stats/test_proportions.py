"""The one Wilson interval (stats.proportions) against statsmodels' proportion_confint(method="wilson"), its
documented edges, and the same interval wherever a rate is shown: win rates, pass rates, benchmark metrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from eval_platform.benchmarks.results import summarize
from eval_platform.stats.proportions import wilson_interval
from eval_platform.stats.ranking import win_rates


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 5_000),
    fraction=st.floats(0, 1),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_equals_statsmodels_wilson(n, fraction, confidence):
    successes = round(fraction * n)
    low, high = wilson_interval(successes, n, confidence)
    peer_low, peer_high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    assert float(low) == pytest.approx(peer_low, abs=1e-12)
    assert float(high) == pytest.approx(peer_high, abs=1e-12)


def test_vectorized_over_arrays_with_fractional_successes():
    successes, n = np.array([0, 2.5, 57, 130]), np.array([10, 5, 130, 130])
    low, high = wilson_interval(successes, n)
    for i in range(len(n)):
        assert (low[i], high[i]) == pytest.approx(proportion_confint(successes[i], n[i], method="wilson"), abs=1e-12)


@pytest.mark.parametrize("n", [1, 7, 9, 10, 12, 25, 130, 10_000])
def test_the_edges_are_exact(n):
    # statsmodels leaves 0 of 7 a lower bound of 2.8e-17 (above the rate observed); here it is 0, and n of n is 1
    assert wilson_interval(0, n)[0] == 0.0 and wilson_interval(n, n)[1] == 1.0
    assert 0.0 < wilson_interval(0, n)[1] < 1.0 and 0.0 < wilson_interval(n, n)[0] < 1.0


def test_no_trials_have_no_interval():
    low, high = wilson_interval([0, 3], [0, 4])
    assert np.isnan(low[0]) and np.isnan(high[0]) and not np.isnan(low[1])


def test_win_rates_and_benchmark_metrics_show_the_same_interval():
    # a model that lost each of its 7 comparisons, and a task whose 7 cases all failed: the same 0 of 7
    table = win_rates(["a"] * 7, ["b"] * 7, ["right"] * 7)
    rows = {row["model"]: row for row in table.to_dicts()}
    metric = summarize(np.zeros(7))
    assert (rows["a"]["ci_low"], rows["a"]["ci_high"]) == (metric.ci_low, metric.ci_high)
    assert rows["a"]["ci_low"] == 0.0 and rows["b"]["ci_high"] == 1.0
    all_right = summarize(np.ones(7))
    assert (rows["b"]["ci_low"], rows["b"]["ci_high"]) == (all_right.ci_low, all_right.ci_high)
