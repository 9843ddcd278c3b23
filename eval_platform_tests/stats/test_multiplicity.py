"""Holm and Benjamini–Hochberg adjusted p-values against statsmodels' `multipletests`."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from eval_platform.stats.multiplicity import adjust_p_values

PEER_NAMES = {"holm": "holm", "benjamini_hochberg": "fdr_bh"}


@pytest.mark.parametrize("method", ["holm", "benjamini_hochberg"])
@pytest.mark.parametrize("seed", range(5))
def test_adjusted_p_values_equal_statsmodels(method, seed):
    rng = np.random.default_rng(seed)
    p = rng.random(int(rng.integers(1, 40))) ** 3
    p[rng.random(p.size) < 0.2] = p[0]  # ties keep their order
    np.testing.assert_allclose(adjust_p_values(p, method), multipletests(p, method=PEER_NAMES[method])[1], rtol=1e-15)


def test_untested_comparisons_are_left_out_of_the_family():
    p = np.array([0.01, np.nan, 0.02, 0.04])
    adjusted = adjust_p_values(p, "holm")
    assert np.isnan(adjusted[1])
    np.testing.assert_allclose(adjusted[[0, 2, 3]], multipletests(p[[0, 2, 3]], method="holm")[1])
    np.testing.assert_array_equal(adjust_p_values(p, "none"), p)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="method must be one of"):
        adjust_p_values([0.1], "bonferonni")
    with pytest.raises(ValueError, match=r"p-values must lie in \[0, 1\]"):
        adjust_p_values([1.2], "holm")
