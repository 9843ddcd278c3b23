"""Majority labels, ground truth, per-annotator agreement and quality, and pairwise annotator kappas."""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_platform.stats.annotators import (
    DENSE_CELLS,
    CodedAnnotations,
    annotator_agreement,
    annotator_pair_tables,
    ground_truth,
    majority_labels,
    pairwise_kappas,
)
from eval_platform.stats.kappa import cohen_kappa, cohen_kappa_table


def _annotations(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["item_id", "annotator", "label"], orient="row")


def _random_annotations(seed: int, items: int = 300) -> pl.DataFrame:
    """Five annotators of varying care label a random subset of items with one of three labels."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, size=items)
    rows = []
    for annotator, care in zip("abcde", (0.9, 0.8, 0.7, 0.5, 0.0), strict=True):
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


# ------------------------------------------------------------------ the coded statistics against their definitions


def _messy_annotations(
    seed: int, items: int = 40, annotators: int = 6, labels: int = 4, rows: int | None = None
) -> pl.DataFrame:
    """Random labels with every awkward case: missing labels, items and annotators, and an annotator who
    labelled an item twice (sometimes first without a label)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, items * annotators)) if rows is None else rows

    def pick(prefix: str, k: int, missing: float) -> list[str | None]:
        return [None if rng.random() < missing else f"{prefix}{x:04d}" for x in rng.integers(0, k, n)]

    return pl.DataFrame(
        {"item_id": pick("i", items, 0.03), "annotator": pick("a", annotators, 0.03), "label": pick("l", labels, 0.1)},
        schema={c: pl.String for c in ("item_id", "annotator", "label")},
    )


def _first_labels(annotations: pl.DataFrame) -> dict[tuple, str]:
    """(item, annotator) -> the first label they gave, by the definition."""
    first: dict[tuple, str] = {}
    for item, annotator, label in annotations.select("item_id", "annotator", "label").iter_rows():
        if None not in (item, annotator, label):
            first.setdefault((item, annotator), label)
    return first


def _expected_majority(annotations: pl.DataFrame) -> list[tuple]:
    votes: dict = {}
    for item, label in annotations.select("item_id", "label").iter_rows():
        if label is not None:
            votes.setdefault(item, Counter())[label] += 1
    rows = []
    for item in sorted(votes, key=lambda i: (i is not None, i)):
        counts = votes[item]
        top = max(counts.values())
        tops = [label for label, count in counts.items() if count == top]
        total = sum(counts.values())
        rows.append((item, tops[0] if len(tops) == 1 else None, total, top, top / total))
    return rows


def _expected_quality(annotations: pl.DataFrame) -> list[tuple]:
    first = _first_labels(annotations)
    by_item: dict = {}
    for (item, annotator), label in first.items():
        by_item.setdefault(item, {})[annotator] = label
    rows = []
    for annotator in sorted({a for _, a in first}):
        shared, own, majority = 0, [], []
        for labels in by_item.values():
            if annotator not in labels or len(labels) == 1:
                continue
            shared += 1
            others = Counter(label for other, label in labels.items() if other != annotator)
            top = max(others.values())
            tops = [label for label, count in others.items() if count == top]
            if len(tops) == 1:
                own.append(labels[annotator])
                majority.append(tops[0])
        agreement = float(np.mean([a == b for a, b in zip(own, majority, strict=True)])) if own else None
        kappa = cohen_kappa(own, majority).value if own else None
        rows.append((annotator, shared, len(own), agreement, kappa))
    return rows


def _expected_pairs(annotations: pl.DataFrame, weights=None) -> list[tuple]:
    first = _first_labels(annotations)
    names = sorted({a for _, a in first})
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = sorted(item for item, annotator in first if annotator == a and (item, b) in first)
            if shared:
                kappa = cohen_kappa([first[s, a] for s in shared], [first[s, b] for s in shared], weights=weights)
                rows.append((a, b, kappa.n, kappa.value))
    return rows


def _assert_rows_equal(actual: list[tuple], expected: list[tuple]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert got == tuple(pytest.approx(x, abs=1e-12) if isinstance(x, float) else x for x in want)


@pytest.mark.parametrize("seed", range(40))
def test_majority_quality_and_pair_kappas_follow_their_definitions(seed):
    annotations = _messy_annotations(seed)
    _assert_rows_equal(majority_labels(annotations).rows(), _expected_majority(annotations))
    _assert_rows_equal(
        annotator_agreement(annotations)
        .select("annotator", "items_shared", "n", "agreement_with_majority", "quality_kappa")
        .rows(),
        _expected_quality(annotations),
    )
    _assert_rows_equal(
        pairwise_kappas(annotations).select("annotator_a", "annotator_b", "n", "kappa").rows(),
        _expected_pairs(annotations),
    )


def test_many_distinct_labels_count_the_same_as_few():
    """Over DENSE_CELLS items × labels (and annotator pairs × labels²) the counts come from a sort instead of a
    table: the same definitions hold."""
    annotations = _messy_annotations(1, items=2_500, annotators=8, labels=2_500, rows=20_000)
    assert annotations["item_id"].n_unique() * annotations["label"].n_unique() > DENSE_CELLS
    _assert_rows_equal(majority_labels(annotations).rows(), _expected_majority(annotations))
    _assert_rows_equal(
        annotator_agreement(annotations)
        .select("annotator", "items_shared", "n", "agreement_with_majority", "quality_kappa")
        .rows(),
        _expected_quality(annotations),
    )
    _assert_rows_equal(
        pairwise_kappas(annotations).select("annotator_a", "annotator_b", "n", "kappa").rows(),
        _expected_pairs(annotations),
    )


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
def test_pair_tables_give_weighted_kappas_over_the_labels_each_pair_used(weights):
    """Ratings 1..5 where a pair never used some: the positions (and so the weights) are those of the labels
    the pair used, as `cohen_kappa` on the pair's items gives them."""
    annotations = _messy_annotations(3, items=60, annotators=5, labels=5)
    tables = annotator_pair_tables(CodedAnnotations.of_frame(annotations))
    got = [(a, b, int(table.sum()), cohen_kappa_table(table, weights=weights).value) for a, b, table, _ in tables]
    _assert_rows_equal(got, _expected_pairs(annotations, weights))


def test_a_repeated_annotation_counts_its_first_label_even_after_a_missing_one():
    annotations = _annotations(
        [
            ("i1", "a", None),
            ("i1", "a", "yes"),
            ("i1", "a", "no"),
            ("i1", "b", "yes"),
            ("i2", "a", "no"),
            ("i2", "b", "no"),
        ]
    )
    assert pairwise_kappas(annotations).select("n", "observed_agreement").rows() == [(2, 1.0)]
