"""Human annotation statistics over long frames (one row per item, annotator and label): majority labels,
per-annotator agreement and quality, pairwise kappas between annotators, and ground-truth export.

Each frame is coded once into integers (`CodedAnnotations`: items, annotators and labels, each in the sorted
order of its distinct values) and every statistic is a few numpy passes over the codes (bincounts, one sort),
so a million annotations cost well under a second. An annotator counts once per item: repeated (item,
annotator) rows keep the first label. Null labels are left out (before that choice, so a repeated row with a
label counts when the first had none). Majority labels count every row, as votes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from eval_platform.stats._labels import (
    as_series,
    encode_series,
    first_occurrences,
    group_codes,
)

CONSENSUS_TOLERANCE = 1e-9  # so that 2 of 3 votes passes a threshold written as 2/3
# Groups × codes cells up to which counts come from a bincount (8 bytes a cell) rather than a sort.
DENSE_CELLS = 4_000_000


@dataclass(frozen=True)
class CodedAnnotations:
    """One task's annotations as integer codes (-1 = missing) of equal length: items, annotators and labels,
    each code indexing the distinct values in `item_names` (in order of first appearance), `annotator_names`
    and `label_names` (both sorted)."""

    items: np.ndarray
    annotators: np.ndarray
    labels: np.ndarray
    item_names: pl.Series
    annotator_names: pl.Series
    label_names: pl.Series

    @classmethod
    def of(cls, items, annotators, labels) -> CodedAnnotations:
        """Codes for three aligned columns (Series, arrays or lists; None and NaN missing)."""
        item_codes, item_names = group_codes(items)
        (annotator_codes, annotator_names), (label_codes, label_names) = (
            encode_series(as_series(column)) for column in (annotators, labels)
        )
        return cls(item_codes, annotator_codes, label_codes, item_names, annotator_names, label_names)

    @classmethod
    def of_frame(
        cls, annotations: pl.DataFrame, item: str = "item_id", annotator: str = "annotator", label: str = "label"
    ) -> CodedAnnotations:
        return cls.of(annotations[item], annotations[annotator], annotations[label])

    def relabelled(self, labels) -> CodedAnnotations:
        """The same items and annotators with another label column (a rating's numeric value, say)."""
        codes, names = encode_series(as_series(labels))
        return CodedAnnotations(self.items, self.annotators, codes, self.item_names, self.annotator_names, names)

    @cached_property
    def one_label_per_annotator(self) -> np.ndarray:
        """Row positions with an item, annotator and label, the first of each (item, annotator)."""
        rows = np.flatnonzero((self.items >= 0) & (self.annotators >= 0) & (self.labels >= 0))
        n_annotators = max(len(self.annotator_names), 1)
        keys = self.items[rows] * n_annotators + self.annotators[rows]
        return rows[first_occurrences(keys, bound=len(self.item_names) * n_annotators)]


def majority_labels(annotations: pl.DataFrame, item: str = "item_id", label: str = "label") -> pl.DataFrame:
    """One row per item: `label` (the most voted label; null when two or more labels tie for the most votes),
    `votes`, `top_votes` and `consensus` = top_votes / votes. Sorted by item (a null item first)."""
    (items, item_names), (labels, label_names) = (
        group_codes(annotations[item]),
        encode_series(as_series(annotations[label])),
    )
    no_annotators = np.full(items.size, -1)
    coded = CodedAnnotations(items, no_annotators, labels, item_names, pl.Series([], dtype=pl.String), label_names)
    return majority_labels_coded(coded, item, label)


def majority_labels_coded(coded: CodedAnnotations, item: str = "item_id", label: str = "label") -> pl.DataFrame:
    """`majority_labels` from coded annotations. Every row with a label is a vote (a null item is one item)."""
    voted = coded.labels >= 0
    n_labels = len(coded.label_names)
    groups, codes, counts = _cells(coded.items[voted] + 1, coded.labels[voted], len(coded.item_names) + 1, n_labels)
    starts = _starts(groups)
    votes = np.add.reduceat(counts, starts) if counts.size else counts
    top = np.maximum.reduceat(counts, starts) if counts.size else counts
    at_top = (
        np.add.reduceat(counts == np.repeat(top, np.diff(np.append(starts, counts.size))), starts)
        if counts.size
        else counts
    )
    best = np.maximum.reduceat(counts * n_labels + codes, starts) % n_labels if counts.size else counts
    names = pl.concat([pl.Series([None], dtype=coded.item_names.dtype), coded.item_names])
    return (
        pl.DataFrame(
            {
                item: names.gather(groups[starts] if counts.size else []),
                label: coded.label_names.gather(best),
                "votes": pl.Series(votes, dtype=pl.UInt32),
                "top_votes": pl.Series(top, dtype=pl.UInt32),
                "unique": at_top == 1,
            }
        )
        .with_columns(
            pl.when(pl.col("unique")).then(pl.col(label)).alias(label),
            (pl.col("top_votes") / pl.col("votes")).alias("consensus"),
        )
        .drop("unique")
        .sort(item)
    )


def ground_truth(
    annotations: pl.DataFrame,
    min_consensus: float = 2 / 3,
    min_votes: int = 2,
    item: str = "item_id",
    label: str = "label",
) -> pl.DataFrame:
    """Items whose majority label is clear enough to serve as gold: at least `min_votes` votes, a unique
    most-voted label, and `consensus` >= `min_consensus`. Columns as in `majority_labels`."""
    return clear_majority(majority_labels(annotations, item, label), min_consensus, min_votes, label)


def clear_majority(
    majority: pl.DataFrame, min_consensus: float = 2 / 3, min_votes: int = 2, label: str = "label"
) -> pl.DataFrame:
    """`ground_truth` from majority labels already computed (`majority_labels`)."""
    return majority.filter(
        pl.col(label).is_not_null(),
        pl.col("votes") >= min_votes,
        pl.col("consensus") >= min_consensus - CONSENSUS_TOLERANCE,
    )


def annotator_agreement(
    annotations: pl.DataFrame, item: str = "item_id", annotator: str = "annotator", label: str = "label"
) -> pl.DataFrame:
    """Per annotator, how they compare with the majority of the *other* annotators on each item.

    Columns: `items_shared` (items another annotator also labelled), `n` (of those, items where the others
    have a unique most-voted label), `agreement_with_majority` (share of the `n` items where the annotator
    gave that label) and `quality_kappa`, the annotator quality score: Cohen's kappa between the annotator's
    labels and the others' majority over the same `n` items. Unlike raw agreement it does not reward always
    giving the most common label; null when undefined (n = 0, or a single label on both sides).
    """
    return annotator_agreement_coded(CodedAnnotations.of_frame(annotations, item, annotator, label), annotator)


def annotator_agreement_coded(coded: CodedAnnotations, annotator: str = "annotator") -> pl.DataFrame:
    """`annotator_agreement` from coded annotations.

    The others' majority needs no per-row pass over labels: per item, the most votes `m1` (on `t1` labels,
    the first two `l1`, `l1b`) and the most on any label below that, `m2` (on `t2` labels), decide it. An
    annotator whose label has fewer than `m1` votes sees `t1` labels on top; one of two or more labels on top
    sees the others (one: it is their majority); the only label on top keeps it (m1 − 1 > m2) or ties with the
    `t2` below it (m1 − 1 = m2). So it is computed once per (item, label), not once per annotation."""
    rows = coded.one_label_per_annotator
    items, annotators, labels = coded.items[rows], coded.annotators[rows], coded.labels[rows]
    n_items, n_annotators, n_labels = len(coded.item_names), len(coded.annotator_names), len(coded.label_names)
    cell_keys, row_cells, counts = _cell_index(items * n_labels + labels, n_items * n_labels)
    cell_items, cell_labels = np.divmod(cell_keys, n_labels)
    # per item (cells come sorted by item): its cells ranked by votes, most first
    starts = _starts(cell_items)
    sizes = np.diff(np.append(starts, counts.size))
    last = max(counts.size - 1, 0)
    most = int(counts.max(initial=0))
    # a stable sort of nearly sorted keys (the cells are in item, label order): fast, and ties stay in label order
    ranked = np.argsort(cell_items * (most + 1) + (most - counts), kind="stable")
    ranked_counts, ranked_labels = counts[ranked], cell_labels[ranked]
    m1, l1 = ranked_counts[starts], ranked_labels[starts]
    t1 = np.add.reduceat(ranked_counts == np.repeat(m1, sizes), starts) if counts.size else m1
    l1b = ranked_labels[np.minimum(starts + 1, last)]
    m2 = np.where(t1 < sizes, ranked_counts[np.minimum(starts + t1, last)], 0)
    t2 = np.add.reduceat(ranked_counts == np.repeat(m2, sizes), starts) if counts.size else m2
    votes = np.add.reduceat(counts, starts) if counts.size else counts
    # per (item, label) cell: what an annotator who gave that label sees among the others
    m1, t1, l1, l1b, m2, t2, votes = (np.repeat(a, sizes) for a in (m1, t1, l1, l1b, m2, t2, votes))
    below_top = counts < m1
    labels_at_top = np.where(below_top, t1, np.where(t1 >= 2, t1 - 1, np.where(m1 - 1 > m2, 1, 1 + t2)))
    majority = np.where(below_top, l1, np.where(t1 == 1, cell_labels, np.where(l1 == cell_labels, l1b, l1)))
    shared = (votes > 1)[row_cells]  # another annotator labelled the item
    unique = shared & (labels_at_top == 1)[row_cells]
    majority = majority[row_cells]

    items_shared = np.bincount(annotators[shared], minlength=n_annotators)
    n = np.bincount(annotators[unique], minlength=n_annotators)
    agreeing = np.bincount(annotators[unique], weights=labels[unique] == majority[unique], minlength=n_annotators)
    chance = _chance_agreement(annotators[unique], labels[unique], majority[unique], n_annotators, n_labels)
    with np.errstate(divide="ignore", invalid="ignore"):
        agreement = np.where(n > 0, agreeing / np.maximum(n, 1), np.nan)
        chance = chance / n.astype(float) ** 2
    seen = np.flatnonzero(np.bincount(annotators, minlength=n_annotators))
    return (
        pl.DataFrame(
            {
                annotator: coded.annotator_names.gather(seen),
                "items_shared": pl.Series(items_shared[seen], dtype=pl.UInt32),
                "n": pl.Series(n[seen], dtype=pl.UInt32),
                "agreement_with_majority": pl.Series(agreement[seen]).fill_nan(None),
                "chance": pl.Series(chance[seen]).fill_nan(None),
            }
        )
        .with_columns(_kappa("agreement_with_majority").alias("quality_kappa"))
        .drop("chance")
    )


def pairwise_kappas(
    annotations: pl.DataFrame, item: str = "item_id", annotator: str = "annotator", label: str = "label"
) -> pl.DataFrame:
    """Cohen's kappa (unweighted) for every pair of annotators over the items both labelled.

    Columns: `annotator_a` < `annotator_b`, `n` shared items, `observed_agreement`, `kappa` (null when
    undefined: both used one and the same label). Agrees with `kappa.cohen_kappa` on each pair.
    """
    tables = annotator_pair_tables(CodedAnnotations.of_frame(annotations, item, annotator, label))
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        "annotator_a": annotations.schema[annotator],
        "annotator_b": annotations.schema[annotator],
        "n": pl.UInt32,
        "observed_agreement": pl.Float64,
        "chance": pl.Float64,
    }
    rows = []
    for a, b, table, _ in tables:
        n = table.sum()
        chance = float((table.sum(axis=1) * table.sum(axis=0)).sum()) / n**2
        rows.append((a, b, n, float(np.trace(table)) / n, chance))
    return (
        pl.DataFrame(rows, schema=schema, orient="row")
        .with_columns(_kappa("observed_agreement").alias("kappa"))
        .drop("chance")
    )


def annotator_pair_tables(coded: CodedAnnotations) -> list[tuple[object, object, np.ndarray, pl.Series]]:
    """For every pair of annotators a < b who labelled an item in common: (a, b, the contingency table of their
    labels on the items they share, rows a's, and the labels it counts). The labels are those either of them
    gave on those items, in sorted order, as `kappa.contingency_table` counts them. Sorted by (a, b).

    One sort of the (item, annotator) keys lines each item's annotators up; the k-th neighbours in that order
    are the pairs k apart, and one bincount over (pair, label of a, label of b) counts every table at once."""
    rows = coded.one_label_per_annotator
    n_annotators, n_labels = len(coded.annotator_names), len(coded.label_names)
    order = np.argsort(coded.items[rows] * n_annotators + coded.annotators[rows])
    items, annotators, labels = (column[rows][order] for column in (coded.items, coded.annotators, coded.labels))
    cells = []
    for distance in range(1, n_annotators):
        same = np.flatnonzero(items[distance:] == items[:-distance])
        if not same.size:
            break
        a, b = annotators[same], annotators[same + distance]
        cells.append(((a * n_annotators + b) * n_labels + labels[same]) * n_labels + labels[same + distance])
    if not cells:
        return []
    pairs, within, counts = _cells(
        *np.divmod(np.concatenate(cells), n_labels * n_labels), n_annotators * n_annotators, n_labels * n_labels
    )
    out = []
    starts = _starts(pairs)
    for start, end in zip(starts, np.append(starts[1:], pairs.size), strict=True):
        flat = np.zeros(n_labels * n_labels, np.int64)
        flat[within[start:end]] = counts[start:end]
        table = flat.reshape(n_labels, n_labels)
        used = np.flatnonzero(table.sum(axis=0) + table.sum(axis=1))
        a, b = divmod(int(pairs[start]), n_annotators)
        out.append(
            (
                coded.annotator_names[a],
                coded.annotator_names[b],
                table[np.ix_(used, used)],
                coded.label_names.gather(used),
            )
        )
    return out


def _cells(
    groups: np.ndarray, codes: np.ndarray, n_groups: int, n_codes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (group, code) pairs that occur and how often, sorted by group then code: a bincount when the
    groups × codes table is small enough, else a sort of the pair keys."""
    keys = groups * n_codes + codes
    if n_groups * n_codes <= DENSE_CELLS:
        counts = np.bincount(keys, minlength=n_groups * n_codes)
        keys = np.flatnonzero(counts)
        counts = counts[keys]
    else:
        keys, counts = np.unique(keys, return_counts=True)
    groups, codes = np.divmod(keys, n_codes)
    return groups, codes, counts


def _cell_index(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct keys (sorted), each row's position among them, and their counts."""
    if n_keys <= DENSE_CELLS:
        counts = np.bincount(keys, minlength=n_keys)
        present = counts > 0
        return np.flatnonzero(present), (np.cumsum(present) - 1)[keys], counts[present]
    return np.unique(keys, return_inverse=True, return_counts=True)


def _starts(sorted_groups: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in a sorted array."""
    return np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]]) if sorted_groups.size else sorted_groups


def _chance_agreement(
    groups: np.ndarray, first: np.ndarray, second: np.ndarray, n_groups: int, n_codes: int
) -> np.ndarray:
    """Per group, Σ over labels of count(first = l) · count(second = l): Cohen's chance agreement times the
    group's count squared."""
    first_groups, first_codes, first_counts = _cells(groups, first, n_groups, n_codes)
    second_groups, second_codes, second_counts = _cells(groups, second, n_groups, n_codes)
    _, in_first, in_second = np.intersect1d(
        first_groups * n_codes + first_codes,
        second_groups * n_codes + second_codes,
        assume_unique=True,
        return_indices=True,
    )
    products = first_counts[in_first] * second_counts[in_second]
    return np.bincount(first_groups[in_first], weights=products, minlength=n_groups)


def _kappa(observed: str) -> pl.Expr:
    chance = pl.col("chance").fill_null(0.0)
    return pl.when(chance < 1).then((pl.col(observed) - chance) / (1 - chance))
