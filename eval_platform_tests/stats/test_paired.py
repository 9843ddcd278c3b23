"""The paired shift between two judge configurations equals scipy's paired t-test."""

import numpy as np
import pytest
from scipy import stats

from eval_platform.stats.paired import paired_shift


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_paired_shift_equals_scipy_ttest_rel(alpha):
    rng = np.random.default_rng(4)
    previous = rng.random(40)
    current = np.clip(previous + 0.05 + rng.normal(0, 0.1, 40), 0, 1)
    ours = paired_shift(current, previous, alpha)
    peer = stats.ttest_rel(current, previous)
    low, high = peer.confidence_interval(1 - alpha)
    assert ours.t == pytest.approx(peer.statistic, abs=1e-12)
    assert ours.p_value == pytest.approx(peer.pvalue, abs=1e-12)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((low, high), abs=1e-12)
    assert ours.shift == pytest.approx(np.mean(current - previous))


def test_degenerate_pairs():
    assert paired_shift([1.0], [0.0]).shift is None
    same = paired_shift([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    assert same.shift == 0 and same.p_value == 1.0 and not same.significant and same.agreement == 1.0
    assert same.note == "no anchor moved"  # not "every anchor moved by the same amount"
    moved = paired_shift([0.75, 1.0], [0.5, 0.75])
    assert moved.shift == pytest.approx(0.25) and moved.significant and moved.agreement == 0.0
    assert moved.note == "every anchor moved by the same amount (+0.25)"
    assert paired_shift([np.nan, 1.0, 0.5], [0.0, 1.0, 0.5]).n == 2
