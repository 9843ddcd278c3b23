"""Cohen's, Fleiss' and Randolph's kappa against statsmodels and scikit-learn, invariances, degenerate input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats import inter_rater

from eval_platform.stats.kappa import (
    category_counts,
    cohen_kappa,
    cohen_kappa_table,
    contingency_table,
    fleiss_kappa,
    randolph_kappa,
)


def _two_raters(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, k = rng.integers(5, 200), rng.integers(2, 7)
    a = rng.integers(0, k, size=n)
    b = np.where(rng.random(n) < 0.6, a, rng.integers(0, k, size=n))
    a[:2], b[:2] = [0, 1], [0, 1]
    return a, b


def _counts(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    subjects, raters, k = rng.integers(3, 80), rng.integers(2, 9), rng.integers(2, 6)
    ratings = rng.integers(0, k, size=(subjects, raters))
    ratings[:, 0] = 0
    ratings[0, 1] = 1
    return category_counts(np.repeat(np.arange(subjects), raters), ratings.ravel())


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", range(30))
def test_cohen_kappa_matches_scikit_learn(seed, weights):
    a, b = _two_raters(seed)
    expected = cohen_kappa_score(a, b, weights=weights)
    assert cohen_kappa(a, b, weights=weights).value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", range(30))
def test_cohen_kappa_standard_errors_match_statsmodels(seed, weights):
    table, _ = contingency_table(*_two_raters(seed))
    ours = cohen_kappa_table(table, weights=weights)
    peer = inter_rater.cohens_kappa(table, wt=weights) if weights else inter_rater.cohens_kappa(table)
    assert ours.value == pytest.approx(peer.kappa, abs=1e-12)
    assert ours.ase == pytest.approx(peer.std_kappa, abs=1e-12)
    assert ours.ase_h0 == pytest.approx(peer.std_kappa0, abs=1e-12)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((peer.kappa_low, peer.kappa_upp), abs=1e-12)
    assert ours.z == pytest.approx(peer.z_value, abs=1e-9)
    assert ours.p_value == pytest.approx(peer.pvalue_two_sided, abs=1e-12)


@pytest.mark.parametrize("seed", range(30))
def test_fleiss_and_randolph_match_statsmodels(seed):
    counts = _counts(seed)
    assert fleiss_kappa(counts).value == pytest.approx(inter_rater.fleiss_kappa(counts), abs=1e-12)
    assert randolph_kappa(counts).value == pytest.approx(inter_rater.fleiss_kappa(counts, method="randolph"), abs=1e-12)


def test_category_counts_builds_the_table_statsmodels_builds():
    rng = np.random.default_rng(1)
    ratings = rng.integers(1, 5, size=(20, 4))
    ours = category_counts(np.repeat(np.arange(20), 4), ratings.ravel())
    assert (ours == inter_rater.aggregate_raters(ratings)[0]).all()


def test_category_counts_keeps_unused_categories_for_randolph():
    counts = category_counts(["s1", "s1", "s2", "s2"], ["yes", "yes", "yes", "no"], categories=["yes", "no", "unsure"])
    assert counts.tolist() == [[2, 0, 0], [1, 1, 0]]
    assert randolph_kappa(counts).chance_agreement == pytest.approx(1 / 3)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), weights=st.sampled_from([None, "linear", "quadratic"]))
def test_cohen_kappa_is_symmetric_in_the_raters(seed, weights):
    a, b = _two_raters(seed)
    forward, backward = cohen_kappa(a, b, weights=weights), cohen_kappa(b, a, weights=weights)
    assert backward.value == pytest.approx(forward.value, abs=1e-12)
    assert backward.ase == pytest.approx(forward.ase, abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_unweighted_kappa_is_invariant_to_relabelling(seed, data):
    a, b = _two_raters(seed)
    names = np.array(data.draw(st.permutations(["p", "q", "r", "s", "t", "u", "v"])), dtype=object)
    assert cohen_kappa(names[a], names[b]).value == pytest.approx(cohen_kappa(a, b).value, abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_fleiss_kappa_ignores_the_order_of_subjects_and_categories(seed, data):
    counts = _counts(seed)
    rows = np.array(data.draw(st.permutations(range(counts.shape[0]))))
    cols = np.array(data.draw(st.permutations(range(counts.shape[1]))))
    assert fleiss_kappa(counts[rows][:, cols]).value == pytest.approx(fleiss_kappa(counts).value, abs=1e-12)


def test_pairs_with_a_missing_label_are_left_out():
    kappa = cohen_kappa([1, 2, None, 1, 2], [1, 2, 2, 2, np.nan])
    assert kappa.n == 3
    assert kappa.value == pytest.approx(cohen_kappa([1, 2, 1], [1, 2, 2]).value)


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ([], [], "no items"),
        ([1, None], [None, 2], "no items"),
        (["yes", "yes", "yes"], ["yes", "yes", "yes"], "one and the same category"),
    ],
    ids=["empty", "no overlapping items", "one category"],
)
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_degenerate_cohen_kappa_is_undefined_with_a_reason(a, b, reason, weights):
    result = cohen_kappa(a, b, weights=weights)
    assert result.value is None and reason in result.note
    assert result.ase is None and result.p_value is None


@pytest.mark.parametrize(
    ("counts", "reason"),
    [
        (np.empty((0, 3)), "no subjects"),
        ([[2, 1], [1, 1]], "different numbers of ratings"),
        ([[1, 0], [0, 1]], "at least two ratings per subject"),
        ([[3], [3]], "two categories"),
        ([[7, 0], [7, 0]], "chance agreement is 1"),
    ],
    ids=["empty", "unequal raters", "single rater", "single category", "all in one category"],
)
def test_degenerate_fleiss_kappa_is_undefined_with_a_reason(counts, reason):
    result = fleiss_kappa(counts)
    assert result.value is None and reason in result.note


label_lists = st.lists(st.sampled_from(["x", "y", "z", None]), max_size=8)


@settings(max_examples=200, deadline=None)
@given(a=label_lists, b=label_lists, weights=st.sampled_from([None, "linear", "quadratic"]))
def test_any_short_label_lists_give_the_peer_value_or_an_explained_undefined(a, b, weights):
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    ours = cohen_kappa(a, b, weights=weights)
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    if ours.value is None:
        assert ours.note
    else:
        expected = cohen_kappa_score([x for x, _ in pairs], [y for _, y in pairs], weights=weights)
        assert ours.value == pytest.approx(expected, abs=1e-12)
