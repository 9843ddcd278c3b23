"""Every published case in data/sources/reference_stats/ reproduced to the precision its source asserts.

Expected values are read from the JSON files (see that folder's PROVENANCE.md), never typed in here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import toeplitz

from eval_platform.stats.kappa import (
    cohen_kappa,
    cohen_kappa_table,
    fleiss_kappa,
    randolph_kappa,
)
from eval_platform.stats.reliability import krippendorff_alpha

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "sources" / "reference_stats"


def _load(name: str) -> dict:
    return json.loads((REFERENCE / f"{name}.json").read_text())


def _matrix(rows: list[list]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


def _expand(runs: list[list[int]]) -> np.ndarray:
    return np.repeat([label for label, _ in runs], [count for _, count in runs])


KRIPPENDORFF_CASES = [
    pytest.param(name, level, expected, id=f"{name}-{level}")
    for name in ("krippendorff_alpha_krippendorff2011", "krippendorff_alpha_wikipedia_3coders")
    for level, expected in _load(name)["expected"].items()
]


@pytest.mark.parametrize(("name", "level", "expected"), KRIPPENDORFF_CASES)
def test_krippendorff_alpha(name, level, expected):
    result = krippendorff_alpha(_matrix(_load(name)["reliability_data"]), level)
    assert round(result.value, expected["decimals"]) == expected["value"]


@pytest.mark.parametrize("name", ["fleiss_kappa_fleiss1971_diagnoses", "fleiss_kappa_wikipedia_example"])
def test_fleiss_kappa(name):
    case = _load(name)
    expected = case["expected"]["fleiss_kappa"]
    result = fleiss_kappa(case["counts_subjects_x_categories"])
    assert round(result.value, expected["decimals"]) == expected["value"]


def test_fleiss_1971_at_four_decimals_as_usually_quoted():
    result = fleiss_kappa(_load("fleiss_kappa_fleiss1971_diagnoses")["counts_subjects_x_categories"])
    assert round(result.value, 4) == 0.4302


def test_wikipedia_fleiss_per_subject_agreement_averages_to_the_printed_values():
    case = _load("fleiss_kappa_wikipedia_example")
    result = fleiss_kappa(case["counts_subjects_x_categories"])
    assert result.observed_agreement == pytest.approx(np.mean(case["per_subject_P_i_as_printed"]), abs=5e-4)


FLEISS_RANDOLPH_FIELDS = {
    "fleiss_fixed_marginal": lambda counts: fleiss_kappa(counts).value,
    "randolph_free_marginal": lambda counts: randolph_kappa(counts).value,
    "percent_overall_agreement": lambda counts: randolph_kappa(counts).observed_agreement,
}
FLEISS_RANDOLPH_CASES = [
    pytest.param(case["counts"], field, value, case.get("atol", 1e-12), id=f"{case['counts']}-{field}")
    for case in _load("fleiss_vs_randolph_kappa_small_tables")["cases"]
    for field, value in case["expected"].items()
]


@pytest.mark.parametrize(("counts", "field", "expected", "atol"), FLEISS_RANDOLPH_CASES)
def test_fleiss_vs_randolph(counts, field, expected, atol):
    assert FLEISS_RANDOLPH_FIELDS[field](counts) == pytest.approx(expected, abs=atol)


ARTSTEIN_POESIO_WEIGHTS = {
    "kappa": None,
    "kappa_unweighted": None,
    "kappa_linear": "linear",
    "kappa_quadratic": "quadratic",
}
ARTSTEIN_POESIO_CASES = [
    pytest.param(case, key, expected, id=f"{case['name']}-{key}")
    for case in _load("cohen_kappa_artstein_poesio_sklearn")["cases"]
    for key, expected in case["expected"].items()
]


@pytest.mark.parametrize(("case", "key", "expected"), ARTSTEIN_POESIO_CASES)
def test_cohen_kappa_artstein_poesio(case, key, expected):
    y1, y2 = _expand(case["y1_runs"]), _expand(case["y2_runs"])
    weights = ARTSTEIN_POESIO_WEIGHTS[key]
    from_labels = cohen_kappa(y1, y2, weights=weights)
    assert round(from_labels.value, expected["decimals"]) == expected["value"]
    from_table = cohen_kappa_table(case["contingency_rows_y1_cols_y2"], weights=weights)
    assert from_table.value == pytest.approx(from_labels.value, abs=1e-12)


def test_cohen_kappa_is_symmetric_and_honours_labels_as_scikit_learn_asserts():
    case = _load("cohen_kappa_artstein_poesio_sklearn")["cases"][0]
    y1, y2 = _expand(case["y1_runs"]), _expand(case["y2_runs"])
    kappa = cohen_kappa(y1, y2).value
    assert cohen_kappa(y2, y1).value == pytest.approx(kappa, abs=1e-15)
    with_extra = cohen_kappa(np.append(y1, [2] * 4), np.append(y2, [2] * 4), labels=[0, 1])
    assert with_extra.value == pytest.approx(kappa, abs=1e-15)


SAS_FIELDS = {
    "kappa": lambda r: r.value,
    "ase": lambda r: r.ase,
    "ci95_low": lambda r: r.ci_low,
    "ci95_upp": lambda r: r.ci_high,
    "ase_h0": lambda r: r.ase_h0,
    "z": lambda r: r.z,
    "p_two_sided": lambda r: r.p_value,
    "p_one_sided": lambda r: r.p_value / 2,
}
SAS_EXPECTED = _load("cohen_kappa_sas_statsmodels")["expected"]
SAS_CASES = [
    pytest.param(weights, SAS_EXPECTED[key], id=key)
    for key, weights in (("unweighted", None), ("weighted_linear", "linear"))
]


@pytest.mark.parametrize(("weights", "expected"), SAS_CASES)
def test_cohen_kappa_ase_ci_and_z_match_sas(weights, expected):
    result = cohen_kappa_table(_load("cohen_kappa_sas_statsmodels")["contingency"], weights=weights)
    for field, read in SAS_FIELDS.items():
        assert round(read(result), expected["decimals"]) == pytest.approx(expected[field], abs=1e-12), field


def _irr_weights(key: str):
    if key.startswith("weights_"):
        return toeplitz([int(w) for w in re.findall(r"\d+", key)])
    return {"unweighted": None, "equal_linear": "linear", "squared_quadratic": "quadratic"}[key]


IRR_CASES = [
    pytest.param(key, expected, id=key)
    for key, expected in _load("cohen_kappa_irr_anxiety")["expected_rater2_vs_rater3"].items()
]


@pytest.mark.parametrize(("key", "expected"), IRR_CASES)
def test_cohen_kappa_irr_anxiety(key, expected):
    """R prints 7 significant digits; category 5 is never used by these raters, so weights go by position."""
    ratings = np.array(_load("cohen_kappa_irr_anxiety")["ratings_subjects_x_raters"])
    result = cohen_kappa(ratings[:, 1], ratings[:, 2], weights=_irr_weights(key))
    assert result.value == pytest.approx(expected["kappa"], abs=1e-7)
    assert result.z == pytest.approx(expected["z"], abs=1e-6)
    assert result.p_value == pytest.approx(expected["p_value"], abs=1e-7)
