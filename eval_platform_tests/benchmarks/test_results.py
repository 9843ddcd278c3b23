"""Task metric summaries: Wilson intervals equal statsmodels', edges never claim a stderr of 0, bootstrap is seeded."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from eval_platform.benchmarks.results import summarize, wilson_interval


@pytest.mark.parametrize(("k", "n"), [(0, 10), (10, 10), (7, 20), (1, 3)])
def test_wilson_interval_matches_statsmodels(k, n):
    assert wilson_interval(k, n) == pytest.approx(proportion_confint(k, n, alpha=0.05, method="wilson"))


def test_all_right_or_all_wrong_has_an_honest_interval():
    for values in (np.ones(12), np.zeros(12)):
        summary = summarize(values)
        assert summary.stderr > 0 and summary.ci_high - summary.ci_low > 0.1
        assert summary.ci_low <= summary.value <= summary.ci_high


def test_continuous_values_bootstrap_is_seeded_and_covers_the_mean():
    values = np.random.default_rng(1).uniform(size=200)
    first, again = summarize(values, seed=3), summarize(values, seed=3)
    assert first == again
    assert first.ci_low < first.value < first.ci_high
    assert first.stderr == pytest.approx(values.std(ddof=1) / np.sqrt(200))


def test_nothing_answered_is_no_value_not_zero():
    assert summarize(np.array([])).value is None
