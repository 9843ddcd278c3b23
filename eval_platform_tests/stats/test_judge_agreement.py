"""Judge vs human agreement on labels, scores and pairwise verdicts, against scikit-learn and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import (
    accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
    precision_recall_fscore_support,
)

from eval_platform.stats.judge_agreement import (
    label_agreement,
    pairwise_agreement,
    position_consistency,
    preference_labels,
    score_agreement,
)


def _labels(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference and judge labels; some classes appear on one side only, to exercise zero division."""
    rng = np.random.default_rng(seed)
    n = rng.integers(3, 150)
    reference = rng.integers(0, rng.integers(2, 6), size=n)
    judge = np.where(rng.random(n) < 0.5, reference, rng.integers(0, rng.integers(2, 7), size=n))
    return reference, judge


@pytest.mark.parametrize("seed", range(40))
def test_label_agreement_matches_scikit_learn(seed):
    reference, judge = _labels(seed)
    result = label_agreement(reference, judge)
    precision, recall, f1, _ = precision_recall_fscore_support(reference, judge, average="macro", zero_division=0)
    assert result.accuracy == pytest.approx(accuracy_score(reference, judge), abs=1e-12)
    assert (result.precision, result.recall, result.f1) == pytest.approx((precision, recall, f1), abs=1e-12)
    assert np.array_equal(np.array(result.confusion), confusion_matrix(reference, judge))
    if result.kappa.defined:
        assert result.kappa.value == pytest.approx(cohen_kappa_score(reference, judge), abs=1e-12)


def test_explicit_labels_fix_the_classes_and_their_order():
    result = label_agreement(["A", "A", "tie"], ["A", "B", "tie"], labels=["tie", "A", "B", "other"])
    assert result.labels == ("tie", "A", "B", "other")
    assert result.confusion[1] == (0, 1, 1, 0)
    precision, recall, f1, _ = precision_recall_fscore_support(
        ["A", "A", "tie"], ["A", "B", "tie"], labels=["tie", "A", "B", "other"], average="macro", zero_division=0
    )
    assert (result.precision, result.recall, result.f1) == pytest.approx((precision, recall, f1))


@pytest.mark.parametrize("seed", range(20))
def test_score_agreement_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, size=60).astype(float)
    judge = np.clip(human + rng.normal(0, 1.2, size=60), 1, 5)
    result = score_agreement(human, judge)
    assert result.spearman == pytest.approx(stats.spearmanr(human, judge).statistic, abs=1e-12)
    assert result.pearson == pytest.approx(stats.pearsonr(human, judge).statistic, abs=1e-12)
    assert result.mae == pytest.approx(np.abs(human - judge).mean(), abs=1e-12)


def test_preference_labels_map_pandalm_and_judge_vocabularies():
    verdicts = [1, "2", "0", " Tie ", "a", "B", "garbage", None, ""]
    assert preference_labels(verdicts).to_list() == ["A", "B", "tie", "tie", "A", "B", None, None, None]
    assert preference_labels(verdicts, unusable_as_tie=True).to_list()[-3:] == ["tie", "tie", "tie"]


def test_pairwise_agreement_with_and_without_ties():
    first = ["A", "A", "B", "tie", "tie", "B", None]
    second = ["A", "B", "B", "tie", "A", "tie", "A"]
    result = pairwise_agreement(first, second)
    assert (result.n_with_ties, result.with_ties) == (6, pytest.approx(3 / 6))
    assert (result.n_without_ties, result.without_ties) == (3, pytest.approx(2 / 3))


def test_position_consistency_mirrors_the_swapped_order():
    in_order = ["A", "A", "B", "tie", "A", "B"]
    swapped = ["B", "A", "A", "tie", "tie", "B"]  # consistent, first twice, consistent, consistent, flip, second twice
    result = position_consistency(in_order, swapped)
    assert (result.n, result.inconsistent) == (6, 3)
    assert result.consistency == pytest.approx(0.5)
    assert result.first_position_share == pytest.approx(1 / 3)


def test_degenerate_judge_comparisons_are_undefined_with_a_reason():
    assert label_agreement([None], ["A"]).note == "no item has both labels"
    single_class = label_agreement(["A", "A"], ["A", "A"])
    assert single_class.accuracy == 1.0 and single_class.kappa.value is None and "one and the same" in single_class.note
    assert score_agreement([], []).note == "no item has both scores"
    constant = score_agreement([3, 3, 3], [1, 2, 3])
    assert constant.spearman is None and constant.mae == pytest.approx(1.0) and "constant" in constant.note
    assert "fewer than two" in score_agreement([1.0], [2.0]).note
    only_ties = pairwise_agreement(["tie", "tie"], ["tie", "A"])
    assert only_ties.without_ties is None and only_ties.with_ties == 0.5 and only_ties.note == "no item without a tie"
    assert pairwise_agreement([None], ["A"]).with_ties is None
    assert position_consistency([None], ["A"]).consistency is None
