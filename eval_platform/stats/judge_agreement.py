"""How well a judge agrees with humans (or another judge): labels, scores and pairwise verdicts.

Inputs are aligned arrays, one entry per item; items where either side is missing are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from eval_platform.stats._labels import as_series, paired
from eval_platform.stats.kappa import CohenKappa, cohen_kappa_table, contingency_table

PREFERENCES = {"1": "A", "a": "A", "left": "A", "2": "B", "b": "B", "right": "B", "0": "tie", "tie": "tie"}


def preference_labels(verdicts, unusable_as_tie: bool = False) -> pl.Series:
    """Pairwise verdicts in the judge's vocabulary: "A" (first response better), "B" or "tie".

    Accepts PandaLM codes 1 / 2 / 0 (as numbers or text), A / B / tie and LLMFAO's left / right / tie, in any
    case. Anything else (PandaLM's "garbage", an empty reply) is unusable: null, or "tie" with
    `unusable_as_tie`, which is how PandaLM's published metrics count it.
    """
    normalized = as_series(verdicts).cast(pl.String).str.strip_chars().str.to_lowercase()
    labels = normalized.replace_strict(PREFERENCES, default=None, return_dtype=pl.String)
    return labels.fill_null("tie") if unusable_as_tie else labels


@dataclass(frozen=True)
class LabelAgreement:
    """Judge labels against reference labels (human majority or another judge).

    Precision, recall and F1 are macro averages over `labels`, each class weighted equally, with 0 for a
    class whose denominator is empty (scikit-learn's zero_division=0). `confusion[i][j]` counts items with
    reference label `labels[i]` and judge label `labels[j]`.
    """

    n: int
    accuracy: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    kappa: CohenKappa
    labels: tuple
    confusion: tuple[tuple[int, ...], ...]
    interpretation: str | None = None
    note: str | None = None


def label_agreement(reference, judge, labels=None) -> LabelAgreement:
    """Accuracy, macro precision/recall/F1, Cohen's kappa and the confusion matrix of `judge` vs `reference`.

    The classes are `labels` if given, else every label present in either array (scikit-learn's default).
    """
    return label_agreement_table(*contingency_table(reference, judge, labels))


def label_agreement_table(table: np.ndarray, classes: tuple) -> LabelAgreement:
    """`label_agreement` from its contingency table (`kappa.contingency_table`: rows reference, columns judge)."""
    kappa = cohen_kappa_table(table)
    n = int(table.sum())
    confusion = tuple(tuple(int(c) for c in row) for row in table)
    if n == 0:
        return LabelAgreement(0, None, None, None, None, kappa, classes, confusion, note="no item has both labels")
    hits = np.diag(table).astype(float)
    predicted, actual = table.sum(axis=0), table.sum(axis=1)
    precision = np.divide(hits, predicted, out=np.zeros_like(hits), where=predicted > 0)
    recall = np.divide(hits, actual, out=np.zeros_like(hits), where=actual > 0)
    f1_denominator = predicted + actual
    f1 = np.divide(2 * hits, f1_denominator, out=np.zeros_like(hits), where=f1_denominator > 0)
    return LabelAgreement(
        n=n,
        accuracy=float(hits.sum() / n),
        precision=float(precision.mean()),
        recall=float(recall.mean()),
        f1=float(f1.mean()),
        kappa=kappa,
        labels=classes,
        confusion=confusion,
        interpretation=kappa.interpretation,
        note=kappa.note,
    )


def label_table(first: pl.Series, second: pl.Series) -> tuple[np.ndarray, tuple]:
    """`kappa.contingency_table` of two label columns taken as text (booleans as "false" / "true"), computed from
    the count of each pair of labels (a group-by) instead of coding every row's text: the same table, in the
    same category order (the sorted texts seen on either side), several times faster on millions of rows."""
    seen = pl.concat([side.drop_nulls().unique().cast(pl.String) for side in (first, second)]).unique().sort()
    position = {label: i for i, label in enumerate(seen.to_list())}
    pairs = pl.DataFrame({"a": first, "b": second}).drop_nulls().group_by("a", "b").len()
    pairs = pairs.with_columns(pl.col("a").cast(pl.String), pl.col("b").cast(pl.String))
    table = np.zeros((len(position), len(position)), dtype=np.int64)
    for a, b, count in pairs.iter_rows():
        table[position[a], position[b]] += count
    return table, tuple(position)


@dataclass(frozen=True)
class ScoreAgreement:
    """Judge scores against reference scores: rank and linear correlation, and mean absolute error."""

    n: int
    spearman: float | None
    pearson: float | None
    mae: float | None
    note: str | None = None


def score_agreement(reference, judge) -> ScoreAgreement:
    """Spearman, Pearson and MAE; correlations are undefined for n < 2 or when either side is constant."""
    x, y = (side.cast(pl.Float64).to_numpy() for side in paired(reference, judge))
    if x.size == 0:
        return ScoreAgreement(0, None, None, None, note="no item has both scores")
    mae = float(np.abs(x - y).mean())
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        note = "correlation undefined: fewer than two items" if x.size < 2 else "correlation undefined: constant scores"
        return ScoreAgreement(int(x.size), None, None, mae, note=note)
    return ScoreAgreement(
        n=int(x.size),
        spearman=_pearson(_average_ranks(x), _average_ranks(y)),
        pearson=_pearson(x, y),
        mae=mae,
    )


MAX_TABLE_CELLS = 1 << 16  # distinct reference values × distinct judge values, for statistics from counts


def score_agreement_by_counts(reference, judge) -> ScoreAgreement:
    """`score_agreement` from the table of (reference, judge) value pairs (`score_agreement_table`) when both
    sides take few values (judge scores on a scale: about twice as fast on a million items), else from the items."""
    x, y = (side.cast(pl.Float64).to_numpy() for side in paired(reference, judge))
    x_values, y_values = (np.sort(pl.Series(v, dtype=pl.Float64).unique().to_numpy()) for v in (x, y))
    if x_values.size * y_values.size > MAX_TABLE_CELLS:
        return score_agreement(reference, judge)
    cells = np.searchsorted(x_values, x) * y_values.size + np.searchsorted(y_values, y)
    table = np.bincount(cells, minlength=x_values.size * y_values.size).reshape(x_values.size, y_values.size)
    return score_agreement_table(table, x_values, y_values)


def score_agreement_table(table: np.ndarray, reference_values: np.ndarray, judge_values: np.ndarray) -> ScoreAgreement:
    """`score_agreement` from the count of each pair of values: `table[i, j]` items with reference
    `reference_values[i]` and judge `judge_values[j]` (each sorted, distinct). Spearman is Pearson's r of the
    average ranks, which come from the values' counts; the same statistics as from the items, but for the
    rounding of sums taken in another order (within 1e-12), and tables of days add up to a window's."""
    n = int(table.sum())
    if n == 0:
        return ScoreAgreement(0, None, None, None, note="no item has both scores")
    weights = table.astype(float)
    mae = float((weights * np.abs(reference_values[:, None] - judge_values[None, :])).sum() / n)
    reference_counts, judge_counts = table.sum(axis=1), table.sum(axis=0)
    if n < 2 or np.count_nonzero(reference_counts) < 2 or np.count_nonzero(judge_counts) < 2:
        note = "correlation undefined: fewer than two items" if n < 2 else "correlation undefined: constant scores"
        return ScoreAgreement(n, None, None, mae, note=note)
    return ScoreAgreement(
        n=n,
        spearman=_weighted_pearson(weights, ranks_from_counts(reference_counts), ranks_from_counts(judge_counts)),
        pearson=_weighted_pearson(weights, reference_values.astype(float), judge_values.astype(float)),
        mae=mae,
    )


def _weighted_pearson(weights: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """`_pearson` of the items a table counts (`weights[i, j]` items at (x[i], y[j]); both sides not constant)."""
    n = weights.sum()
    if n == 2:  # exactly ±1, as `_pearson` gives for two items: the two cells differ on both sides
        i, j = np.nonzero(weights)
        return float(np.sign(x[i[1]] - x[i[0]]) * np.sign(y[j[1]] - y[j[0]]))
    x_counts, y_counts = weights.sum(axis=1), weights.sum(axis=0)
    xm, ym = x - (x_counts @ x) / n, y - (y_counts @ y) / n
    covariance = xm @ weights @ ym
    return float(np.clip(covariance / np.sqrt((x_counts @ xm**2) * (y_counts @ ym**2)), -1.0, 1.0))


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r of two non-constant arrays, computed as `scipy.stats.pearsonr` computes it (centred, scaled
    norms, clipped to [-1, 1], exactly ±1 for two items), without importing scipy.stats (about a second)."""
    if x.size == 2:
        return float(np.sign(x[1] - x[0]) * np.sign(y[1] - y[0]))
    xm, ym = x - x.mean(), y - y.mean()
    xmax, ymax = np.abs(xm).max(), np.abs(ym).max()
    normxm, normym = xmax * np.linalg.norm(xm / xmax), ymax * np.linalg.norm(ym / ymax)
    return float(np.clip(np.dot(xm / normxm, ym / normym), -1.0, 1.0))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (scipy's rankdata), exactly: from the count of each distinct value when there are
    few (judge scores and mean ratings are on a scale), without sorting the n values; else by polars' rank."""
    distinct = pl.Series(values).unique()
    if distinct.len() > max(FEW_DISTINCT, values.size // 16):
        return pl.Series(values).rank("average").to_numpy()
    codes, counts = _value_codes(values, np.sort(distinct.to_numpy()))
    return ranks_from_counts(counts)[codes]


FEW_DISTINCT = 1024  # up to this many distinct values (or a sixteenth of the values), ranks come from counts


def _value_codes(values: np.ndarray, sorted_distinct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's position among `sorted_distinct` (which holds every value), and each position's count."""
    codes = np.searchsorted(sorted_distinct, values)
    return codes, np.bincount(codes, minlength=sorted_distinct.size)


def ranks_from_counts(counts: np.ndarray) -> np.ndarray:
    """The average rank of each distinct value (in sorted order) from how many times each occurs: the values
    ranked `last - count + 1` to `last` share their mean. Half-integers, exact in float64."""
    last = np.cumsum(counts)
    return last - (counts - 1) / 2.0


@dataclass(frozen=True)
class PairwiseAgreement:
    """Agreement of two pairwise judges, as in the MT-Bench paper (Zheng et al. 2023).

    S1 (`with_ties`): all items, three classes (A, B, tie); random agreement 1/3.
    S2 (`without_ties`): only items where both judges picked a side; random agreement 1/2.
    """

    n_with_ties: int
    with_ties: float | None
    n_without_ties: int
    without_ties: float | None
    note: str | None = None


def pairwise_agreement(first, second, tie="tie") -> PairwiseAgreement:
    """Share of items on which two judges' pairwise verdicts agree, with and without ties.

    A verdict that flips with the presentation order (position inconsistency) should be passed as a tie,
    as MT-Bench's S1 counts it.
    """
    a, b = paired(first, second)
    decisive = ((a != tie) & (b != tie)).to_numpy()
    same = (a == b).to_numpy()
    return pairwise_agreement_counts(len(same), int(same.sum()), int(decisive.sum()), int(same[decisive].sum()))


def pairwise_agreement_counts(n_all: int, same: int, n_decisive: int, same_decisive: int) -> PairwiseAgreement:
    """`pairwise_agreement` from its counts: items with both verdicts, how many agree; items where neither is a
    tie, how many of those agree."""
    note = None if n_decisive else ("no item has verdicts from both judges" if n_all == 0 else "no item without a tie")
    return PairwiseAgreement(
        n_with_ties=n_all,
        with_ties=same / n_all if n_all else None,
        n_without_ties=n_decisive,
        without_ties=same_decisive / n_decisive if n_decisive else None,
        note=note,
    )


@dataclass(frozen=True)
class PositionConsistency:
    """How often a pairwise judge gives the same winner in both presentation orders.

    `first_position_share` is the share of the inconsistent items on which the judge picked whichever
    response was shown first both times: 0.5 is no positional preference, 1.0 a pure first-position bias.
    """

    n: int
    consistency: float | None
    inconsistent: int
    first_position_share: float | None
    note: str | None = None


def position_consistency(shown_in_order, shown_swapped, first="A", second="B", tie="tie") -> PositionConsistency:
    """Consistency of verdicts given in presentation terms: `shown_in_order` judged (A, B), `shown_swapped`
    judged (B, A), so its `first` means B. Consistent when the swapped verdict, mirrored, equals the first."""
    return position_consistency_from_counts(*position_counts(shown_in_order, shown_swapped, first, second, tie))


def position_counts(shown_in_order, shown_swapped, first="A", second="B", tie="tie") -> tuple[int, int, int]:
    """What `position_consistency` is computed from: (items judged in both orders, inconsistent items, inconsistent
    items where the judge picked the first shown both times). Counts add up, so windows can sum days."""
    a, b = paired(shown_in_order, shown_swapped)
    if a.len() == 0:
        return 0, 0, 0
    mirrored = b.replace_strict({first: second, second: first, tie: tie}, default=None, return_dtype=a.dtype)
    consistent = (a == mirrored).fill_null(False)
    prefers_first = ((a == first) & (b == first)).filter(~consistent)
    return a.len(), int((~consistent).sum()), int(prefers_first.sum())


def position_consistency_from_counts(n: int, inconsistent: int, prefers_first: int) -> PositionConsistency:
    """`position_consistency` from `position_counts` (of one set of items, or summed over several)."""
    if n == 0:
        return PositionConsistency(0, None, 0, None, note="no item was judged in both orders")
    return PositionConsistency(
        n=n,
        consistency=(n - inconsistent) / n,
        inconsistent=inconsistent,
        first_position_share=prefers_first / inconsistent if inconsistent else None,
    )
