"""Human-calibrated experiment figures: each variant's prediction-powered mean (or pass rate) and the difference
between variants, equal to ppi-python on the same traces, beside the judge-only figures that a lenient judge
inflates."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from eval_platform.experiments.analysis import experiment_results
from eval_platform.stats.distributions import norm_ppf
from eval_platform_tests.experiments.test_analysis import NO_TRACES, experiment, frame, one, score_rows

ppi_py = pytest.importorskip("ppi_py")


def _variant(rng, variant: str, size: int, rate: float, field: str):
    """A judge that passes 30 % of the true failures (or scores 0.1 too high); humans label the first 60 traces."""
    truth = (rng.random(size) < rate).astype(float)
    if field == "passed":
        judged = np.maximum(truth, rng.random(size) < 0.3).astype(float)
    else:
        truth = np.clip(truth * 0.5 + rng.random(size) * 0.5, 0, 1)
        judged = np.clip(truth + 0.1 + rng.normal(0, 0.05, size), 0, 1)
    rows = score_rows("helpfulness", variant, judged, field=field)
    human = pl.DataFrame(
        {
            "trace_id": [r["trace_id"] for r in rows[:60]],
            "score": truth[:60],
            "passed": truth[:60] if field == "passed" else [None] * 60,
        },
        schema={"trace_id": pl.String, "score": pl.Float64, "passed": pl.Float64},
    )
    return rows, human, truth[:60], judged[:60], judged[60:]


@pytest.mark.parametrize("field", ["passed", "score"])
def test_variant_means_and_difference_equal_ppi_python(field):
    rng = np.random.default_rng(21)
    rows_a, human_a, *data_a = _variant(rng, "a", 900, 0.5, field)
    rows_b, human_b, *data_b = _variant(rng, "b", 800, 0.6, field)
    config = experiment(primary_metric={"evaluator": "helpfulness", "field": field}, alpha=0.1)
    human = {"helpfulness": pl.concat([human_a, human_b])}
    results = experiment_results([config], frame(rows_a + rows_b), NO_TRACES, human=human)
    z = norm_ppf(0.95)
    peer = {}
    for variant, data in (("a", data_a), ("b", data_b)):
        point = float(np.squeeze(ppi_py.ppi_mean_pointestimate(*data)))
        low, high = (float(np.squeeze(v)) for v in ppi_py.ppi_mean_ci(*data, alpha=0.1))
        peer[variant] = (point, (high - low) / (2 * z))
        row = one(results, kind="variant", variant=variant)
        assert row["human_n"] == 60
        assert row["ppi_mean"] == pytest.approx(point, abs=1e-9)
        assert (row["ppi_ci_low"], row["ppi_ci_high"]) == pytest.approx((low, high), abs=1e-9)
        assert row["mean"] > row["ppi_ci_high"]  # the judge-only mean sits above the calibrated interval
    comparison = one(results, kind="comparison", variant="b")
    difference = peer["b"][0] - peer["a"][0]
    half = z * np.hypot(peer["a"][1], peer["b"][1])
    assert comparison["ppi_difference"] == pytest.approx(difference, abs=1e-9)
    assert comparison["ppi_diff_ci_low"] == pytest.approx(difference - half, abs=1e-9)
    assert comparison["ppi_diff_ci_high"] == pytest.approx(difference + half, abs=1e-9)
    assert comparison["ppi_mean_control"] == pytest.approx(peer["a"][0], abs=1e-9)
    assert comparison["human_n"] == comparison["human_n_control"] == 60


def test_without_human_labels_the_calibrated_columns_are_null():
    rng = np.random.default_rng(3)
    rows, *_ = _variant(rng, "a", 80, 0.5, "score")
    more, *_ = _variant(rng, "b", 80, 0.5, "score")
    results = experiment_results([experiment()], frame(rows + more), NO_TRACES)
    assert results["ppi_mean"].null_count() == results.height and results["human_n"].null_count() == results.height
