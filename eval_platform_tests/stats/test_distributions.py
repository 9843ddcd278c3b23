"""The t and normal functions are scipy.stats' own, bit for bit, without importing scipy.stats."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from eval_platform.stats.distributions import (
    norm_cdf,
    norm_pdf,
    norm_ppf,
    norm_sf,
    t_ppf,
    t_sf,
)

X = [-40.0, -3.2, -0.5, 0.0, 1e-9, 0.7, 1.959963984540054, 5.0, 37.8]
Q = [1e-12, 0.025, 0.5, 0.9, 0.975, 0.995, 1 - 1e-12]
DF = [1, 1.5, 3.7, 30, 120.2, 99473.08, 497428.5]


@pytest.mark.parametrize("df", DF)
def test_student_t_is_scipy_stats_bit_for_bit(df):
    assert [float(t_sf(x, df)) for x in X] == [float(stats.t.sf(x, df)) for x in X]
    assert [float(t_ppf(q, df)) for q in Q] == [float(stats.t.ppf(q, df)) for q in Q]


def test_normal_is_scipy_stats_bit_for_bit():
    for ours, theirs in ((norm_cdf, stats.norm.cdf), (norm_sf, stats.norm.sf), (norm_pdf, stats.norm.pdf)):
        assert [float(ours(x)) for x in X] == [float(theirs(x)) for x in X]
        np.testing.assert_array_equal(ours(np.array(X)), theirs(np.array(X)))
    assert [float(norm_ppf(q)) for q in Q] == [float(stats.norm.ppf(q)) for q in Q]
