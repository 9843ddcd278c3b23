"""The interpretation bands shown next to agreement coefficients."""

from __future__ import annotations

import pytest

from eval_platform.stats.results import interpret_alpha, interpret_kappa

ALPHA_BANDS = [
    (1.0, "reliable"),
    (0.8, "reliable"),
    (0.799, "tentative"),
    (0.667, "tentative"),
    (0.666, "unreliable"),
    (-0.2, "unreliable"),
    (None, None),
]
KAPPA_BANDS = [
    (-0.01, "poor"),
    (0.0, "slight"),
    (0.2, "slight"),
    (0.21, "fair"),
    (0.4, "fair"),
    (0.41, "moderate"),
    (0.6, "moderate"),
    (0.61, "substantial"),
    (0.8, "substantial"),
    (0.81, "almost perfect"),
    (1.0, "almost perfect"),
    (None, None),
]


@pytest.mark.parametrize(("alpha", "band"), ALPHA_BANDS)
def test_alpha_bands_follow_krippendorff(alpha, band):
    assert interpret_alpha(alpha) == band


@pytest.mark.parametrize(("kappa", "band"), KAPPA_BANDS)
def test_kappa_bands_follow_landis_and_koch(kappa, band):
    assert interpret_kappa(kappa) == band
