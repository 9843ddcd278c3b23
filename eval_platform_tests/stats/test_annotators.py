"""Majority labels, ground truth, per-annotator agreement and quality, and pairwise annotator kappas."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_platform.stats.annotators import annotator_agreement, ground_truth, majority_labels, pairwise_kappas
from eval_platform.stats.kappa import cohen_kappa


def _annotations(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["item_id", "annotator", "label"], orient="row")


def _random_annotations(seed: int, items: int = 300) -> pl.DataFrame:
    """Five annotators of varying care label a random subset of items with one of three labels."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, size=items)
    rows = []
    for annotator, care in zip("abcde", (0.9, 0.8, 0.7, 0.5, 0.0)):
        labelled = rng.random(items) < 0.8
        noise = rng.integers(0, 3, size=items)
        labels = np.where(rng.random(items) < care, truth, noise)
        rows += [(f"item-{i}", annotator, int(labels[i])) for i in np.flatnonzero(labelled)]
    return _annotations(rows)


SMALL = _annotations(
    [
        ("i1", "a", "yes"), ("i1", "b", "yes"), ("i1", "c", "no"),
        ("i2", "a", "no"), ("i2", "b", "yes"),
        ("i3", "a", "no"), ("i3", "b", "no"), ("i3", "c", "no"),
        ("i4", "c", "yes"),
        ("i5", "a", None), ("i5", "b", "no"),
    ]
)  # fmt: skip


def test_majority_label_consensus_and_split_votes():
    majority = majority_labels(SMALL)
    assert majority.rows() == [
        ("i1", "yes", 3, 2, pytest.approx(2 / 3)),
        ("i2", None, 2, 1, 0.5),
        ("i3", "no", 3, 3, 1.0),
        ("i4", "yes", 1, 1, 1.0),
        ("i5", "no", 1, 1, 1.0),
    ]


def test_ground_truth_keeps_clear_majorities_only():
    assert ground_truth(SMALL)["item_id"].to_list() == ["i1", "i3"]
    assert ground_truth(SMALL, min_consensus=0.9)["item_id"].to_list() == ["i3"]
    assert ground_truth(SMALL, min_votes=1)["item_id"].to_list() == ["i1", "i3", "i4", "i5"]


def test_agreement_with_the_majority_of_the_others():
    table = {row["annotator"]: row for row in annotator_agreement(SMALL).to_dicts()}
    # a: i1 others {yes, no} split, i2 others {yes}: disagrees, i3 others {no, no}: agrees.
    assert (table["a"]["items_shared"], table["a"]["n"], table["a"]["agreement_with_majority"]) == (3, 2, 0.5)
    # c: i1 others {yes, yes}: disagrees; i3 agrees; i4 alone.
    assert (table["c"]["items_shared"], table["c"]["n"], table["c"]["agreement_with_majority"]) == (2, 2, 0.5)


def test_quality_kappa_is_cohens_kappa_against_the_leave_one_out_majority():
    annotations = _random_annotations(3)
    quality = annotator_agreement(annotations)
    for annotator in "abcde":
        own = annotations.filter(pl.col("annotator") == annotator)
        others = majority_labels(annotations.filter(pl.col("annotator") != annotator)).drop_nulls("label")
        paired = own.join(others, on="item_id", suffix="_majority")
        row = quality.filter(pl.col("annotator") == annotator).row(0, named=True)
        assert row["n"] == paired.height
        assert row["quality_kappa"] == pytest.approx(cohen_kappa(paired["label"], paired["label_majority"]).value)


def test_quality_ranks_careful_annotators_above_careless_ones():
    quality = annotator_agreement(_random_annotations(11)).sort("quality_kappa", descending=True)
    assert quality["annotator"].to_list() == list("abcde")
    assert quality["quality_kappa"][-1] < 0.1


def test_pairwise_kappas_match_cohen_kappa_on_each_pair():
    annotations = _random_annotations(5)
    wide = annotations.pivot(on="annotator", index="item_id", values="label")
    for row in pairwise_kappas(annotations).iter_rows(named=True):
        pair = wide.select(row["annotator_a"], row["annotator_b"]).drop_nulls()
        expected = cohen_kappa(pair[row["annotator_a"]], pair[row["annotator_b"]])
        assert (row["n"], row["kappa"]) == (expected.n, pytest.approx(expected.value))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_relabelling_categories_changes_no_agreement_figure(seed, data):
    annotations = _random_annotations(seed, items=60)
    names = data.draw(st.permutations(["x", "y", "z"]))
    relabelled = annotations.with_columns(pl.col("label").replace_strict(dict(enumerate(names))))
    assert np.allclose(pairwise_kappas(relabelled)["kappa"], pairwise_kappas(annotations)["kappa"])
    assert np.allclose(
        annotator_agreement(relabelled)["quality_kappa"].to_numpy(),
        annotator_agreement(annotations)["quality_kappa"].to_numpy(),
        equal_nan=True,
    )


def test_degenerate_annotations_give_nulls_not_errors():
    lonely = _annotations([("i1", "a", 1), ("i2", "b", 2)])
    assert annotator_agreement(lonely).rows() == [("a", 0, 0, None, None), ("b", 0, 0, None, None)]
    assert pairwise_kappas(lonely).height == 0
    unanimous = _annotations([("i1", "a", 1), ("i1", "b", 1), ("i2", "a", 1), ("i2", "b", 1)])
    assert pairwise_kappas(unanimous).rows() == [("a", "b", 2, 1.0, None)]
    empty = _annotations([]).cast({"item_id": pl.String, "annotator": pl.String, "label": pl.Int64})
    assert majority_labels(empty).height == 0 and annotator_agreement(empty).height == 0
