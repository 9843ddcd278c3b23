"""Inter-annotator agreement, and the human majority (label, mean rating) that judges are compared with."""

from __future__ import annotations

import json
from typing import Literal

import polars as pl

from eval_platform.agreement.rows import Rows
from eval_platform.stats.annotators import (
    CodedAnnotations,
    annotator_agreement_coded,
    annotator_pair_tables,
    majority_labels,
    majority_labels_coded,
)
from eval_platform.stats.kappa import (
    category_counts_coded,
    cohen_kappa_table,
    fleiss_kappa,
    randolph_kappa,
)
from eval_platform.stats.reliability import Level, krippendorff_alphas_coded

ORDERED_SCHEMAS = {"rating", "ranking"}


def _task_key(annotations: pl.DataFrame | pl.LazyFrame) -> list[tuple[str, str, str]]:
    keys = annotations.lazy().select("task", "criterion", "schema").unique().sort("task", "criterion").collect()
    return [tuple(row) for row in keys.iter_rows()]


def inter_annotator(
    annotations: pl.DataFrame | pl.LazyFrame, rows: Rows, categories: dict | None = None, cache: dict | None = None
) -> None:
    """`categories`: (task, criterion) -> the labels declared for a classification (tasks.yaml). Randolph's
    kappa takes chance agreement as 1 / number of categories the annotators could choose, so a declared label
    nobody used still counts. `cache` (see `human_reference`) keeps each task's majority labels.

    Each task's items, annotators and labels (and a rating's values) are coded to integers once, and every
    statistic below is computed from those codes."""
    for task, criterion, schema in _task_key(annotations):
        task_rows = annotations.lazy().filter((pl.col("task") == task) & (pl.col("criterion") == criterion))
        part = task_rows.select("item_id", "annotator", "label", "value").collect()  # all it reads
        base = {"section": "inter_annotator", "task": task, "criterion": criterion, "period": "all"}
        ordered = schema in ORDERED_SCHEMAS
        labelled = CodedAnnotations.of_frame(part)
        # ratings and ranks are compared on their numeric value, classifications on their label
        valued = labelled.relabelled(part["value"]) if ordered else labelled
        levels: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio") if ordered else ("nominal",)
        values = valued.label_names.to_numpy()
        alphas = krippendorff_alphas_coded(valued.items, valued.annotators, valued.labels, values, list(levels))
        for alpha in alphas:  # one coincidence matrix for every level
            rows.add(
                alpha.statistic,
                alpha.value,
                alpha.n,
                note=alpha.note,
                subject="annotators",
                reference="annotators",
                **base,
            )
        declared = None if ordered else (categories or {}).get((task, criterion))
        counts = category_counts_coded(valued.items, valued.labels, values, declared)
        for kappa in (fleiss_kappa(counts), randolph_kappa(counts)):
            rows.add(
                kappa.statistic,
                kappa.value,
                kappa.n,
                note=kappa.note,
                subject="annotators",
                reference="annotators",
                **base,
            )
        majority = majority_labels_coded(labelled)
        if cache is not None and task is not None and criterion is not None:
            cache["majority", task, criterion] = majority
        label_counts = dict(majority.group_by("label").len().sort("label").iter_rows())
        rows.add(
            "items_with_majority",
            float(majority["label"].is_not_null().sum()),
            majority.height,
            subject="annotators",
            reference="annotators",
            details=json.dumps({"majority_label_counts": {str(k): v for k, v in label_counts.items()}}),
            **base,
        )
        _annotator_pairs(valued, ordered, rows, base)
        for row in annotator_agreement_coded(labelled).iter_rows(named=True):
            fields = {**base, "section": "annotator", "subject": row["annotator"], "reference": "others_majority"}
            rows.add("agreement_with_majority", row["agreement_with_majority"], row["n"], **fields)
            rows.add("quality_kappa", row["quality_kappa"], row["n"], **fields)


def _annotator_pairs(coded: CodedAnnotations, ordered: bool, rows: Rows, base: dict) -> None:
    """Cohen's kappa for every pair of annotators sharing at least one item (over the items they share)."""
    weightings: tuple[Literal["linear", "quadratic"] | None, ...] = (
        (None, "linear", "quadratic") if ordered else (None,)
    )
    for a, b, table, _ in annotator_pair_tables(coded):  # one table for the three weightings
        for weights in weightings:
            kappa = cohen_kappa_table(table, weights=weights)
            name = "cohen_kappa" if weights is None else f"cohen_kappa_{weights}"
            rows.add(name, kappa.value, kappa.n, note=kappa.note, subject=a, reference=b, **base)


def human_reference(
    annotations: pl.DataFrame | pl.LazyFrame, task: str, criterion: str | None, cache: dict | None = None
) -> pl.DataFrame:
    """Per item: the majority `label`, mean `value`, and (pairwise tasks) the two responses' trace ids.

    `cache`, one dict per `compute`: each reference is computed once for all the judges of its task, from the
    majority labels `inter_annotator` already computed when there are any."""
    cache = {} if cache is None else cache
    if ("reference", task, criterion) in cache:
        return cache["reference", task, criterion]
    query = annotations.lazy().filter(pl.col("task") == task)
    if criterion is not None:
        query = query.filter(pl.col("criterion") == criterion)
    part = query.collect()
    majority = cache.get(("majority", task, criterion)) if criterion is not None else None
    majority = (majority if majority is not None else majority_labels(part)).select("item_id", "label")
    extra = part.group_by("item_id").agg(
        pl.col("value").mean().alias("value"),
        pl.col("trace_id").drop_nulls().first(),
        pl.col("response1_trace_id").drop_nulls().first(),
        pl.col("response2_trace_id").drop_nulls().first(),
    )
    cache["reference", task, criterion] = majority.join(extra, on="item_id", how="left")
    return cache["reference", task, criterion]


def only_task(annotations: pl.DataFrame | pl.LazyFrame) -> str | None:
    tasks = annotations.lazy().select(pl.col("task").unique()).collect()["task"].to_list()
    return tasks[0] if len(tasks) == 1 else None
