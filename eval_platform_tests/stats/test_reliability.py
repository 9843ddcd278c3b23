"""Krippendorff's alpha against the `krippendorff` package, its invariances, long form, and degenerate input."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from eval_platform.stats.reliability import (
    DENSE_CELLS,
    LEVELS,
    krippendorff_alpha,
    krippendorff_alpha_long,
    krippendorff_alphas_coded,
    krippendorff_alphas_long,
)


def _random_matrix(seed: int) -> np.ndarray:
    """Coders × units, values 1..k, about 30% missing, at least two distinct pairable values."""
    rng = np.random.default_rng(seed)
    coders, units, k = rng.integers(2, 7), rng.integers(5, 60), rng.integers(2, 8)
    truth = rng.integers(1, k + 1, size=units)
    noise = rng.integers(1, k + 1, size=(coders, units))
    matrix = np.where(rng.random((coders, units)) < 0.6, truth, noise).astype(float)
    matrix[rng.random(matrix.shape) < 0.3] = np.nan
    matrix[:2, :2] = [[1, 2], [1, 2]]
    return matrix


def _long(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    coders, units = np.indices(matrix.shape)
    coded = ~np.isnan(matrix)
    return units[coded], coders[coded], matrix[coded]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", range(25))
def test_matches_the_krippendorff_package_with_missing_values(seed, level):
    matrix = _random_matrix(seed)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
    assert krippendorff_alpha(matrix, level).value == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("level", LEVELS)
def test_long_form_gives_the_matrix_result(level):
    matrix = _random_matrix(7)
    assert krippendorff_alpha_long(*_long(matrix), level).value == pytest.approx(
        krippendorff_alpha(matrix, level).value, abs=1e-12
    )


def test_long_form_counts_a_coder_once_per_unit_and_says_so():
    units, coders, values = _long(_random_matrix(3))
    repeated = krippendorff_alpha_long(
        np.append(units, units[0]), np.append(coders, coders[0]), np.append(values, 99.0)
    )
    assert repeated.value == krippendorff_alpha_long(units, coders, values).value
    assert "1 repeated (unit, coder)" in repeated.note


def test_nominal_alpha_takes_string_labels_in_long_form():
    units, coders, values = _long(_random_matrix(5))
    names = np.array(["", "bad", "fair", "good", "great", "superb", "sublime", "divine"], dtype=object)
    as_text = krippendorff_alpha_long(units, coders, names[values.astype(int)])
    assert as_text.value == pytest.approx(krippendorff_alpha_long(units, coders, values).value, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), level=st.sampled_from(LEVELS), data=st.data())
def test_alpha_does_not_depend_on_the_order_of_coders_or_units(seed, level, data):
    matrix = _random_matrix(seed)
    coders = data.draw(st.permutations(range(matrix.shape[0])))
    units = data.draw(st.permutations(range(matrix.shape[1])))
    shuffled = matrix[np.array(coders)][:, np.array(units)]
    expected = krippendorff_alpha(matrix, level).value
    assert krippendorff_alpha(shuffled, level).value == pytest.approx(expected, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_nominal_alpha_is_invariant_to_relabelling(seed, data):
    matrix = _random_matrix(seed)
    mapping = np.array([0, *data.draw(st.permutations([10, 20, 30, 40, 50, 60, 70]))], dtype=float)
    relabelled = np.where(np.isnan(matrix), np.nan, mapping[np.nan_to_num(matrix).astype(int)])
    assert krippendorff_alpha(relabelled).value == pytest.approx(krippendorff_alpha(matrix).value, abs=1e-12)


@pytest.mark.parametrize(
    ("matrix", "reason"),
    [
        ([[1, 2, 3, 2]], "no unit was coded by two or more coders"),
        ([[1, np.nan], [np.nan, 2]], "no unit was coded by two or more coders"),
        ([[np.nan, np.nan], [np.nan, np.nan]], "no coded values"),
        ([[3, 3, 3], [3, 3, np.nan]], "no variation"),
        (np.empty((0, 0)), "no coded values"),
    ],
    ids=["single coder", "no overlapping units", "nothing coded", "all values equal", "empty"],
)
@pytest.mark.parametrize("level", LEVELS)
def test_degenerate_input_is_undefined_with_a_reason(matrix, reason, level):
    result = krippendorff_alpha(matrix, level)
    assert result.value is None and not result.defined
    assert reason in result.note
    assert result.interpretation is None


small_matrices = hnp.arrays(
    float, hnp.array_shapes(min_dims=2, max_dims=2, max_side=5), elements=st.sampled_from([1.0, 2.0, 3.0, np.nan])
)


@settings(max_examples=200, deadline=None)
@given(matrix=small_matrices, level=st.sampled_from(LEVELS))
def test_any_small_matrix_gives_the_peer_value_or_an_explained_undefined(matrix, level):
    """Where the `krippendorff` package refuses the data or divides 0 by 0, ours is undefined with a note."""
    ours = krippendorff_alpha(matrix, level)
    try:
        with np.errstate(invalid="ignore"):
            expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
    except ValueError:
        expected = np.nan
    if np.isnan(expected):
        assert ours.value is None and ours.note
    else:
        assert ours.value == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("seed", range(10))
def test_several_levels_at_once_equal_one_level_at_a_time(seed):
    """One coincidence matrix for every level gives each level's alpha, n and note exactly (repeated values too)."""
    units, coders, values = _long(_random_matrix(seed))
    units, coders, values = (
        np.append(units, units[:3]),
        np.append(coders, coders[:3]),
        np.append(values, values[:3] + 1),
    )
    together = krippendorff_alphas_long(units, coders, values, list(LEVELS))
    assert [(r.statistic, r.value, r.n, r.note) for r in together] == [
        (r.statistic, r.value, r.n, r.note)
        for r in (krippendorff_alpha_long(units, coders, values, level) for level in LEVELS)
    ]
    assert together[0].note == "3 repeated (unit, coder) values ignored"


def test_several_levels_of_undefined_alpha_keep_their_reason():
    same = krippendorff_alphas_long([1, 1, 2, 2], ["a", "b", "a", "b"], [3, 3, 3, 3], ["nominal", "interval"])
    assert [(r.statistic, r.value) for r in same] == [
        ("krippendorff_alpha_nominal", None),
        ("krippendorff_alpha_interval", None),
    ]
    assert all("no variation" in r.note for r in same)
    with pytest.raises(ValueError, match="interval alpha needs numeric values"):
        krippendorff_alphas_long([1, 1], ["a", "b"], ["x", "y"], ["nominal", "interval"])


# --------------------------------------------------------------------------- dense and sparse coincidences, coded input


def _alpha_by_definition(matrix: np.ndarray, level: str) -> float:
    """1 − D_o / D_e straight from Krippendorff's pairwise definition (interval or nominal): every ordered pair of
    values within a unit, weighted 1 / (m_u − 1), against every ordered pair of pairable values."""
    delta = (lambda a, b: (a - b) ** 2) if level == "interval" else (lambda a, b: (a != b).astype(float))
    observed, pooled = 0.0, []
    for unit in matrix.T:
        values = unit[~np.isnan(unit)]
        if values.size >= 2:
            observed += delta(values[:, None], values[None, :]).sum() / (values.size - 1)
            pooled.append(values)
    values = np.concatenate(pooled)
    n = values.size
    if level == "interval":
        expected = 2 * n * (values**2).sum() - 2 * values.sum() ** 2
    else:
        expected = n**2 - (np.unique(values, return_counts=True)[1] ** 2).sum()
    return 1 - (n - 1) * observed / expected


def test_many_distinct_values_take_the_sparse_coincidences_and_follow_the_definition():
    """Over DENSE_CELLS units × values the coincidence matrix comes from a sparse count table (the package would
    need units × values² floats here, so the definition is the reference)."""
    rng = np.random.default_rng(0)
    truth = rng.normal(size=2_100)
    matrix = np.round(truth + rng.normal(scale=0.3, size=(3, truth.size)), 3)
    matrix[rng.random(matrix.shape) < 0.2] = np.nan
    assert truth.size * np.unique(matrix[~np.isnan(matrix)]).size > DENSE_CELLS
    for level in ("interval", "nominal"):
        expected = _alpha_by_definition(matrix, level)
        assert krippendorff_alpha(matrix, level).value == pytest.approx(expected, abs=1e-10)
        assert krippendorff_alpha_long(*_long(matrix), level).value == pytest.approx(expected, abs=1e-10)


def test_the_definition_agrees_with_the_package_on_few_values():
    matrix = _random_matrix(4)
    for level in ("interval", "nominal"):
        expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
        assert _alpha_by_definition(matrix, level) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("dtype", [int, float, object])
def test_a_matrix_of_any_type_gives_the_packages_nominal_alpha(dtype):
    matrix = _random_matrix(11)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    typed = np.where(np.isnan(matrix), -1, matrix).astype(int) if dtype is int else matrix.astype(dtype)
    if dtype is int:  # -1 is a value here, so code the missing cells of the package's matrix the same way
        expected = krippendorff.alpha(reliability_data=typed.astype(float), level_of_measurement="nominal")
    assert krippendorff_alpha(typed, "nominal").value == pytest.approx(expected, abs=1e-12)


def test_text_units_and_coders_give_the_result_of_their_codes():
    units, coders, values = _long(_random_matrix(9))
    as_text = krippendorff_alphas_long(
        [f"unit {u}" for u in units], [f"coder {c}" for c in coders], values, list(LEVELS)
    )
    as_codes = krippendorff_alphas_coded(
        units, coders, np.searchsorted(np.unique(values), values), np.unique(values), list(LEVELS)
    )
    assert [a.value for a in as_text] == pytest.approx([a.value for a in as_codes], abs=1e-12)
    assert [a.n for a in as_text] == [a.n for a in as_codes]
