"""Human annotation statistics over long frames (one row per item, annotator and label): majority labels,
per-annotator agreement and quality, pairwise kappas between annotators, and ground-truth export.

Everything is a polars group-by, so a million annotations cost seconds. An annotator counts once per item:
repeated (item, annotator) rows keep the first label. Null labels are left out.
"""

from __future__ import annotations

import polars as pl

CONSENSUS_TOLERANCE = 1e-9  # so that 2 of 3 votes passes a threshold written as 2/3


def majority_labels(annotations: pl.DataFrame, item: str = "item_id", label: str = "label") -> pl.DataFrame:
    """One row per item: `label` (the most voted label; null when two or more labels tie for the most votes),
    `votes`, `top_votes` and `consensus` = top_votes / votes. Sorted by item."""
    counts = annotations.drop_nulls(label).group_by(item, label).len("count")
    most = pl.col("count") == pl.col("count").max()
    return (
        counts.group_by(item)
        .agg(
            pl.col(label).filter(most).first(),
            pl.col("count").sum().alias("votes"),
            pl.col("count").max().alias("top_votes"),
            most.sum().alias("labels_at_top"),
        )
        .with_columns(
            pl.when(pl.col("labels_at_top") == 1).then(pl.col(label)).alias(label),
            (pl.col("top_votes") / pl.col("votes")).alias("consensus"),
        )
        .drop("labels_at_top")
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


def clear_majority(majority: pl.DataFrame, min_consensus: float = 2 / 3, min_votes: int = 2, label: str = "label") -> pl.DataFrame:
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
    labelled = _one_label_per_annotator(annotations, item, annotator, label)
    others = (
        labelled.rename({label: "own"})
        .join(labelled.group_by(item, label).len("count"), on=item)
        .with_columns((pl.col("count") - (pl.col(label) == pl.col("own")).cast(pl.UInt32)).alias("others"))
    )
    most = pl.col("others") == pl.col("others").max()
    per_item = (
        others.group_by(item, annotator)
        .agg(
            pl.col("own").first(),
            pl.col(label).filter(most).first().alias("majority"),
            most.sum().alias("labels_at_top"),
            pl.col("others").sum().alias("other_votes"),
        )
        .filter(pl.col("other_votes") > 0)
    )
    unique_majority = pl.col("labels_at_top") == 1
    chance = _chance_agreement(per_item.filter(unique_majority), [annotator], "own", "majority")
    summary = per_item.group_by(annotator).agg(
        pl.len().alias("items_shared"),
        unique_majority.sum().alias("n"),
        (pl.col("own") == pl.col("majority")).filter(unique_majority).mean().alias("agreement_with_majority"),
    )
    return (
        labelled.select(annotator)
        .unique()
        .join(summary, on=annotator, how="left")
        .join(chance, on=annotator, how="left")
        .with_columns(
            pl.col("items_shared", "n").fill_null(0),
            _kappa("agreement_with_majority").alias("quality_kappa"),
        )
        .drop("chance")
        .sort(annotator)
    )


def pairwise_kappas(
    annotations: pl.DataFrame, item: str = "item_id", annotator: str = "annotator", label: str = "label"
) -> pl.DataFrame:
    """Cohen's kappa (unweighted) for every pair of annotators over the items both labelled.

    Columns: `annotator_a` < `annotator_b`, `n` shared items, `observed_agreement`, `kappa` (null when
    undefined: both used one and the same label). Agrees with `kappa.cohen_kappa` on each pair.
    """
    labelled = _one_label_per_annotator(annotations, item, annotator, label)
    left = labelled.rename({annotator: "annotator_a", label: "label_a"})
    right = labelled.rename({annotator: "annotator_b", label: "label_b"})
    pairs = left.join(right, on=item).filter(pl.col("annotator_a") < pl.col("annotator_b"))
    keys = ["annotator_a", "annotator_b"]
    chance = _chance_agreement(pairs, keys, "label_a", "label_b")
    return (
        pairs.group_by(keys)
        .agg(pl.len().alias("n"), (pl.col("label_a") == pl.col("label_b")).mean().alias("observed_agreement"))
        .join(chance, on=keys, how="left")
        .with_columns(_kappa("observed_agreement").alias("kappa"))
        .drop("chance")
        .sort(keys)
    )


def _one_label_per_annotator(annotations: pl.DataFrame, item: str, annotator: str, label: str) -> pl.DataFrame:
    return (
        annotations.select(item, annotator, label)
        .drop_nulls()
        .unique(subset=[item, annotator], keep="first", maintain_order=True)
    )


def _chance_agreement(rows: pl.DataFrame, keys: list[str], first: str, second: str) -> pl.DataFrame:
    """Per group, Σ over labels of P(first = l) · P(second = l): Cohen's chance agreement. Groups whose two
    sides share no label have no row (chance 0)."""
    shares_first = rows.group_by(*keys, first).len("count_first").rename({first: "value"})
    shares_second = rows.group_by(*keys, second).len("count_second").rename({second: "value"})
    totals = rows.group_by(keys).len("total")
    return (
        shares_first.join(shares_second, on=[*keys, "value"])
        .join(totals, on=keys)
        .group_by(keys)
        .agg((pl.col("count_first") * pl.col("count_second") / pl.col("total") ** 2).sum().alias("chance"))
    )


def _kappa(observed: str) -> pl.Expr:
    chance = pl.col("chance").fill_null(0.0)
    return pl.when(chance < 1).then((pl.col(observed) - chance) / (1 - chance))
